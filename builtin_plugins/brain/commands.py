"""Slash commands typed in a conversation (every surface sends them as turn text).

Instant commands answer at once, even while a turn runs: ``/goal status|pause|clear``,
``/subgoal …``, ``/yolo [on|off|default on|off]``, ``/model [SPEC]``, ``/remember <text>``,
``/forget <id or text>`` (the user's long-term memories, through service ``memory`` when a
plugin offers it), ``/help``, and commands contributed by plugins (``register_commands``). Driving commands need the conversation idle and
start goal turns: ``/goal <text>``, ``/goal resume`` (or ``/goal start`` for a draft), and
``/goal draft <text>`` (one model call that writes the contract).
"""

from __future__ import annotations

import inspect
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elowen_sdk import CapabilityError, ServiceUnavailable
from elowen_sdk.chat import ChatRequest, Message
from elowen_sdk.services.memory import InvalidMemory, MemoryService

from .goals import PROMPTS, GoalLimits, status_text

if TYPE_CHECKING:
    from .service import BrainService
    from .sessions import Session

__all__ = ["CHANNEL_HELP", "CONTINUE", "CommandResult", "is_driving", "reply_event", "run_command"]

log = logging.getLogger("elowen.plugin.brain")

FAILED = "Sorry, that did not work: {}"
"""The reply to a plugin command whose handler raised (``{}``: the exception's message)."""

CONTINUE = "Continue working on the goal. Report with the sentinel lines."

_CONTRACT_SCHEMA = {
    "type": "object",
    "properties": {k: {"type": "string"} for k in ("outcome", "verification", "constraints", "boundaries", "stop_when")},
    "required": ["outcome", "verification", "constraints", "boundaries", "stop_when"],
    "additionalProperties": False,
}

HELP = """Commands:
  /goal <text>            set a persistent goal and start working on it
  /goal draft <text>      draft a goal contract for review (start it with /goal start)
  /goal status|pause|resume|clear
  /subgoal <text>         add a subgoal;  /subgoal remove N;  /subgoal clear
  /yolo on|off            approve tool calls automatically in this session (destructive ones still ask)
  /yolo default on|off    your default for new sessions
  /model [PROVIDER/MODEL] show or set this conversation's model (/model default: back to the default)
  /remember <text>        save a fact to your long-term memory
  /forget <id or text>    take a memory out of recall (its text stays in its history)
  /help                   this list"""

CHANNEL_HELP = """Chat commands:
  /allow N                allow the tool call waiting as approval #N
  /reject N               reject approval #N (or dismiss question #N)
  /answer N TEXT          answer question #N
  /abort                  stop the running turn
  /unlink                 unlink this chat from your Elowen user"""
"""The commands only a chat platform's sender has (see :mod:`.channels`); added to ``/help``
there."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A command's reply text, and the goal input to drive with next (``None``: nothing to run)."""

    text: str
    drive: str | None = None
    error: str | None = None
    """Set when the command failed (a plugin command's handler raised): the exception's
    message; ``text`` is then ``"Sorry, that did not work: <message>"``."""


def reply_event(reply: CommandResult) -> tuple[str, dict[str, Any]]:
    """The session event a command reply is sent as: ``("brain.command", {"text"})``, or for a
    failed command ``("brain.error", {"message": reply.text, "code": "command_failed"})`` (so
    ``elowen chat -m`` exits 1, as for a failed turn)."""
    if reply.error is not None:
        return "brain.error", {"message": reply.text, "code": "command_failed"}
    return "brain.command", {"text": reply.text}


def is_driving(text: str) -> bool:
    """Whether ``text`` is a command that runs model turns (needs the conversation idle)."""
    parts = text.strip().split(maxsplit=2)
    if not parts or parts[0] != "/goal" or len(parts) == 1:
        return False
    return parts[1] not in ("status", "pause", "clear")


def _limits(service: BrainService) -> GoalLimits:
    return GoalLimits.from_config(service.config)


async def _goal(service: BrainService, session: Session, args: str, max_turns: int | None) -> CommandResult:
    db = service.db
    sub, _, rest = args.strip().partition(" ")
    goal = db.live_goal(session.id)
    yolo = service.yolo(session)
    if sub in ("", "status"):
        return CommandResult(status_text(goal or db.last_goal(session.id), _limits(service), yolo=yolo))
    if sub == "pause":
        if goal is None or goal["state"] != "active":
            return CommandResult("No active goal to pause.")
        goal = db.update_goal(goal["id"], state="paused", pause_reason="user")
        service.goal_event(session, goal, "paused")
        return CommandResult("Goal paused. /goal resume to go on.")
    if sub == "clear":
        if goal is None:
            return CommandResult("No goal to clear.")
        goal = db.update_goal(goal["id"], state="cleared")
        service.goal_event(session, goal, "cleared")
        return CommandResult("Goal cleared.")
    if sub in ("resume", "start"):
        if goal is None:
            return CommandResult("No goal to resume. Set one with /goal <text>.")
        if goal["state"] == "active":
            return CommandResult("The goal is already running.")
        goal = db.update_goal(
            goal["id"], state="active", pause_reason=None, turns_run=0, tokens_run=0, turn_budget=max_turns if max_turns else goal["turn_budget"]
        )
        service.goal_event(session, goal, "resumed")
        return CommandResult(f"Goal resumed: {goal['text']}", drive=CONTINUE)
    if sub == "draft":
        if not rest.strip():
            return CommandResult("Usage: /goal draft <text>")
        contract = await _draft(service, session, rest.strip())
        goal = db.create_goal(session.id, rest.strip(), state="draft", contract=contract, turn_budget=max_turns)
        service.goal_event(session, goal, "drafted")
        return CommandResult(status_text(goal, _limits(service), yolo=yolo) + "\nReview it, then /goal start (or /goal clear).")
    text = args.strip()
    goal = db.create_goal(session.id, text, state="active", turn_budget=max_turns)
    service.goal_event(session, goal, "started")
    return CommandResult(f"Goal set: {text}", drive=f"New goal: {text}\nStart working on it.")


async def _draft(service: BrainService, session: Session, text: str) -> dict[str, Any]:
    try:
        template = (PROMPTS / "goal_draft.md").read_text(encoding="utf-8")
    except OSError:
        template = "Draft a goal contract (outcome, verification, constraints, boundaries, stop_when) for: {goal}"
    request = ChatRequest(
        service.model_for(session),
        [Message("user", template.format(goal=text))],
        response_schema=_CONTRACT_SCHEMA,
        schema_name="goal_contract",
        purpose="brain.goal_draft",
    )
    try:
        result = await service.relay().chat(request)
        data = json.loads(result.text)
        if isinstance(data, dict):
            return {k: str(data.get(k, "")) for k in _CONTRACT_SCHEMA["properties"]}
    except Exception as exc:  # a draft is a convenience: never fail the command on the model
        service.ctx.log.warning("goal draft by the model failed: %s", exc)
    return {
        "outcome": text,
        "verification": "(to be agreed)",
        "constraints": "(none stated)",
        "boundaries": "(none stated)",
        "stop_when": "blocked, or the budget is reached",
    }


def _subgoal(service: BrainService, session: Session, args: str) -> CommandResult:
    db = service.db
    goal = db.live_goal(session.id)
    if goal is None:
        return CommandResult("No goal. Set one with /goal <text> first.")
    subs = list(goal["subgoals"])
    sub, _, rest = args.strip().partition(" ")
    if sub == "clear":
        subs = []
    elif sub == "remove":
        if not (rest.strip().isascii() and rest.strip().isdigit()) or not 1 <= int(rest) <= len(subs):
            return CommandResult(f"Usage: /subgoal remove N (1–{len(subs)})")
        subs.pop(int(rest) - 1)
    elif args.strip():
        subs.append({"text": args.strip(), "done": False})
    else:
        return CommandResult("Usage: /subgoal <text> | /subgoal remove N | /subgoal clear")
    goal = db.update_goal(goal["id"], subgoals=subs)
    service.goal_event(session, goal, "subgoals")
    return CommandResult(status_text(goal, _limits(service), yolo=service.yolo(session)))


def _yolo(service: BrainService, session: Session, args: str) -> CommandResult:
    words = args.split()
    if words[:1] == ["default"] and len(words) == 2 and words[1] in ("on", "off") and session.user_id is not None:
        service.db.set_pref(session.user_id, yolo=int(words[1] == "on"))
        return CommandResult(f"YOLO default {words[1]} (this session: {'on' if service.yolo(session) else 'off'}).")
    if words in (["on"], ["off"]):
        session.yolo = words[0] == "on"
        service.session_event(session, "brain.yolo", {"yolo": session.yolo})
        return CommandResult(f"YOLO {words[0]} for this session." + (" Destructive actions still ask." if session.yolo else ""))
    if not words:
        return CommandResult(f"YOLO is {'on' if service.yolo(session) else 'off'} ({'session override' if session.yolo is not None else 'your default'}).")
    return CommandResult("Usage: /yolo on|off, /yolo default on|off")


FORGET_CANDIDATES = 5
"""Memories ``/forget <text>`` looks at (the best-ranked for the text)."""


def _memory_service(service: BrainService) -> MemoryService | None:
    try:
        return service.ctx.service(MemoryService)
    except (ServiceUnavailable, CapabilityError):
        return None


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


async def _remember(service: BrainService, session: Session, args: str) -> CommandResult:
    """``/remember <text>``: a manual memory of the conversation's user (provenance ``owner``:
    the user typed it), learnt in this conversation."""
    if session.user_id is None:
        return CommandResult("Memories belong to signed-in users.")
    memory = _memory_service(service)
    if memory is None:
        return CommandResult("Long-term memory is off (the memory plugin is not enabled).")
    if not args.strip():
        return CommandResult("Usage: /remember <text>  (a fact to recall in later conversations)")
    try:
        saved = await memory.remember(session.user_id, args.strip(), source="manual", provenance="owner", conversation_id=str(session.id))
    except InvalidMemory as exc:
        return CommandResult(f"Not remembered: {exc}")
    return CommandResult(f"Remembered (memory {saved.id}): {saved.text}")


async def _forget(service: BrainService, session: Session, args: str) -> CommandResult:
    """``/forget <id>`` forgets that memory of the user; ``/forget <text>`` the one memory among
    the best :data:`FORGET_CANDIDATES` for the text whose text contains it (case and spacing
    ignored) — several or none are listed with their ids instead, nothing is forgotten."""
    if session.user_id is None:
        return CommandResult("Memories belong to signed-in users.")
    memory = _memory_service(service)
    if memory is None:
        return CommandResult("Long-term memory is off (the memory plugin is not enabled).")
    wanted = args.strip()
    if not wanted:
        return CommandResult("Usage: /forget <memory id>  or  /forget <text of the memory>")
    if wanted.isascii() and wanted.isdigit() and len(wanted) <= 18:
        if await memory.forget(session.user_id, int(wanted)):
            return CommandResult(f"Forgotten memory {wanted} (its text stays in its history).")
        return CommandResult(f"No current memory {wanted} of yours.")
    try:
        found = await memory.recall(session.user_id, wanted, limit=FORGET_CANDIDATES, bump=False)
    except InvalidMemory as exc:
        return CommandResult(f"Nothing forgotten: {exc}")
    hits = [m for m in found if _squash(wanted) in _squash(m.text)]
    if len(hits) == 1:
        await memory.forget(session.user_id, hits[0].id)
        return CommandResult(f"Forgotten memory {hits[0].id}: {hits[0].text}")
    listed = hits or found
    if not listed:
        return CommandResult("No memory of yours matches that.")
    lines = "\n".join(f"  {m.id}: {m.text}" for m in listed)
    head = "Several memories contain that" if hits else "No memory contains that text; the closest are"
    return CommandResult(f"{head}, nothing forgotten:\n{lines}\nForget one with /forget <id>.")


async def run_command(service: BrainService, session: Session, text: str, *, max_turns: int | None = None) -> CommandResult:
    """Run the slash command in ``text`` (it starts with ``/``)."""
    name, _, args = text.strip()[1:].partition(" ")
    if name == "goal":
        return await _goal(service, session, args, max_turns)
    if name == "subgoal":
        return _subgoal(service, session, args)
    if name == "yolo":
        return _yolo(service, session, args)
    if name == "model":
        if args.strip():
            spec = "" if args.strip() == "default" else args.strip()
            try:
                spec = service.check_model(spec)
            except ValueError as exc:  # BadModel: the conversation keeps its model
                return CommandResult(f"Model not changed: {exc}. Model: {service.model_for(session) or '(the default)'}")
            service.db.update_conversation(session.id, model=spec)
            session.conv = service.db.conversation(session.id)  # type: ignore[assignment]
        return CommandResult(f"Model: {service.model_for(session) or '(the default)'}")
    if name == "remember":
        return await _remember(service, session, args)
    if name == "forget":
        return await _forget(service, session, args)
    if name == "help":
        extra = sorted(service.ctx_contributions("command"))
        return CommandResult(HELP + ("\nPlugin commands: " + ", ".join(f"/{n}" for n in extra) if extra else ""))
    owned = service.ctx_contributions("command").get(name)
    if owned is not None:
        return await _plugin_command(service, owned, name, args)
    return CommandResult(f"Unknown command /{name}. /help lists them.")


async def _plugin_command(service: BrainService, owned: Any, name: str, args: str) -> CommandResult:
    """Call a plugin's command handler; a handler that raises is answered with
    :data:`FAILED`, its traceback logged once and an audit row written (actor: the plugin,
    action ``command``, target the command name, outcome ``error``, detail ``{"error"}``)."""
    try:
        reply = owned.obj.handler(args)
        if inspect.isawaitable(reply):
            reply = await reply
    except Exception as exc:
        message = str(exc).strip() or type(exc).__name__
        log.exception("plugin %s: command /%s failed", owned.plugin, name)
        service.ctx.store.audit(owned.plugin, "command", name, "error", {"error": f"{type(exc).__name__}: {message}"})
        return CommandResult(FAILED.format(message), error=message)
    return CommandResult(str(reply))

"""``BrainService``: the one facade over conversations, turns, goals, approvals and status
views; offered to other plugins as the service ``"brain"`` and used by the HTTP routes.

Two ways to reach a conversation:

* **pointer-based** (web dock, chat platforms): :meth:`BrainService.active` gives the user's
  active conversation; :meth:`BrainService.open` (opening one anywhere) moves the pointer.
  A chat platform's message is a *channel turn* (:meth:`BrainService.channel_turn`, see
  :mod:`.channels`): its sender is mapped to a user through a stored link.
* **session-bound** (the CLI): the caller names the conversation id on every call; the call is
  checked against the owner (:class:`LookupError` otherwise, answered 404) and never moves the
  pointer. So two CLIs and the web hold independent conversations at once.

A goal advances only while its conversation has a live driver: it is the user's active
conversation, or a stream is attached (a CLI following its turn). Otherwise it pauses with
``driver_lost``; a restart pauses every active goal (``restart``); nothing resumes by itself.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from elowen_sdk import CapabilityError, ElowenError, Tool
from elowen_sdk.chat import ToolSpec
from elowen_sdk.services import InferenceService, TasksService, UsersService, UserToolsService

from . import goals as goal_rules
from .approvals import ApprovalBroker
from .channels import ChannelLinks, PlatformHost, run_channel_turn
from .commands import CONTINUE, is_driving, reply_event, run_command
from .goals import GoalLimits, goal_prompt
from .sentinels import parse_sentinels
from .sessions import Session, SessionRegistry
from .store import BrainStore, message_from_row
from .tools import CHAT_ONLY, WORKER_ONLY
from .tools.env import ToolEnv
from .tools.env import current as current_env
from .turns import TurnResult, run_turn

__all__ = ["BadModel", "BrainService", "Busy"]

log = logging.getLogger("elowen.plugin.brain")

_WIRE_RE = re.compile(r"[^A-Za-z0-9_-]")


class Busy(ElowenError):
    """A turn is already running in the conversation (the API answers 409 ``turn_running``)."""


class BadModel(ElowenError, ValueError):
    """A model spec names no configured provider, or is malformed (the API answers 422
    ``unknown_provider``; the conversation is not changed)."""


class BrainService:
    """The brain (see the module docstring). Built by the plugin with its context."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.db = BrainStore(ctx.store)
        self.sessions = SessionRegistry(self._publish)
        self.approvals = ApprovalBroker(self.db)
        self.channels = ChannelLinks(ctx.store, user_exists=lambda uid: self.user(uid) is not None)
        self.platforms = PlatformHost(self)
        self._tool_cache: dict[tuple[Any, ...], tuple[dict[str, Tool], list[ToolSpec]]] = {}
        self._tool_gen = -1
        self._narrowed: dict[int, tuple[str, ...]] = {}  # conversation id → tool globs it is narrowed to
        self._scoped: dict[int, frozenset[int]] = {}  # conversation id → project ids (a sub-agent of a narrowed turn)
        self._fragments: tuple[int, str] = (-1, "")
        self._system_text: str | None = None
        self.worker: Any = None  # the BrainWorker, set by the plugin

    # -- kernel access -----------------------------------------------------------------------

    @property
    def config(self) -> Mapping[str, Any]:
        return self.ctx.config

    def relay(self) -> InferenceService:
        """The inference relay (service ``"inference"``)."""
        return self.ctx.service(InferenceService)

    def tasks(self) -> TasksService:
        """The daemon's task service (service ``"tasks"``).

        Raises:
            LookupError: it is not offered (no daemon running in this process).
        """
        return self.ctx.service(TasksService)

    def ctx_contributions(self, kind: str) -> Mapping[str, Any]:
        """A snapshot of every contribution of ``kind`` (name → owned record)."""
        return self.ctx.contributions(kind)

    def bus_has(self, hook: str) -> bool:
        """Whether any enabled plugin implements ``hook``."""
        return self.ctx.has_impls(hook)

    def _publish(self, type_: str, data: Mapping[str, Any]) -> None:
        self.ctx.publish(type_, data)

    def session_event(self, session: Session, type_: str, data: Mapping[str, Any]) -> None:
        """Emit an event on a session (bus and attached streams)."""
        session.emit(type_, data)

    def goal_event(self, session: Session, goal: Mapping[str, Any] | None, event: str) -> None:
        """Emit ``brain.goal`` with the goal record and what happened."""
        session.emit("brain.goal", {"event": event, "goal": dict(goal) if goal else None})

    # -- start-up ----------------------------------------------------------------------------

    def on_start(self) -> list[int]:
        """After a (re)start: pause every active goal (``restart``) and expire pending
        approvals. Returns the paused goal ids."""
        paused = self.db.pause_all_active("restart")
        self.db.expire_pending()
        if paused:
            log.info("paused %d active goal(s) after a restart: %s", len(paused), paused)
        return paused

    # -- conversations -----------------------------------------------------------------------

    def check_model(self, spec: str) -> str:
        """``spec`` (``"<provider>/<model>"``) stripped, if the relay knows its provider;
        ``""`` (the default model) is always valid.

        Raises:
            BadModel: a malformed spec, an unknown provider (the message lists the configured
                ones, the embedded ``local`` included), or no model for a remote provider.
        """
        spec = spec.strip()
        if not spec:
            return ""
        name, _, model = spec.partition("/")
        try:
            known = {p["name"]: p for p in self.relay().providers()}
        except LookupError:
            raise BadModel("the inference plugin is not enabled: no provider can be chosen") from None
        names = ", ".join(sorted(known))
        if not name:
            raise BadModel(f"bad model spec {spec!r}: expected '<provider>/<model>'; configured providers: {names}")
        if name not in known:
            raise BadModel(f"unknown provider {name!r}; configured providers: {names}")
        if not model and known[name].get("kind") != "local":
            raise BadModel(f"model spec {spec!r} names no model: use '{name}/<model>'")
        return spec

    def set_model(self, user_id: int, cid: int, spec: str) -> dict[str, Any]:
        """Set a conversation's model (``""``: back to the default); validated first.

        Raises:
            LookupError: not the user's conversation. BadModel: see :meth:`check_model`.
        """
        self.conversation(user_id, cid)
        spec = self.check_model(spec)
        self.db.update_conversation(cid, model=spec)
        session = self.sessions.existing(cid)
        conv = self.conversation(user_id, cid)
        if session is not None:
            session.conv = conv
        return conv

    def create_conversation(
        self,
        user_id: int,
        *,
        title: str = "",
        model: str = "",
        project_id: int | None = None,
        activate: bool = False,
        tool_grants: Sequence[str] | None = None,
        yolo: bool | None = None,
    ) -> dict[str, Any]:
        """Create a chat conversation; ``activate`` moves the user's pointer to it.
        ``tool_grants`` (globs) narrows the tools its turns are offered to those the user is
        granted AND that match one of them; ``yolo=False`` keeps YOLO off in it. Both only
        narrow, and last for this daemon process. Created from inside a tool call of a turn
        narrowed to some projects (a sub-agent), the conversation keeps that narrowing.

        Raises:
            LookupError: ``project_id`` is not one of the user's projects (or not in the
                narrowing).
            BadModel: ``model`` names no configured provider (see :meth:`check_model`).
        """
        model = self.check_model(model)
        if project_id is not None and project_id not in {p["id"] for p in self._projects(user_id)}:
            raise LookupError(f"project {project_id} not found")
        inherited = self._inherited_scope(user_id)
        if project_id is not None and inherited is not None and project_id not in inherited:
            raise LookupError(f"project {project_id} not found")
        conv = self.db.create_conversation(user_id=user_id, title=title, model=model, project_id=project_id)
        if inherited is not None:
            self._scoped[int(conv["id"])] = inherited
        if tool_grants is not None:
            self._narrowed[int(conv["id"])] = tuple(str(g) for g in tool_grants)
        if yolo is False:
            self.session(conv).yolo = False
        if activate:
            self.db.set_pref(user_id, active_conversation_id=conv["id"])
        return conv

    def conversation(self, user_id: int, cid: int) -> dict[str, Any]:
        """The conversation, if ``user_id`` owns it.

        Raises:
            LookupError: no such conversation of this user.
        """
        conv = self.db.conversation(cid)
        if conv is None or conv["user_id"] != user_id or conv["kind"] != "chat":
            raise LookupError(f"conversation {cid} not found")
        return conv

    def list_conversations(self, user_id: int, *, after: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The user's conversations, newest first, each with ``active`` (the pointer)."""
        active = self.db.prefs(user_id)["active_conversation_id"]
        rows = self.db.conversations(user_id, after=after, limit=limit)
        for r in rows:
            r["active"] = r["id"] == active
        return rows

    def open(self, user_id: int, cid: int) -> dict[str, Any]:
        """Make ``cid`` the user's active conversation (moves the pointer).

        Raises:
            LookupError: not the user's conversation.
        """
        conv = self.conversation(user_id, cid)
        self.db.set_pref(user_id, active_conversation_id=cid)
        return conv

    def active(self, user_id: int, *, create: bool = True) -> dict[str, Any] | None:
        """The user's active conversation; when there is none: a new one (made active) with
        ``create``, else ``None``."""
        cid = self.db.prefs(user_id)["active_conversation_id"]
        conv = self.db.conversation(cid) if cid else None
        if conv is None and create:
            conv = self.create_conversation(user_id, activate=True)
        return conv

    def model_info(self, conv: dict[str, Any]) -> dict[str, Any]:
        """Which model a conversation's turns use: ``{"spec": "provider/model" | "", "kind":
        "openai" | "anthropic" | "local" | None, "tools": bool, "ready": bool, "problem": str |
        None}`` — the embedded (``local``) model is not offered tools. ``spec`` is ``""`` and
        ``kind`` ``None`` when the relay cannot say (no inference plugin, or no default model
        configured). ``ready`` is false (``problem`` says why, with an admin's details) when
        no model can answer: no inference plugin, no default model, an unknown provider, a
        missing key or an embedded model that is not installed (the relay's ``readiness``)."""
        spec = conv.get("model") or str(self.config.get("default_model", ""))
        try:
            relay = self.relay()
        except (LookupError, CapabilityError):
            return {"spec": spec, "kind": None, "tools": True, "ready": False, "problem": "the inference plugin is not enabled"}
        try:
            state = relay.readiness(spec)
        except Exception as exc:  # an older relay without readiness: assume it can answer
            state = {"spec": spec, "ready": True, "problem": None}
            log.debug("model readiness unknown: %s", exc)
        try:
            spec = spec or relay.default_spec()
            name = spec.split("/", 1)[0]
            kind = next((p["kind"] for p in relay.providers() if p["name"] == name), None)
        except Exception:  # nothing configured as the default: unknown, not an error here
            return {"spec": spec, "kind": None, "tools": True, "ready": bool(state.get("ready")), "problem": state.get("problem")}
        return {"spec": spec, "kind": kind, "tools": kind != "local", "ready": bool(state.get("ready")), "problem": state.get("problem")}

    def view(self, user_id: int, cid: int, *, limit: int = 200) -> dict[str, Any]:
        """``{"conversation", "messages", "goal", "yolo", "busy", "model"}`` (messages newest
        ``limit``, oldest first; ``model`` as :meth:`model_info`)."""
        conv = self.conversation(user_id, cid)
        session = self.sessions.existing(cid)
        rows = self.db.messages(cid, include_compacted=True, limit=limit)
        return {
            "conversation": {**conv, "active": self.db.prefs(user_id)["active_conversation_id"] == cid},
            "messages": [{**r, "tool_calls": json.loads(r["tool_calls"]), "compacted": bool(r["compacted"])} for r in rows],
            "goal": self.db.live_goal(cid) or self.db.last_goal(cid),
            "yolo": self.yolo(session) if session else self.db.prefs(user_id)["yolo"],
            "busy": bool(session and session.busy),
            "model": self.model_info(conv),
        }

    # -- sessions, prompts, tools ------------------------------------------------------------

    def session(self, conv: dict[str, Any]) -> Session:
        """The live session of a conversation record."""
        return self.sessions.get(conv)

    def load_history(self, session: Session) -> None:
        """(Re)load the session's model history from the store."""
        session.history = [message_from_row(r) for r in self.db.messages(session.id) if r["role"] != "note"]

    def model_for(self, session: Session) -> str:
        """The conversation's model spec, else the plugin's ``default_model`` ("" = relay default)."""
        return session.conv.get("model") or str(self.config.get("default_model", ""))

    def yolo(self, session: Session) -> bool:
        """The session's ``/yolo`` override, else the user's persisted default."""
        if session.yolo is not None:
            return session.yolo
        return bool(session.user_id is not None and self.db.prefs(session.user_id)["yolo"])

    def has_driver(self, session: Session) -> bool:
        """Whether the conversation has a live driver (attached stream, or the active one)."""
        if session.attached > 0:
            return True
        return session.user_id is not None and self.db.prefs(session.user_id)["active_conversation_id"] == session.id

    def user(self, user_id: int) -> dict[str, Any] | None:
        """The user record of the daemon's users service (``{id, name, role, tool_grants,
        projects, …}``, see :mod:`elowen_sdk.services.users`), or ``None``: no such user, or
        no users service (no daemon in this process) — then the user has no role, grants or
        projects (deny by default)."""
        try:
            users = self.ctx.service(UsersService)
        except LookupError:
            return None
        return users.user(user_id)

    def _role(self, user_id: int | None) -> str:
        """``admin`` for an ownerless worker (bound to its task's project) and admins; a
        deleted or unknown user is a ``member`` with no projects."""
        if user_id is None:
            return "admin"
        user = self.user(user_id)
        return str(user["role"]) if user else "member"

    def _projects(self, user_id: int | None) -> list[dict[str, Any]]:
        """Projects ``{id, name, path}`` the user may use (admins and ownerless workers: all),
        by id, from the task service (the kernel owns the ``projects`` table)."""
        if self._role(user_id) == "admin":
            return self.tasks().projects()
        user = self.user(user_id) if user_id is not None else None
        found = [self.tasks().project(int(pid)) for pid in (user or {}).get("projects", [])]
        return sorted((p for p in found if p is not None), key=lambda p: p["id"])

    def _inherited_scope(self, user_id: int) -> frozenset[int] | None:
        """The narrowing of the turn whose tool call is running now (``tools.env.current``),
        if that turn is the same user's and narrowed; else ``None``."""
        env = current_env.get()
        if env is None or env.scope is None or env.user_id != user_id:
            return None
        return env.scope

    def env_for(self, session: Session, *, task: Mapping[str, Any] | None = None, projects: frozenset[int] | None = None) -> ToolEnv:
        """The tool environment of a session: the user's project folders (a worker: only its
        task's project folder), guarded. ``projects`` (project ids) narrows this turn to those
        of them (a chat platform's effective scope); ``None``: no narrowing. A conversation
        created by a narrowed turn (a sub-agent's) stays narrowed the same way."""
        role = self._role(session.user_id)
        if task is not None:
            project = self.tasks().project(int(task["project_id"]))
            found = [project] if project else []
        else:
            found = self._projects(session.user_id)
        scope = self._scoped.get(session.id)
        if projects is not None:
            scope = frozenset(projects) if scope is None else scope & frozenset(projects)
        if scope is not None:
            found = [p for p in found if int(p["id"]) in scope]
        roots = [p["path"] for p in found]
        home = next((p for p in found if p["id"] == session.conv.get("project_id")), found[0] if found else None)
        guard = self.ctx.path_guard(roots, roots, base=home["path"]) if home else None
        return ToolEnv(self, session, session.user_id, role, guard, Path(home["path"]) if home else None, found, task, scope=scope)

    def tool_table(self, env: ToolEnv, *, worker: bool) -> tuple[dict[str, Tool], list[ToolSpec]]:
        """``(wire name → Tool, specs)`` offered to this turn: every registered tool the user is
        granted (``users.tool_grants`` globs; an ownerless worker gets all), minus chat-only
        tools for workers and worker-only tools in chats. Wire names are the tool names with
        characters outside ``[A-Za-z0-9_-]`` replaced by ``_`` (provider rules). Cached per
        registry generation; the user's own tools (``user-tools`` service) are added to every
        turn's table afresh."""
        generation = self.ctx.generation
        if generation != self._tool_gen:
            self._tool_cache.clear()
            self._tool_gen = generation
        grants: tuple[str, ...] = ("*",)
        if env.user_id is not None:
            user = self.user(env.user_id)
            grants = tuple(user["tool_grants"]) if user else ()
        narrow = self._narrowed.get(env.session.id)
        key = (worker, grants, narrow)
        cached = self._tool_cache.get(key)
        if cached is not None:
            return self._with_user_tools(env.user_id, grants, narrow, *cached)
        skip = CHAT_ONLY if worker else WORKER_ONLY
        table: dict[str, Tool] = {}
        specs: list[ToolSpec] = []
        for name, owned in sorted(self.ctx_contributions("tool").items()):
            if name in skip or not any(fnmatch.fnmatchcase(name, g) for g in grants):
                continue
            if narrow is not None and not any(fnmatch.fnmatchcase(name, g) for g in narrow):
                continue
            wire = _WIRE_RE.sub("_", name)[:60]
            base, n = wire, 2
            while wire in table:
                wire, n = f"{base}_{n}", n + 1
            table[wire] = owned.obj
            specs.append(ToolSpec(wire, owned.obj.description, owned.obj.parameters))
        self._tool_cache[key] = (table, specs)
        return self._with_user_tools(env.user_id, grants, narrow, table, specs)

    def _with_user_tools(
        self, user_id: int | None, grants: tuple[str, ...], narrow: tuple[str, ...] | None, table: dict[str, Tool], specs: list[ToolSpec]
    ) -> tuple[dict[str, Tool], list[ToolSpec]]:
        """``table``/``specs`` plus the user's own tools (the ``user-tools`` service, e.g. the
        MCP servers they added), under the same grants and narrowing; never cached (they
        change without a registry generation). The cached pair is not modified."""
        if user_id is None:
            return table, specs
        try:
            own = list(self.ctx.service(UserToolsService).tools_for(user_id))
        except (LookupError, CapabilityError):
            return table, specs
        if not own:
            return table, specs
        table, specs = dict(table), list(specs)
        for tool in sorted(own, key=lambda t: t.name):
            if not any(fnmatch.fnmatchcase(tool.name, g) for g in grants):
                continue
            if narrow is not None and not any(fnmatch.fnmatchcase(tool.name, g) for g in narrow):
                continue
            wire = _WIRE_RE.sub("_", tool.name)[:60]
            base, n = wire, 2
            while wire in table:
                wire, n = f"{base}_{n}", n + 1
            table[wire] = tool
            specs.append(ToolSpec(wire, tool.description, tool.parameters))
        return table, specs

    def _base_prompt(self) -> str:
        if self._system_text is None:
            try:
                self._system_text = (goal_rules.PROMPTS / "brain_system.md").read_text(encoding="utf-8")
            except OSError:
                self._system_text = "You are Elowen, a personal AI agent. Use the tools to help the user."
        gen = self.ctx.generation
        if self._fragments[0] != gen:
            frags = sorted((o.obj for o in self.ctx_contributions("prompt_fragment").values()), key=lambda f: (f.order, f.name))
            self._fragments = (gen, "\n\n".join(f.text for f in frags))
        return self._system_text + ("\n\n" + self._fragments[1] if self._fragments[1] else "")

    def system_prompt(self, session: Session, env: ToolEnv, *, goal: Mapping[str, Any] | None, extra: tuple[str, ...] = (), worker: bool = False) -> str:
        """The system prompt of one turn (see :mod:`.turns`)."""
        parts = [self._base_prompt()]
        if env.projects:
            parts.append(
                "Project folders you can use:\n"
                + "\n".join(f"- {p['name']} (id {p['id']}): {p['path']}" for p in env.projects)
                + (f"\nRelative paths start in {env.cwd}." if env.cwd else "")
            )
        if session.conv.get("summary"):
            parts.append("Summary of the earlier conversation:\n" + session.conv["summary"])
        if extra:
            parts.append("Context:\n" + "\n".join(extra))
        if goal is not None:
            parts.append(goal_prompt(goal))
        return "\n\n".join(parts)

    # -- turns -------------------------------------------------------------------------------

    def _session_for(self, user_id: int, cid: int | None) -> Session:
        conv = self.active(user_id) if cid is None else self.conversation(user_id, cid)
        assert conv is not None
        return self.session(conv)

    async def _goal_loop(self, session: Session, text: str, projects: frozenset[int] | None = None) -> None:
        env = self.env_for(session, projects=projects)
        limits = GoalLimits.from_config(self.config)
        goal = self.db.live_goal(session.id)
        result: TurnResult = await run_turn(self, session, env, text, goal=goal if goal and goal["state"] == "active" else None)
        while True:
            goal = self.db.live_goal(session.id)
            if goal is None or goal["state"] != "active":
                break
            outcome = goal_rules.apply_turn(self.db, goal, parse_sentinels(result.text), tokens=result.tokens, yolo=self.yolo(session), limits=limits)
            goal, event = outcome.goal, outcome.event
            if goal["state"] == "active":
                reason = "error" if result.error else "breaker" if result.tripped else None
                if reason is None and not self.has_driver(session):
                    reason = "driver_lost"
                if reason is not None:
                    goal = self.db.update_goal(
                        goal["id"], state="paused", pause_reason=reason, note=f"breaker: {result.tripped}" if result.tripped else goal["note"]
                    )
                    event = "paused"
            self.goal_event(session, goal, event)
            if goal["state"] != "active":
                break
            result = await run_turn(self, session, env, CONTINUE, goal=goal)

    async def drive(self, session: Session, text: str, *, max_turns: int | None = None, projects: frozenset[int] | None = None) -> None:
        """Run ``text`` in the session — a slash command, or a turn and, while a goal is
        active with a live driver, its goal turns — then emit ``brain.done``. The caller has
        marked the session running (:meth:`reserve`). ``projects`` narrows these turns (see
        :meth:`env_for`)."""
        try:
            with trio.CancelScope() as scope:
                session.scope = scope
                if text.strip().startswith("/"):
                    reply = await run_command(self, session, text, max_turns=max_turns)
                    session.emit(*reply_event(reply))
                    if reply.drive is not None:
                        await self._goal_loop(session, reply.drive, projects)
                else:
                    session.failures.clear()
                    await self._goal_loop(session, text, projects)
            if scope.cancelled_caught:
                self.approvals.db.expire_pending(session.id)
                goal = self.db.live_goal(session.id)
                if goal is not None and goal["state"] == "active":
                    self.goal_event(session, self.db.update_goal(goal["id"], state="paused", pause_reason="user"), "paused")
                self.db.add_message(session.id, role="note", content="turn aborted by the user")
                session.emit("brain.aborted", {})
        finally:
            session.scope = None
            session.running = False
            goal = self.db.live_goal(session.id) or self.db.last_goal(session.id)
            session.emit("brain.done", {"goal": goal})

    def reserve(self, user_id: int, cid: int | None, text: str) -> Session:
        """Check ownership and that the conversation is idle, and mark it running.

        Raises:
            LookupError: not the user's conversation.
            Busy: a turn is running (instant slash commands are never refused).
        """
        session = self._session_for(user_id, cid)
        if session.running and (not text.strip().startswith("/") or is_driving(text)):
            raise Busy(f"a turn is already running in conversation {session.id}")
        return session

    async def turn(self, user_id: int, cid: int | None, text: str, *, max_turns: int | None = None) -> dict[str, Any]:
        """Run a turn to its end (no stream); ``cid`` ``None`` acts on the active conversation.
        Returns ``{"conversation_id", "messages": [new rows], "goal"}``.

        Raises:
            LookupError, Busy: see :meth:`reserve`.
        """
        session = self.reserve(user_id, cid, text)
        before = self.db.messages(session.id, include_compacted=True, limit=1)
        first = before[-1]["id"] if before else 0
        if session.running:  # an instant command during a turn
            reply = await run_command(self, session, text, max_turns=max_turns)
            session.emit(*reply_event(reply))
            return {"conversation_id": session.id, "command": reply.text, "messages": [], "goal": self.db.live_goal(session.id)}
        session.running = True
        await self.drive(session, text, max_turns=max_turns)
        rows = [r for r in self.db.messages(session.id, include_compacted=True, limit=10_000) if r["id"] > first]
        return {"conversation_id": session.id, "messages": rows, "goal": self.db.live_goal(session.id) or self.db.last_goal(session.id)}

    async def stream(
        self, user_id: int, cid: int | None, text: str, *, max_turns: int | None = None, driver: bool = True, projects: frozenset[int] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Start a turn in the plugin's nursery and yield its events (dicts with ``type``)
        until ``brain.done``. The stream is attached for its whole life: it is a live driver
        of the conversation's goal (``driver``); leaving early detaches it (the turn goes on,
        a goal then pauses with ``driver_lost``). ``projects`` (project ids) narrows this turn
        only — its tools, path guard and prompt (see :meth:`env_for`); ``None``: every project
        of the user. Check :meth:`reserve` first for errors."""
        session = self.reserve(user_id, cid, text)
        receive = session.listen(driver=driver)
        try:
            if session.running:
                reply = await run_command(self, session, text, max_turns=max_turns)
                kind, data = reply_event(reply)
                yield {"type": kind, "conversation_id": session.id, "user_id": user_id, **data}
                yield {"type": "brain.done", "conversation_id": session.id, "user_id": user_id, "goal": self.db.live_goal(session.id)}
                return
            session.running = True
            self.ctx.start_soon(functools.partial(self.drive, session, text, max_turns=max_turns, projects=projects), name=f"brain.turn.{session.id}")
            async for item in receive:
                yield item
                if item["type"] == "brain.done":
                    break
        finally:
            session.unlisten(receive, driver=driver)

    def abort(self, user_id: int, cid: int | None) -> bool:
        """Abort the running turn (and pause its goal); ``False`` when none runs.

        Raises:
            LookupError: not the user's conversation.
        """
        session = self._session_for(user_id, cid)
        if session.scope is None:
            return False
        session.scope.cancel()
        return True

    # -- approvals and preferences -----------------------------------------------------------

    def pending(self, user_id: int) -> list[dict[str, Any]]:
        """The user's pending approvals and questions, oldest first."""
        return self.db.pending_for(user_id)

    def decide(self, user_id: int, pid: int, *, allow: bool | None = None, answer: str | None = None) -> dict[str, Any]:
        """Allow/reject an approval or answer a question (see :meth:`ApprovalBroker.decide`)."""
        return self.approvals.decide(pid, user_id=user_id, allow=allow, answer=answer)

    def prefs(self, user_id: int) -> dict[str, Any]:
        """``{"active_conversation_id", "yolo"}`` (the persisted YOLO default)."""
        return self.db.prefs(user_id)

    def set_yolo_default(self, user_id: int, on: bool) -> dict[str, Any]:
        """Persist the user's YOLO default."""
        self.db.set_pref(user_id, yolo=int(on))
        return self.db.prefs(user_id)

    # -- chat platforms (channel turns) ------------------------------------------------------

    async def channel_turn(self, platform: str, platform_user: str, text: str, *, projects: frozenset[int] | None = None) -> list[str]:
        """A message from a chat platform's sender → the reply texts: a link code for an
        unlinked sender, else a pointer-based turn on the linked user's active conversation
        (see :mod:`.channels`), narrowed to ``projects`` (project ids; ``None``: all of the
        user's).

        Raises:
            ValueError: a bad ``platform_user``, ``text`` or ``projects``.
        """
        return await run_channel_turn(self, platform, platform_user, text, projects=projects)

    def link_channel(self, user_id: int, code: str) -> dict[str, Any]:
        """Confirm a link code: its sender becomes ``user_id``'s channel. Audited
        (``brain.channel.link``, outcome ``ok`` or ``denied``).

        Returns:
            ``{"platform", "platform_user", "user_id", "created_at"}``.

        Raises:
            LookupError: unknown, expired or used code.
        """
        actor = f"user:{user_id}"
        try:
            link = self.channels.confirm(code, user_id)
        except LookupError:
            self.ctx.store.audit(actor, "brain.channel.link", "", "denied", {"reason": "unknown or expired code"})
            raise
        self.ctx.store.audit(actor, "brain.channel.link", f"{link['platform']}:{link['platform_user']}", "ok")
        log.info("user %s linked %s:%s", user_id, link["platform"], link["platform_user"])
        return link

    def unlink_channel(self, user_id: int, platform: str, platform_user: str, *, actor: str = "user") -> bool:
        """Forget the user's link of that sender (``False``: there was none). Audited
        (``brain.channel.unlink``) with ``via`` ``user`` (the API) or ``channel`` (``/unlink``)."""
        removed = self.channels.unlink(user_id, platform, platform_user)
        if removed:
            self.ctx.store.audit(f"user:{user_id}", "brain.channel.unlink", f"{platform}:{platform_user}", "ok", {"via": actor})
        return removed

    def channel_links(self, user_id: int) -> list[dict[str, Any]]:
        """The user's links ``{platform, platform_user, user_id, created_at}``."""
        return self.channels.links(user_id)

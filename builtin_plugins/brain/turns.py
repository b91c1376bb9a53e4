"""The turn pipeline: one user (or goal, or worker) input → model calls and tool calls until
the model answers without calling a tool.

Per turn: the message is stored; the history is compacted if needed; plugins add context
through the mutating hook ``turn_context`` (applied only with ``hook.mutate:turn_context``);
the system prompt is assembled (the brain's prompt, plugin prompt fragments, the user's
projects, the compaction summary, the turn context, the goal protocol); then up to
``max_tool_rounds`` streamed model calls, each followed by its tool calls. Each tool call goes
through ``before_tool_call`` (arguments may be patched with ``hook.mutate:tool_call``), the
approval policy (:mod:`.approvals`), the handler (with its :class:`~.tools.env.ToolEnv`), and
``on_tool_result``. Identical failing calls are counted; ``breaker_threshold`` of them stop the
turn (``TurnResult.tripped``).

Events (see :mod:`.sessions`): ``brain.message`` (stored messages), ``brain.delta`` (text as it
streams), ``brain.tool`` (``phase`` ``call`` / ``result``), ``brain.approval``, ``brain.error``.
"""

from __future__ import annotations

import inspect
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from elowen_sdk import Tool, ToolCall, TurnContext
from elowen_sdk.chat import ChatRequest, ContextTooLong, Delta, Message

from .approvals import assess
from .compaction import maybe_compact
from .tools.env import ToolEnv, ToolError, current

if TYPE_CHECKING:
    from .service import BrainService
    from .sessions import Session

__all__ = ["MAX_RESULT_CHARS", "TurnResult", "run_turn"]

log = logging.getLogger("elowen.plugin.brain")

MAX_RESULT_CHARS = 20_000
"""Characters of a tool result sent back to the model."""


@dataclass(slots=True)
class TurnResult:
    """What one turn produced.

    Attributes:
        text: the assistant's text of the whole turn (every model call), joined by blank lines —
            what the goal sentinels are parsed from.
        tokens: input + output tokens of the turn's model calls.
        rounds: model calls made.
        error: why the turn failed (the provider's message), or ``None``.
        tripped: the breaker key when identical failing calls stopped the turn.
        tool_calls: tool calls run.
    """

    text: str = ""
    tokens: int = 0
    rounds: int = 0
    error: str | None = None
    tripped: str | None = None
    tool_calls: int = 0
    texts: list[str] = field(default_factory=list)


def _dump(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[… {len(text) - MAX_RESULT_CHARS} more characters cut]"
    return text


def _scope_of(env: ToolEnv) -> tuple[int, ...] | None:
    """The turn's narrowing as the hooks see it (``ToolCall.projects``, ``TurnContext.projects``)."""
    return tuple(sorted(env.scope)) if env.scope is not None else None


async def _call_handler(tool: Tool, args: dict[str, Any], env: ToolEnv) -> Any:
    token = current.set(env)
    try:
        result = tool.handler(**args)
        if inspect.isawaitable(result):
            result = await result
        return result
    finally:
        current.reset(token)


async def _run_tool(service: BrainService, session: Session, env: ToolEnv, call: Any, table: dict[str, Tool], result: TurnResult, *, worker: bool) -> str:
    """Run one model tool call; returns the text sent back as its result."""
    tool = table.get(call.name)
    if tool is None:
        return f"error: unknown tool {call.name!r}"
    # arguments starting with "_" are the host's (plugins stamp the caller as `_caller` through
    # the tool_call hook): never taken from the model, so a failed hook cannot let one through
    model_args = {k: v for k, v in dict(call.arguments).items() if not str(k).startswith("_")}
    hook_call = ToolCall(tool.name, model_args, conversation_id=str(session.id), user=str(env.user_id or ""), projects=_scope_of(env))
    if service.bus_has("before_tool_call"):
        hook_call = await service.ctx.mutate("before_tool_call", call=hook_call)
    args = dict(hook_call.arguments)
    policy = assess(tool, args, env, yolo=service.yolo(session), worker=worker)
    session.emit(
        "brain.tool",
        {
            "phase": "call",
            "id": call.id,
            "tool": tool.name,
            "arguments": {k: v for k, v in args.items() if not str(k).startswith("_")},  # not the host's stamps
            "policy": policy.action,
            "destructive": policy.destructive,
            "reasons": list(policy.reasons),
        },
    )
    error: str | None = None
    value: Any = None
    if policy.action == "refuse":
        error = "refused: destructive action (" + "; ".join(policy.reasons) + "); a brain worker may not do this"
    elif policy.action == "ask":
        decided = await service.approvals.approve(env, tool.name, args, policy)
        if decided["state"] != "allowed":
            error = f"the user {'rejected' if decided['state'] == 'rejected' else 'did not approve'} this call; do not retry it"
    if error is None:
        try:
            value = await _call_handler(tool, args, env)
        except ToolError as exc:
            error = str(exc)
        except TypeError as exc:
            error = f"bad arguments for {tool.name}: {exc}"
        except Exception as exc:
            log.exception("tool %s failed", tool.name)
            error = f"{type(exc).__name__}: {exc}"
    result.tool_calls += 1
    text = _dump(value) if error is None else f"error: {error}"
    session.emit("brain.tool", {"phase": "result", "id": call.id, "tool": tool.name, "ok": error is None, "result": text[:2000]})
    service.ctx.emit("on_tool_result", call=hook_call, result=value if error is None else None, error=error)
    if error is not None:
        key = f"{tool.name} {json.dumps(args, sort_keys=True, default=str)} -> {error}"
        session.failures[key] = session.failures.get(key, 0) + 1
        if session.failures[key] >= int(service.config.get("breaker_threshold", 3)):
            result.tripped = key
    return text


async def _refit(service: BrainService, session: Session, exc: ContextTooLong) -> bool:
    """After a context overflow: fold everything before the latest user message into the
    summary (a forced compaction); returns whether the history got shorter."""
    log.info("conversation %s: %s; compacting to fit", session.id, exc)
    if not await maybe_compact(service, session, force=True, keep=1):
        return False
    service.load_history(session)
    return True


async def _model_call(service: BrainService, session: Session, request: ChatRequest) -> Any:
    async with service.relay().stream(request) as stream:
        async for item in stream:
            if isinstance(item, Delta) and item.text:
                session.emit("brain.delta", {"text": item.text})
    session.flush_delta()
    return stream.result


def _append(service: BrainService, session: Session, message: Message) -> None:
    service.db.add_message(session.id, message)
    assert session.history is not None
    session.history.append(message)


async def run_turn(
    service: BrainService,
    session: Session,
    env: ToolEnv,
    text: str | None,
    *,
    goal: dict[str, Any] | None = None,
    worker: bool = False,
    max_rounds: int | None = None,
) -> TurnResult:
    """Run one turn (see the module docstring). ``text`` is the new user message (``None``: go
    on from the stored history). Cancellation (abort) leaves a consistent history: every tool
    call stored gets a result."""
    result = TurnResult()
    if session.history is None:
        service.load_history(session)
    if text is not None:
        _append(service, session, Message("user", text))
        # a conversation another plugin created narrowed (a sub-agent's) gets its "user" text
        # from a model (the delegate call), not from the person: marked, so nothing (the
        # curator) takes it for the owner's own words
        delegated = {"origin": "delegated"} if session.id in service._narrowed else {}
        session.emit("brain.message", {"role": "user", "content": text, **delegated})
        if await maybe_compact(service, session):
            service.load_history(session)
    if text is not None and not worker and goal is None and service.bus_has("intake"):
        claim = await service.ctx.mutate("intake", turn=TurnContext(str(session.id), str(env.user_id or ""), text, projects=_scope_of(env)))
        if claim.context:  # a plugin claimed the message (the core loop's intake): no model call
            result.text = "\n\n".join(str(c) for c in claim.context)
            result.texts.append(result.text)
            _append(service, session, Message("assistant", result.text))
            session.emit("brain.message", {"role": "assistant", "content": result.text, "tool_calls": []})
            return result
    table, specs = service.tool_table(env, worker=worker)
    extra: tuple[str, ...] = ()
    if service.bus_has("turn_context"):
        turn = TurnContext(str(session.id), str(env.user_id or ""), text or "", projects=_scope_of(env))
        extra = tuple((await service.ctx.mutate("turn_context", turn=turn)).context)
    system = service.system_prompt(session, env, goal=goal, extra=extra, worker=worker)
    rounds = max_rounds or int(service.config.get("max_tool_rounds", 24))
    assert session.history is not None
    refitted = False
    for _ in range(rounds):
        request = ChatRequest(
            service.model_for(session), [Message("system", system), *session.history], tools=specs, stream=True, purpose="brain.worker" if worker else "brain"
        )
        try:
            answer = await _model_call(service, session, request)
        except ContextTooLong as exc:
            if not refitted and await _refit(service, session, exc):
                refitted = True
                system = service.system_prompt(session, env, goal=goal, extra=extra, worker=worker)  # with the new summary
                continue  # the same round again, on the shorter history
            result.error = f"{exc}"
            log.warning("conversation %s: %s", session.id, exc)
            # the newest messages alone do not fit: fold them into the summary too, so the next
            # turn starts from a history the model can take instead of failing the same way
            await maybe_compact(service, session, force=True, keep=0)
            service.load_history(session)
            note = f"model call failed: {exc}; the last message was folded into the conversation summary — send a shorter one"
            service.db.add_message(session.id, role="note", content=note)
            session.emit("brain.error", {"message": note})
            break
        except Exception as exc:  # the relay's errors, and any provider bug: end the turn, keep the session
            result.error = f"{type(exc).__name__}: {exc}"
            log.warning("conversation %s: model call failed: %s", session.id, result.error)
            service.db.add_message(session.id, role="note", content=f"model call failed: {result.error}")
            session.emit("brain.error", {"message": result.error})
            break
        result.rounds += 1
        result.tokens += answer.usage.input_tokens + answer.usage.output_tokens
        message = Message("assistant", answer.text, tuple(answer.tool_calls))
        _append(service, session, message)
        session.emit(
            "brain.message",
            {
                "role": "assistant",
                "content": answer.text,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in answer.tool_calls],
            },
        )
        if answer.text:
            result.texts.append(answer.text)
        if not answer.tool_calls:
            break
        pending = [c.id for c in answer.tool_calls]
        try:
            for call in answer.tool_calls:
                output = await _run_tool(service, session, env, call, table, result, worker=worker)
                _append(service, session, Message("tool", output, tool_call_id=call.id))
                pending.remove(call.id)
        finally:
            for call_id in pending:  # aborted mid-round: answer every stored call
                with trio.CancelScope(shield=True):
                    _append(service, session, Message("tool", "error: aborted by the user", tool_call_id=call_id))
        if result.tripped or (env.closed is not None):
            break
    else:
        service.db.add_message(session.id, role="note", content=f"stopped after {rounds} model calls in one turn")
        session.emit("brain.error", {"message": f"stopped after {rounds} model calls in one turn (max_tool_rounds)"})
    result.text = "\n\n".join(result.texts)
    return result

"""Plugin glue of ``subagent``: the tools ``delegate`` and ``delegate_batch``, the
``before_tool_call`` stamp that tells them who calls (plugin API 1 passes tools only their
arguments), the ``/subagent/runs`` routes, and the ``brain.tool`` events that show a running
sub-agent's progress on its parent (see :mod:`.delegation`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from elowen_sdk import HTTPError, Patch, Request, Route, Tool, hookimpl
from elowen_sdk.pagination import decode_cursor, encode_cursor

from .delegation import DELEGATE_TOOLS, DelegationRefused, Delegations

__all__ = ["before_tool_call", "on_event", "on_unload", "register_routes", "register_tools"]

_STAMP = re.compile(r"^([0-9]{1,18}):([0-9]{1,18}):([0-9a-f]{64})$")


class CallerStamp:
    """Signs the caller (user and conversation) onto this plugin's tool calls: a model cannot
    forge it (HMAC-SHA256 with a key made per enable)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def patch(self, call: Any) -> Patch | None:
        if call.tool not in DELEGATE_TOOLS:
            return None
        user, cid = str(call.user), str(call.conversation_id)
        ok = user.isascii() and user.isdigit() and cid.isascii() and cid.isdigit()
        return Patch("tool_call", {"_caller": f"{user}:{cid}:{self._mac(f'{user}:{cid}')}" if ok else ""}, op="merge")

    def caller(self, stamp: Any) -> tuple[int, int]:
        """``(user id, conversation id)`` of a valid stamp.

        Raises:
            DelegationRefused: none, or forged.
        """
        m = _STAMP.match(stamp) if isinstance(stamp, str) else None
        if m and hmac.compare_digest(m.group(3), self._mac(f"{m.group(1)}:{m.group(2)}")):
            return int(m.group(1)), int(m.group(2))
        raise DelegationRefused("delegation works only in a conversation of a signed-in user")


@dataclass(slots=True)
class _Enable:
    ctx: Any
    runs: Delegations
    stamp: CallerStamp


_enables: dict[str, _Enable] = {}  # plugin name → the state of the current enable


def _state(ctx: Any) -> _Enable:
    state = _enables.get(ctx.name)
    if state is None or state.ctx is not ctx:
        state = _enables[ctx.name] = _Enable(ctx, Delegations(ctx), CallerStamp())
    return state


TASK_SCHEMA = {"type": "string", "description": "A self-contained task: everything the sub-agent needs to know, what to produce."}
TOOLS_SCHEMA = {"type": "array", "items": {"type": "string"}, "description": "Tool names or globs the sub-agent may use (default: all of yours)."}


@hookimpl
def register_tools(ctx: Any, register: Any) -> None:
    state = _state(ctx)

    async def delegate(task: str = "", tools: list[str] | None = None, _caller: str = "", **extra: Any) -> dict[str, Any]:
        user, cid = state.stamp.caller(_caller)
        return await state.runs.delegate(user, cid, task, tools)

    async def delegate_batch(tasks: list[Any] | None = None, _caller: str = "", **extra: Any) -> dict[str, Any]:
        user, cid = state.stamp.caller(_caller)
        return await state.runs.delegate_batch(user, cid, tasks)

    register(
        Tool(
            "delegate",
            "Hand a self-contained task to a fresh sub-agent with your access (or less, via tools) and get back its summary and the files it wrote.",
            delegate,
            {"type": "object", "properties": {"task": TASK_SCHEMA, "tools": TOOLS_SCHEMA}, "required": ["task"]},
        )
    )
    register(
        Tool(
            "delegate_batch",
            "Run several independent, self-contained tasks in parallel sub-agents; returns each one's summary in order.",
            delegate_batch,
            {
                "type": "object",
                "properties": {
                    "tasks": {"type": "array", "items": {"type": "object", "properties": {"task": TASK_SCHEMA, "tools": TOOLS_SCHEMA}, "required": ["task"]}}
                },
                "required": ["tasks"],
            },
        )
    )


@hookimpl
def before_tool_call(ctx: Any, call: Any) -> Any:
    """Stamp the calling user and conversation onto ``delegate`` / ``delegate_batch``."""
    state = _enables.get(ctx.name)
    return state.stamp.patch(call) if state is not None and state.ctx is ctx else None


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    """Follow the tool calls of running sub-agents."""
    if event.type != "brain.tool":
        return
    state = _enables.get(ctx.name)
    if state is not None and state.ctx is ctx and state.runs.children:
        state.runs.observe(event)


@hookimpl
def on_unload(ctx: Any) -> None:
    if _enables.get(ctx.name) is not None and _enables[ctx.name].ctx is ctx:
        del _enables[ctx.name]


def _view(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "grants": json.loads(row["grants"]), "artefacts": json.loads(row["artefacts"])}


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    """``GET /subagent/runs`` (the caller's delegations, newest first; ``?all=1`` every user's,
    admins) and ``GET /subagent/runs/{id}``."""

    def caller(request: Request) -> Any:
        p = request.principal
        if p is None or p.user_id is None or p.scope != "full":
            raise HTTPError(403, "forbidden", "a user's full token is needed")
        return p

    def list_runs(request: Request) -> dict[str, Any]:
        p = caller(request)
        every = request.query.get("all") in ("1", "true")
        if every and not p.is_admin:
            raise HTTPError(403, "forbidden", "only admins may list every user's delegations")
        before = decode_cursor(request.query.get("cursor")) or 2**62
        sql = "SELECT * FROM subagent_runs WHERE id < ?" + ("" if every else " AND user_id = ?")
        rows = ctx.store.query(sql + " ORDER BY id DESC LIMIT 51", (before,) if every else (before, p.user_id))
        items = [_view(r) for r in rows[:50]]
        return {"items": items, "next_cursor": encode_cursor(items[-1]["id"]) if len(rows) > 50 else None}

    def show(request: Request) -> dict[str, Any]:
        p = caller(request)
        value = request.params.get("id", "")
        row = ctx.store.query_one("SELECT * FROM subagent_runs WHERE id = ?", (int(value),)) if value.isdigit() and len(value) < 19 else None
        if row is None or (row["user_id"] != p.user_id and not p.is_admin):
            raise HTTPError(404, "not_found", f"delegation {value} not found")
        return _view(row)

    register(Route("GET", "/subagent/runs", list_runs, summary="The caller's delegations to sub-agents, newest first."))
    register(Route("GET", "/subagent/runs/{id}", show, summary="One delegation: task, grants, sub-agent conversation, outcome."))

"""Brain tools ``memory.save``, ``memory.search``, ``memory.forget`` and the caller stamp
that tells them whose memories they touch.

Tool handlers are called with the model's arguments only (plugin API 1). The plugin's
``before_tool_call`` hook, which sees the conversation's user, merges ``_caller`` into the
arguments of its own tools: ``"<user id>:<HMAC-SHA256 of it under a key made per enable>"``.
A handler acts only for a valid stamp, so a model cannot name another user (an argument it
invents is overwritten by the hook, and without the key it cannot forge one). The hook also
merges ``_projects``: the turn's narrowing (``ToolCall.projects`` as a list, or ``None``);
``memory.search`` then leaves out memories bound to another project.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any

from elowen_sdk import ElowenError, Patch, Tool, ToolCall
from elowen_sdk.services.memory import InvalidMemory

from .api import record
from .service import MemoryBackend

__all__ = ["CallerStamp", "ToolRefused", "tools"]

TOOL_NAMES = ("memory.save", "memory.search", "memory.forget")


class ToolRefused(ElowenError):
    """A memory tool refused the call; the message is what the model sees."""


class CallerStamp:
    """Signs and checks the ``_caller`` argument (see the module docstring)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, user: str) -> str:
        return hmac.new(self._key, user.encode(), hashlib.sha256).hexdigest()

    def patch(self, call: ToolCall) -> Patch | None:
        """The ``before_tool_call`` patch for one of this plugin's tools (``None`` for others)."""
        if call.tool not in TOOL_NAMES:
            return None
        user = call.user if call.user.isascii() and call.user.isdigit() else ""
        narrowed = getattr(call, "projects", None)
        value = {"_caller": f"{user}:{self._mac(user)}" if user else "", "_projects": list(narrowed) if narrowed is not None else None}
        return Patch("tool_call", value, op="merge")

    def user(self, stamp: Any) -> int:
        """The user id of a valid stamp.

        Raises:
            ToolRefused: no stamp, or a forged one.
        """
        if isinstance(stamp, str) and ":" in stamp:
            user, _, mac = stamp.partition(":")
            if user.isdigit() and hmac.compare_digest(mac, self._mac(user)):
                return int(user)
        raise ToolRefused("memory tools work only in a conversation of a signed-in user")


def tools(backend: Callable[[], MemoryBackend], stamp: CallerStamp) -> list[Tool]:
    """The three tools over the current enable's backend."""

    async def save(text: str, kind: str = "fact", importance: float = 0.5, _caller: str = "", **extra: Any) -> dict[str, Any]:
        uid = stamp.user(_caller)
        try:
            row = backend().add(uid, text, kind=kind, importance=importance, source="brain", provenance="owner", actor=f"brain:user:{uid}")
        except InvalidMemory as exc:
            raise ToolRefused(str(exc)) from None
        return {"saved": record(row)["id"], "text": row["text"]}

    async def search(query: str, limit: int = 6, _caller: str = "", _projects: Any = None, **extra: Any) -> dict[str, Any]:
        uid = stamp.user(_caller)
        try:
            found = await backend().search(uid, query, limit=max(1, min(int(limit), 20)))
        except (InvalidMemory, ValueError) as exc:
            raise ToolRefused(str(exc)) from None
        if isinstance(_projects, list):  # a turn narrowed to some projects: none of another project
            found = [m for m in found if m.project_id is None or m.project_id in _projects]
        return {"memories": [{"id": m.id, "text": m.text, "kind": m.kind, "score": m.score} for m in found]}

    async def forget(id: int, _caller: str = "", **extra: Any) -> dict[str, Any]:
        uid = stamp.user(_caller)
        try:
            mid = int(id)
        except (TypeError, ValueError):
            raise ToolRefused("id: the memory's number") from None
        if backend().forget_one(uid, mid, actor=f"brain:user:{uid}") is None:
            raise ToolRefused(f"no current memory {mid}")
        return {"forgotten": mid}

    return [
        Tool(
            "memory.save",
            "Remember a durable fact about the user for later conversations (one or two sentences).",
            save,
            {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The fact, in plain words."},
                    "kind": {"type": "string", "description": "fact, preference, project or person."},
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["text"],
            },
        ),
        Tool(
            "memory.search",
            "Search what you remember about the user.",
            search,
            {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 20}}, "required": ["query"]},
        ),
        Tool(
            "memory.forget",
            "Forget one remembered fact by its id (its text stays in the memory's history).",
            forget,
            {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        ),
    ]

"""The per-call context of builtin tools, set by the turn pipeline around each tool call.

Tool handlers are called as ``handler(**arguments)`` (plugin API 1), so what they need beyond
their arguments — who is asking, which folders they may touch — travels in a context variable.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elowen_sdk import ElowenError, PathGuard

if TYPE_CHECKING:
    from ..service import BrainService
    from ..sessions import Session

__all__ = ["ToolEnv", "ToolError", "current", "require_env", "require_guard"]


class ToolError(ElowenError):
    """A tool refused or failed; the message is what the model sees."""


@dataclass(slots=True)
class ToolEnv:
    """What a builtin tool may use during one call.

    Attributes:
        service: the brain service.
        session: the conversation's session.
        user_id: the owner of the conversation (``None`` for an ownerless task).
        role: ``admin`` or ``member``.
        guard: the path guard over the folders this conversation may touch, or ``None``
            when there are none.
        cwd: where relative paths and commands start (a project folder), or ``None``.
        projects: ``[{id, name, path}]`` the user may use in this turn.
        task: for a brain worker, the task record it works on.
        closed: set by ``task.close``.
        scope: the project ids this turn is narrowed to (a chat platform's effective scope,
            or inherited by a sub-agent from a narrowed turn); ``projects`` and ``guard`` are
            already cut to it. ``None``: not narrowed (every project of the user).
    """

    service: BrainService
    session: Session
    user_id: int | None
    role: str
    guard: PathGuard | None
    cwd: Path | None
    projects: list[Mapping[str, Any]] = field(default_factory=list)
    task: Mapping[str, Any] | None = None
    closed: dict[str, Any] | None = None
    scope: frozenset[int] | None = None


current: contextvars.ContextVar[ToolEnv | None] = contextvars.ContextVar("elowen_brain_tool_env", default=None)


def require_env() -> ToolEnv:
    """The current :class:`ToolEnv`.

    Raises:
        ToolError: the tool was called outside a brain turn.
    """
    env = current.get()
    if env is None:
        raise ToolError("this tool only works inside a brain conversation")
    return env


def require_guard(env: ToolEnv) -> PathGuard:
    """The env's path guard.

    Raises:
        ToolError: the user has no project folders.
    """
    if env.guard is None:
        raise ToolError("no project folders are available to you; ask an admin to add a project (elowen project add)")
    return env.guard

"""The brain's builtin tools. Each module offers ``tools() -> list[Tool]``; handlers read their
per-call context (user, path guard, session) from :data:`.env.current`."""

from __future__ import annotations

from elowen_sdk import Tool

from . import ask_user, close, files, tasks, terminal

__all__ = ["CHAT_ONLY", "WORKER_ONLY", "builtin_tools"]

WORKER_ONLY = frozenset({"task.close"})
"""Tools offered only to brain workers."""

CHAT_ONLY = frozenset({"ask_user", "tasks.create"})
"""Tools offered only in conversations with a user."""


def builtin_tools() -> list[Tool]:
    """Every builtin tool (files, terminal, ask-user, tasks, close)."""
    return [*files.tools(), *terminal.tools(), *ask_user.tools(), *tasks.tools(), *close.tools()]

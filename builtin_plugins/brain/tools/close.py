"""The close tool of brain workers: closes the task the worker runs on, with a summary and
evidence (as ``elowen close`` does for CLI agents)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elowen_sdk import ElowenError, Tool

from .env import ToolError, require_env

__all__ = ["close_task", "tools"]


async def close_task(summary: str, evidence: Sequence[str] = ()) -> dict[str, Any]:
    """Close the worker's task; ``{"id", "state"}``."""
    env = require_env()
    if env.task is None:
        raise ToolError("task.close is only for brain workers")
    if not summary.strip():
        raise ToolError("give a summary of what was done")
    try:
        task = env.service.tasks().close(int(env.task["id"]), summary, [str(e) for e in evidence])
    except (ElowenError, ValueError, LookupError) as exc:
        raise ToolError(f"cannot close the task: {exc}") from None
    env.closed = {"id": task["id"], "state": task["state"]}
    return env.closed


def tools() -> list[Tool]:
    """The close tool."""
    return [
        Tool(
            "task.close",
            "Close your task when it is done, with a summary and the evidence.",
            close_task,
            {
                "type": "object",
                "properties": {"summary": {"type": "string"}, "evidence": {"type": "array", "items": {"type": "string"}}},
                "required": ["summary"],
                "additionalProperties": False,
            },
        )
    ]

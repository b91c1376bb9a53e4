"""The ask-user tool: the brain asks the user a question and the turn waits for the answer
(it surfaces as a ``brain.approval`` event of kind ``question`` and in ``GET /brain/approvals``;
answered with ``POST /brain/approvals/{id}`` ``{"answer": "..."}``)."""

from __future__ import annotations

from elowen_sdk import Tool

from .env import ToolError, require_env

__all__ = ["ask", "tools"]


async def ask(question: str) -> str:
    """Wait for the user's answer; returns it. Raises :class:`ToolError` if they dismiss it."""
    env = require_env()
    record = await env.service.approvals.ask(env, question)
    if record["state"] != "answered":
        raise ToolError("the user dismissed the question")
    return str(record["answer"] or "")


def tools() -> list[Tool]:
    """The ask-user tool."""
    return [
        Tool(
            "ask_user",
            "Ask the user a question and wait for the answer (use sparingly).",
            ask,
            {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"], "additionalProperties": False},
        )
    ]

"""Agent Q&A (``elowen ask``): a question becomes a ``message`` decision; the autopilot
asks the active decision path or escalates it to a human; the asker long-polls for the answer.

An ask as the API shows it::

    {"id": <decision id>, "task_id", "question", "status": "pending"|"escalated"|"answered"|
     "rejected"|"expired", "answer": str | None, "decided_by", "rationale", "confidence",
     "created_at", "decided_at"}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from elowen_sdk.services import TasksService
from elowen_sdk.services.agents import AgentsService

from .autopilot import service

__all__ = ["MAX_QUESTION", "ask_record", "create_ask"]

MAX_QUESTION = 8000
"""Longest question, in characters."""

HISTORY_ITEMS = 10


def _history(autopilot: Any, task_id: int) -> list[dict[str, Any]]:
    """The task's recent progress notes and earlier questions with their answers."""
    out: list[dict[str, Any]] = []
    try:
        notes = autopilot.ctx.service(TasksService).progress_log(task_id, limit=HISTORY_ITEMS)
    except LookupError:
        notes = []
    out += [{"progress": n["text"], "at": n["ts"]} for n in notes]
    for d in autopilot.list_decisions(task_id=task_id, kind="message", limit=500)[-HISTORY_ITEMS:]:
        record = ask_record(d)
        out.append({"question": record["question"], "answer": record["answer"], "status": record["status"]})
    return out


def create_ask(autopilot: Any, *, question: str, task_id: int | None, asker: str, history: bool | Sequence[str] = False) -> dict[str, Any]:
    """Create the ``message`` decision for ``question`` and submit it to the autopilot.

    ``history``: ``True`` adds the task's recent progress notes and earlier Q&A; a list of
    strings adds those lines as given. Returns :func:`ask_record` of the new decision.

    Raises:
        ValueError: an empty or too long question, or a history that is not a list of strings.
    """
    text = question.strip()
    if not text:
        raise ValueError("question must not be empty")
    if len(text) > MAX_QUESTION:
        raise ValueError(f"question is longer than {MAX_QUESTION} characters")
    payload: dict[str, Any] = {"question": text, "asker": asker}
    if isinstance(history, bool):
        if history and task_id is not None:
            payload["history"] = _history(autopilot, task_id)
    elif isinstance(history, Sequence) and not isinstance(history, str) and all(isinstance(h, str) for h in history):
        payload["history"] = [h[:2000] for h in history[:50]]
    else:
        raise ValueError("history must be true/false or a list of strings")
    session = None
    if task_id is not None:
        try:
            running = service(autopilot.ctx, AgentsService).sessions(task_id=task_id, state="running", limit=1)
        except LookupError:
            running = []
        session = running[0]["session"] if running else None
    decision = autopilot.decisions().create("message", task_id=task_id, session=session, payload=payload)
    autopilot.submit(decision)
    return ask_record(decision)


def ask_record(decision: Mapping[str, Any]) -> dict[str, Any]:
    """The API shape of a ``message`` decision (see the module docstring)."""
    payload = decision.get("payload") or {}
    answer = decision.get("answer") or {}
    text = answer.get("text") if isinstance(answer, Mapping) and decision.get("status") == "answered" else None
    return {
        "id": decision["id"],
        "task_id": decision.get("task_id"),
        "question": payload.get("question"),
        "status": decision["status"],
        "answer": text,
        "decided_by": decision.get("decided_by"),
        "rationale": decision.get("rationale"),
        "confidence": decision.get("confidence"),
        "created_at": decision.get("created_at"),
        "decided_at": decision.get("decided_at"),
    }

"""The escalations inbox: decisions waiting for a human (status ``escalated``), and answering
them. An answer is carried out by the agents plugin's ``decisions`` service exactly like the
overseer's own (keys sent to the agent for ``prompt``/``question``; an ``elowen ask`` gets its
answer; a rejected review reopens its task, see :mod:`.reviews`).

An inbox item is the decision record plus ``task`` (``{"id", "title", "project_id", "state"}``
or ``None``) and ``mission`` (``{"id", "name", "level"}`` or ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elowen_sdk.services import TasksService

__all__ = ["ANSWERS", "answer_action", "inbox_item"]

ANSWERS = ("approve", "reject", "choice", "answer")


def answer_action(body: Mapping[str, Any]) -> tuple[str, int | None, str | None, str | None]:
    """``(action, choice, text, rationale)`` from an answer body ``{"action", "choice"?,
    "text"?, "rationale"?}``.

    Raises:
        ValueError: an unknown action, a choice that is not a positive integer, an answer
            without text, or fields of the wrong type.
    """
    action = body.get("action")
    if action not in ANSWERS:
        raise ValueError(f"action must be one of {', '.join(ANSWERS)}")
    choice = body.get("choice")
    if action == "choice" and (isinstance(choice, bool) or not isinstance(choice, int) or choice < 1):
        raise ValueError("choice must be the option number (≥ 1)")
    text = body.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError("text must be a string")
    if action == "answer" and not (text or "").strip():
        raise ValueError("an answer needs text")
    rationale = body.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise ValueError("rationale must be a string")
    if action == "reject" and text and not rationale:
        rationale = text  # a review's note to the agent
    return action, choice if action == "choice" else None, text, rationale


def inbox_item(decision: Mapping[str, Any], ctx: Any, missions: Any) -> dict[str, Any]:
    """The decision with its task (from the tasks service of ``ctx``) and mission (see the
    module docstring)."""
    item = dict(decision)
    task = None
    if decision.get("task_id") is not None:
        try:
            record = ctx.service(TasksService).get(int(decision["task_id"]))
            task = {k: record.get(k) for k in ("id", "title", "project_id", "state")}
        except LookupError:  # the task is gone (TaskNotFound), or no tasks service
            task = None
    item["task"] = task
    mission = missions.of_task(decision.get("task_id"))
    item["mission"] = {"id": mission["id"], "name": mission["name"], "level": mission["level"]} if mission else None
    return item

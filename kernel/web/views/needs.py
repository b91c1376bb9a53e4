"""The dashboard's "Needs you now" panel: what waits for a human, in one place — decisions
waiting (answerable inline: Allow, Reject, an answer), blocked tasks with their reason,
finished work whose branch waits to be merged or discarded (the git plugin's active worktrees
of closed, cancelled or blocked tasks), and paused brain goals when the brain lists them.
Each part that comes from a disabled plugin is simply left out.
"""

from __future__ import annotations

from typing import Any

from .panels import _waiting, deferred, gather

__all__ = ["needs"]

REVIEW_STATES = ("closed", "cancelled", "blocked")
"""Task states whose active worktree is work to review."""


async def needs(_: dict[str, str]) -> dict[str, Any]:
    """Context of ``partials/needs.html``: ``decisions`` (+ ``who``, ``answer_kinds``, ``titles``
    {task id: title}), ``blocked`` tasks, ``to_review`` worktrees, ``goals`` (paused),
    ``nothing`` (True when nothing waits)."""
    r = await gather(
        waiting=_waiting,
        blocked=deferred("GET", "/tasks", state="blocked", order="desc", limit=20),
        worktrees=deferred("GET", "/worktrees", state="active"),
        goals=deferred("GET", "/brain/goals", state="paused"),
    )
    waiting = r["waiting"]
    to_review = [w for w in r["worktrees"].items() if w.get("task_state") in REVIEW_STATES]
    ids = sorted({int(d["task_id"]) for d in waiting["decisions"] if d.get("task_id")} | {int(w["task_id"]) for w in to_review})
    titles: dict[int, str] = {}
    if ids:
        found = await gather(**{str(i): deferred("GET", f"/tasks/{i}") for i in ids[:50]})
        titles = {int(k): str(v.body.get("title", "")) for k, v in found.items() if v.ok and isinstance(v.body, dict)}
    blocked = r["blocked"].items()
    goals = r["goals"].items()
    return {
        **waiting,
        "titles": titles,
        "blocked": blocked,
        "to_review": to_review,
        "goals": goals,
        "nothing": not (waiting["decisions"] or waiting["approvals"] or blocked or to_review or goals),
    }

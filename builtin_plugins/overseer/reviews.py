"""Reviews of closed tasks.

When a task of a mission (or any task, with ``default_level`` set) closes, a ``review``
decision is created with the task's summary and evidence; the autopilot scores it like any
other decision. When a review ends ``rejected`` — by the overseer or by a human from the
inbox — the task is reopened with the reviewer's note as its resume note.

Bounded (PITFALLS 16/17): the automatic rejections of each task are counted in the table
``overseer_review_counts``; once ``max_review_rejections`` is reached, a further rejection by
the overseer escalates instead (see :func:`~.policy.finalize`), so a task can never loop
open ↔ closed on its own. A review that cannot complete (model error, unreadable answer)
escalates; it is never taken as a rejection. One review per close: ``overseer_reviews`` is
keyed by ``(task_id, closed_at)``, and ``applied`` records that a rejection was carried out,
so a restart neither reviews twice nor forgets to reopen.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from elowen_sdk.services import AgentsService, TasksService

from .missions import utc_iso

__all__ = ["Reviews"]

log = logging.getLogger("elowen.plugin.overseer")


class Reviews:
    """Args: ``autopilot`` (an :class:`~.autopilot.Autopilot`)."""

    def __init__(self, autopilot: Any) -> None:
        self.autopilot = autopilot
        self.store = autopilot.store

    def rejections(self, task_id: int) -> int:
        """Reopenings by review so far (durable)."""
        row = self.store.query_one("SELECT rejections FROM overseer_review_counts WHERE task_id = ?", (task_id,))
        return int(row["rejections"]) if row else 0

    def on_closed(self, task: Mapping[str, Any]) -> dict[str, Any] | None:
        """A task closed: create its review decision (once per close) and submit it; returns
        the decision, or ``None`` when the task is not reviewed."""
        if not self.autopilot.config.reviews:
            return None
        mission, level = self.autopilot.level_for({"task_id": task["id"]})
        if level is None:
            return None
        closed_at = str(task.get("closed_at") or task.get("updated_at") or utc_iso())
        if self.store.query_one("SELECT 1 AS x FROM overseer_reviews WHERE task_id = ? AND closed_at = ?", (task["id"], closed_at)):
            return None
        decision = self.autopilot.decisions().create(
            "review",
            task_id=int(task["id"]),
            payload={
                "title": task.get("title"),
                "description": task.get("description"),
                "summary": task.get("summary"),
                "evidence": list(task.get("evidence") or []),
                "rejections_so_far": self.rejections(int(task["id"])),
            },
        )
        self.store.execute("INSERT OR IGNORE INTO overseer_reviews (decision_id, task_id, closed_at) VALUES (?, ?, ?)", (decision["id"], task["id"], closed_at))
        self.autopilot.submit(decision)
        return decision

    def on_decided(self, decision: Mapping[str, Any]) -> None:
        """Carry out a decided review: a rejection reopens the task (once)."""
        if decision.get("kind") != "review":
            return
        row = self.store.query_one("SELECT applied FROM overseer_reviews WHERE decision_id = ?", (decision["id"],))
        if row is None or row["applied"]:
            return
        if decision["status"] == "rejected":
            self._reopen(decision)
        if decision["status"] in ("approved", "rejected", "answered", "expired"):
            self.store.execute("UPDATE overseer_reviews SET applied = 1 WHERE decision_id = ?", (decision["id"],))

    def _reopen(self, decision: Mapping[str, Any]) -> None:
        task_id = int(decision["task_id"])
        tasks = self.autopilot.ctx.service(TasksService)
        current = tasks.exists(task_id)
        if current is None or current["state"] != "closed":
            return
        with self.store.transaction():
            self.store.execute(
                "INSERT INTO overseer_review_counts (task_id, rejections) VALUES (?, 1) ON CONFLICT (task_id) DO UPDATE SET rejections = rejections + 1",
                (task_id,),
            )
        note = (decision.get("rationale") or "the reviewer gave no note").strip()
        tasks.update(task_id, {"state": "open", "resume_note": f"The review of your previous attempt rejected it: {note}"})
        log.info("task %s reopened by review %s", task_id, decision["id"])
        with contextlib.suppress(LookupError):
            self.autopilot.ctx.service(AgentsService).wake()

    def catch_up(self) -> None:
        """Carry out decided reviews whose outcome was not applied yet (after a restart)."""
        rows = self.store.query("SELECT decision_id FROM overseer_reviews WHERE applied = 0 ORDER BY decision_id LIMIT 100")
        for row in rows:
            decision = self.autopilot.decisions().get(row["decision_id"])
            if decision is not None and decision["status"] not in ("pending", "escalated"):
                self.on_decided(decision)

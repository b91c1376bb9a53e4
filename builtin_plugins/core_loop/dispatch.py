"""Dispatch decisions: a project in a mission asks before each agent turn.

The project's parent task is in the mission; its child tasks are not (the executor, not the
missions gate, decides when one runs). Before releasing a task the executor asks a *dispatch*
decision — a ``message`` decision through :class:`~elowen_sdk.services.DecisionsService`, task
the parent, payload ``{"question", "asker": "core-loop", "core_loop": {"scope": "task" |
"plan", "project", "task_id"}}`` — which the overseer routes as any other decision of the
mission: at L0 it goes to a human in the Escalations inbox (L0 plans and proposes, never
executes on its own); at L1–L3 the active decision path scores it against the level's threshold
(with none, a human answers). At L0 a second decision, asked once per project, approves every
dispatch of the plan at once.

Answer → effect: ``approved`` (or ``answered`` with a yes) releases the task (the decision is used up: the next turn asks
again), ``rejected`` drops it, ``pending``/``escalated`` waits (a human-gated state, polled
cheaply; no iteration is counted while waiting).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from elowen_sdk.services import DecisionsService

from .store import LoopStore

__all__ = ["DispatchGate"]

log = logging.getLogger("elowen.plugin.core-loop")

OPEN = ("pending", "escalated")


_YES = re.compile(r"^\s*(yes|y|approve|approved|go|ok|okay)\b", re.I)


def _approves(decision: dict[str, Any]) -> bool:
    """Approved, or answered with a yes (a ``message`` decision may be answered in words)."""
    if decision["status"] == "approved":
        return True
    answer = decision.get("answer") or {}
    return decision["status"] == "answered" and bool(_YES.match(str(answer.get("text") or "")))


class DispatchGate:
    """Creates and reads dispatch decisions (see the module docstring)."""

    def __init__(self, ctx: Any, db: LoopStore) -> None:
        self.ctx = ctx
        self.db = db

    def _decisions(self) -> DecisionsService | None:
        try:
            return self.ctx.service(DecisionsService)  # type: ignore[no-any-return]
        except LookupError:
            return None

    def _ask(self, decisions: DecisionsService, project: dict[str, Any], question: str, scope: str, task_id: int | None) -> int:
        payload = {"question": question[:4000], "asker": "core-loop", "core_loop": {"scope": scope, "project": project["id"], "task_id": task_id}}
        decision = decisions.create("message", task_id=project["task_id"], payload=payload)
        log.info("core-loop project %s: dispatch decision %s asked (%s)", project["id"], decision["id"], scope)
        return int(decision["id"])

    def check(self, project: dict[str, Any], planned: dict[str, Any], task: dict[str, Any], level: int) -> tuple[str, str]:
        """``("go" | "wait" | "rejected" | "unavailable", why)`` for releasing ``task`` now."""
        decisions = self._decisions()
        if decisions is None:
            return "unavailable", "the decisions service is off: a mission's dispatches cannot be asked"
        if level == 0:
            plan = project.get("plan_decision")
            if plan is None:
                question = f"Run the whole plan of project #{project['id']} {project['title']!r} ({len(self.db.tasks(project['id']))} tasks)?"
                plan = self._ask(decisions, project, question, "plan", None)
                self.db.update_project(project["id"], plan_decision=plan)
            row = decisions.get(int(plan))
            if row is not None and _approves(row):
                open_task = planned.get("dispatch_decision")
                if open_task is not None:  # the per-task question is moot now
                    decisions.expire(int(open_task), "the whole plan was approved", by="core-loop")
                    self.db.set_dispatch(task["id"], None)
                return "go", f"the whole plan was approved by {row.get('decided_by')}"
        current = planned.get("dispatch_decision")
        if current is None:
            criteria = "; ".join(planned.get("acceptance") or []) or "none given"
            question = f"Dispatch task #{task['id']} {task['title']!r} of project #{project['id']} to {task.get('exec') or 'the default executor'}? Acceptance: {criteria}"
            current = self._ask(decisions, project, question, "task", int(task["id"]))
            self.db.set_dispatch(task["id"], current)
        row = decisions.get(int(current))
        status = row["status"] if row is not None else "expired"
        if row is not None and _approves(row):
            self.db.set_dispatch(task["id"], None)  # used up: the next turn asks again
            return "go", f"approved by {row.get('decided_by') if row else '?'}"
        if status in OPEN:
            return "wait", f"dispatch decision {current} is {status}"
        self.db.set_dispatch(task["id"], None)
        why = (row or {}).get("rationale") or status
        return "rejected", f"dispatch {status}: {why}"

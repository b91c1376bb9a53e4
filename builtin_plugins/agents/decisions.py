"""The ``decisions`` table and its events.

A decision is something that needs an answer: a CLI permission prompt (``prompt``), a CLI
choice list (``question``), a liveness ``check``, or (other plugins) ``review`` / ``message``.
It is created ``pending`` and published as ``decision.created`` — that event is how a decision
path (the overseer) learns of it; answering it (:mod:`.decide`) publishes ``decision.decided``.
With no decision path enabled, a decision waits for a human (``POST /decisions/{id}``,
``elowen decide``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from elowen_sdk.services.agents import DECISION_ACTIONS, DECISION_KINDS, DECISION_STATUSES
from elowen_sdk.store import utc_iso

__all__ = ["ACTIONS", "KINDS", "OPEN", "STATUSES", "DecisionStore"]

KINDS = DECISION_KINDS
STATUSES = DECISION_STATUSES
"""``expired``: the prompt left the screen before it was answered (answered in the terminal,
or the agent moved on); it can no longer be applied."""
ACTIONS = DECISION_ACTIONS
OPEN = ("pending", "escalated")
"""Statuses that can still be answered."""

_COLUMNS = "id, kind, task_id, session, payload, status, confidence, decided_by, rationale, answer, created_at, decided_at"


def _row(row: dict[str, Any]) -> dict[str, Any]:
    row["payload"] = json.loads(row["payload"]) if row["payload"] else {}
    row["answer"] = json.loads(row["answer"]) if row["answer"] else None
    return row


class DecisionStore:
    """Reads and writes ``decisions`` rows and publishes their events.

    ``publish(type, data, project_id)`` is the plugin's event publisher; ``project_of(task_id)``
    gives the project of a task (events carry it so SSE filtering works).
    """

    def __init__(self, store: Any, publish: Callable[..., Any], project_of: Callable[[int | None], int | None]) -> None:
        self.store = store
        self._publish = publish
        self._project_of = project_of

    def create(self, kind: str, *, task_id: int | None, session: str | None, payload: Mapping[str, Any], status: str = "pending") -> dict[str, Any]:
        """Insert a decision and publish ``decision.created`` (data: the decision)."""
        if kind not in KINDS:
            raise ValueError(f"unknown decision kind {kind!r}")
        project = self._project_of(task_id)
        did = self.store.execute(
            "INSERT INTO decisions (kind, task_id, session, payload, status, created_at, project_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (kind, task_id, session, json.dumps(dict(payload), ensure_ascii=False), status, utc_iso(), project),
        )
        decision = self.get(did)
        assert decision is not None
        self._publish("decision.created", {"decision": decision}, project)
        return decision

    def record(
        self,
        kind: str,
        *,
        task_id: int | None,
        session: str | None,
        payload: Mapping[str, Any],
        status: str,
        decided_by: str,
        answer: Mapping[str, Any],
        rationale: str | None,
    ) -> dict[str, Any]:
        """Insert a decision that is already decided (it was never open) and publish
        ``decision.created`` then ``decision.decided`` (data: the decision)."""
        if kind not in KINDS or status not in STATUSES or status in OPEN:
            raise ValueError(f"cannot record a {kind!r} decision as {status!r}")
        now = utc_iso()
        project = self._project_of(task_id)
        did = self.store.execute(
            "INSERT INTO decisions (kind, task_id, session, payload, status, decided_by, answer, rationale, created_at, decided_at, project_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                kind,
                task_id,
                session,
                json.dumps(dict(payload), ensure_ascii=False),
                status,
                decided_by,
                json.dumps(dict(answer), ensure_ascii=False),
                rationale,
                now,
                now,
                project,
            ),
        )
        decision = self.get(did)
        assert decision is not None
        self._publish("decision.created", {"decision": decision}, project)
        self._publish("decision.decided", {"decision": decision}, project)
        return decision

    def project_of_decision(self, decision_id: int, task_id: int | None) -> int | None:
        """The project kept on the decision's row (its task's project when it was created, also
        after the task is deleted), else the task's project now."""
        row = self.store.query_one("SELECT project_id FROM decisions WHERE id = ?", (decision_id,))
        if row is not None and row["project_id"] is not None:
            return int(row["project_id"])
        return self._project_of(task_id)

    def get(self, decision_id: int) -> dict[str, Any] | None:
        row = self.store.query_one(f"SELECT {_COLUMNS} FROM decisions WHERE id = ?", (decision_id,))
        return _row(row) if row else None

    def list_decisions(
        self, *, status: str | None = None, task_id: int | None = None, kind: str | None = None, after: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Decisions by ascending id."""
        where, params = ["1 = 1"], []
        for col, value in (("status", status), ("task_id", task_id), ("kind", kind)):
            if value is not None:
                where.append(f"{col} = ?")
                params.append(value)
        if after is not None:
            where.append("id > ?")
            params.append(after)
        params.append(limit)
        rows = self.store.query(f"SELECT {_COLUMNS} FROM decisions WHERE {' AND '.join(where)} ORDER BY id LIMIT ?", params)
        return [_row(r) for r in rows]

    def open_for_session(self, session: str, kind: str | None = None) -> list[dict[str, Any]]:
        """Pending or escalated decisions of ``session``."""
        sql = f"SELECT {_COLUMNS} FROM decisions WHERE session = ? AND status IN ('pending', 'escalated')"
        params: list[Any] = [session]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        return [_row(r) for r in self.store.query(sql + " ORDER BY id", params)]

    def repoint(self, decision_id: int, payload: Mapping[str, Any]) -> None:
        """Replace an open decision's payload (re-linking it to a prompt instance after a
        restart)."""
        self.store.execute(
            "UPDATE decisions SET payload = ? WHERE id = ? AND status IN ('pending', 'escalated')",
            (json.dumps(dict(payload), ensure_ascii=False), decision_id),
        )

    def settle(
        self,
        decision_id: int,
        status: str,
        *,
        decided_by: str,
        answer: Mapping[str, Any] | None = None,
        rationale: str | None = None,
        confidence: float | None = None,
    ) -> dict[str, Any] | None:
        """Move an open (``pending``/``escalated``) decision to ``status`` and publish
        ``decision.decided``; ``escalate`` keeps it open. Returns the decision, or ``None`` if it
        was not open any more (someone else answered first)."""
        if status not in STATUSES:
            raise ValueError(f"unknown decision status {status!r}")
        changed = self.store.execute(
            "UPDATE decisions SET status = ?, decided_by = ?, answer = ?, rationale = ?, confidence = ?, decided_at = ? "
            "WHERE id = ? AND status IN ('pending', 'escalated')",
            (
                status,
                decided_by,
                json.dumps(dict(answer), ensure_ascii=False) if answer is not None else None,
                rationale,
                confidence,
                utc_iso(),
                decision_id,
            ),
        )
        if not changed:
            return None
        decision = self.get(decision_id)
        assert decision is not None
        self._publish("decision.decided", {"decision": decision}, self.project_of_decision(decision_id, decision["task_id"]))
        return decision

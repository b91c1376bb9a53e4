"""The core loop's own rows (tables of ``schema.sql``): projects, planned tasks, runs, turns.

The ledger (tasks, states, attempts, evidence) stays the tasks service's; these rows hold only
what the ledger has no field for: where a project came from, each task's plan position,
acceptance criteria and plan priority, whether the executor dropped it, and each run's durable
iteration count and turns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from elowen_sdk import utc_iso

__all__ = ["LoopStore"]


def _loads(value: Any, default: Any) -> Any:
    try:
        return json.loads(value) if value else default
    except (TypeError, ValueError):
        return default


class LoopStore:
    """Reads and writes the core loop's tables through the plugin's store (``ctx.store``)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    # -- projects ---------------------------------------------------------------------------

    def open_project(self, *, ledger_project: int, user_id: int | None, conversation_id: int | None, request: str, mission_id: int | None) -> dict[str, Any]:
        """Insert a project in state ``planning``; returns its row."""
        now = utc_iso()
        pid = self.store.execute(
            "INSERT INTO core_loop_projects (ledger_project, user_id, conversation_id, request, state, mission_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, 'planning', ?, ?, ?)",
            (ledger_project, user_id, conversation_id, request, mission_id, now, now),
        )
        return self.project(pid)  # type: ignore[return-value]

    def project(self, pid: int) -> dict[str, Any] | None:
        row = self.store.query_one("SELECT * FROM core_loop_projects WHERE id = ?", (pid,))
        return self._project(row) if row else None

    def project_of_task(self, task_id: int) -> dict[str, Any] | None:
        """The project whose parent task, or one of whose planned tasks, is ``task_id``."""
        row = self.store.query_one("SELECT * FROM core_loop_projects WHERE task_id = ?", (task_id,))
        if row is None:
            row = self.store.query_one("SELECT p.* FROM core_loop_projects p JOIN core_loop_tasks t ON t.project = p.id WHERE t.task_id = ?", (task_id,))
        return self._project(row) if row else None

    def projects(self, *, state: str | None = None, user_id: int | None = None, limit: int = 100) -> list[dict[str, Any]]:
        sql, args = "SELECT * FROM core_loop_projects WHERE 1 = 1", list[Any]()
        if state is not None:
            sql += " AND state = ?"
            args.append(state)
        if user_id is not None:
            sql += " AND user_id = ?"
            args.append(user_id)
        rows = self.store.query(sql + " ORDER BY id LIMIT ?", (*args, int(limit)))
        return [self._project(r) for r in rows]

    def awaiting(self, conversation_id: int) -> dict[str, Any] | None:
        """The newest project of a conversation waiting for plan approval, or ``None``."""
        row = self.store.query_one(
            "SELECT * FROM core_loop_projects WHERE conversation_id = ? AND state = 'awaiting_approval' ORDER BY id DESC LIMIT 1", (conversation_id,)
        )
        return self._project(row) if row else None

    def update_project(self, pid: int, **fields: Any) -> dict[str, Any]:
        if "plan_log" in fields:
            fields["plan_log"] = json.dumps(list(fields["plan_log"]))
        fields["updated_at"] = utc_iso()
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.store.execute(f"UPDATE core_loop_projects SET {cols} WHERE id = ?", (*fields.values(), pid))
        return self.project(pid)  # type: ignore[return-value]

    @staticmethod
    def _project(row: dict[str, Any]) -> dict[str, Any]:
        out = dict(row)
        out["plan_log"] = _loads(row.get("plan_log"), [])
        return out

    # -- planned tasks ----------------------------------------------------------------------

    def add_task(self, task_id: int, project: int, position: int, acceptance: Iterable[str], priority: str) -> None:
        self.store.execute(
            "INSERT INTO core_loop_tasks (task_id, project, position, acceptance, priority) VALUES (?, ?, ?, ?, ?)",
            (task_id, project, position, json.dumps(list(acceptance)), priority),
        )

    def tasks(self, project: int) -> list[dict[str, Any]]:
        """The planned tasks of a project in plan order: ``{"task_id", "position",
        "acceptance": [str], "priority", "dropped": bool, "drop_reason"}``."""
        rows = self.store.query("SELECT * FROM core_loop_tasks WHERE project = ? ORDER BY position, task_id", (project,))
        return [self._task(r) for r in rows]

    def task(self, task_id: int) -> dict[str, Any] | None:
        row = self.store.query_one("SELECT * FROM core_loop_tasks WHERE task_id = ?", (task_id,))
        return self._task(row) if row else None

    def update_task(self, task_id: int, *, acceptance: Iterable[str] | None = None, priority: str | None = None) -> None:
        if acceptance is not None:
            self.store.execute("UPDATE core_loop_tasks SET acceptance = ? WHERE task_id = ?", (json.dumps(list(acceptance)), task_id))
        if priority is not None:
            self.store.execute("UPDATE core_loop_tasks SET priority = ? WHERE task_id = ?", (priority, task_id))

    def set_dispatch(self, task_id: int, decision_id: int | None) -> None:
        self.store.execute("UPDATE core_loop_tasks SET dispatch_decision = ? WHERE task_id = ?", (decision_id, task_id))

    def drop(self, task_id: int, reason: str) -> None:
        self.store.execute("UPDATE core_loop_tasks SET dropped = 1, drop_reason = ? WHERE task_id = ?", (reason, task_id))

    @staticmethod
    def _task(row: dict[str, Any]) -> dict[str, Any]:
        out = dict(row)
        out["acceptance"] = _loads(row.get("acceptance"), [])
        out["dropped"] = bool(row.get("dropped"))
        return out

    # -- runs and turns ---------------------------------------------------------------------

    def current_run(self, project: int) -> dict[str, Any] | None:
        row: dict[str, Any] | None = self.store.query_one(
            "SELECT * FROM core_loop_runs WHERE project = ? AND state = 'running' ORDER BY id DESC LIMIT 1", (project,)
        )
        return row

    def runs(self, project: int) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.store.query("SELECT * FROM core_loop_runs WHERE project = ? ORDER BY id", (project,))
        for row in rows:
            row["receipt"] = _loads(row.get("receipt"), None)
        return rows

    def start_run(self, project: int) -> dict[str, Any]:
        rid = self.store.execute("INSERT INTO core_loop_runs (project, state, started_at) VALUES (?, 'running', ?)", (project, utc_iso()))
        return self.store.query_one("SELECT * FROM core_loop_runs WHERE id = ?", (rid,))  # type: ignore[no-any-return]

    def run(self, rid: int) -> dict[str, Any]:
        return self.store.query_one("SELECT * FROM core_loop_runs WHERE id = ?", (rid,))  # type: ignore[no-any-return]

    def set_pulsed(self, rid: int, count: int) -> None:
        self.store.execute("UPDATE core_loop_runs SET pulsed = ? WHERE id = ?", (count, rid))

    def end_run(self, rid: int, stop_reason: str, spend_tokens: int, receipt: dict[str, Any]) -> None:
        self.store.execute(
            "UPDATE core_loop_runs SET state = 'ended', ended_at = ?, stop_reason = ?, spend_tokens = ?, receipt = ? WHERE id = ?",
            (utc_iso(), stop_reason, spend_tokens, json.dumps(receipt), rid),
        )

    def begin_turn(self, rid: int, task_id: int, attempts_before: int, notes_before: int) -> dict[str, Any]:
        """Count one iteration and record the turn, in one transaction, BEFORE the task is
        released: a restart then finds the turn and waits for it instead of releasing again."""
        with self.store.transaction():
            self.store.execute("UPDATE core_loop_runs SET iterations = iterations + 1 WHERE id = ?", (rid,))
            iteration = self.run(rid)["iterations"]
            tid = self.store.execute(
                "INSERT INTO core_loop_turns (run, iteration, task_id, attempts_before, notes_before, started_at) VALUES (?, ?, ?, ?, ?, ?)",
                (rid, iteration, task_id, attempts_before, notes_before, utc_iso()),
            )
        return self.store.query_one("SELECT * FROM core_loop_turns WHERE id = ?", (tid,))  # type: ignore[no-any-return]

    def open_turn(self, rid: int) -> dict[str, Any] | None:
        row: dict[str, Any] | None = self.store.query_one("SELECT * FROM core_loop_turns WHERE run = ? AND ended_at IS NULL ORDER BY id DESC LIMIT 1", (rid,))
        return row

    def end_turn(self, turn_id: int, outcome: str) -> None:
        self.store.execute("UPDATE core_loop_turns SET ended_at = ?, outcome = ? WHERE id = ?", (utc_iso(), outcome, turn_id))

    def turns(self, rid: int) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.store.query("SELECT * FROM core_loop_turns WHERE run = ? ORDER BY id", (rid,))
        return rows

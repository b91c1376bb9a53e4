"""The ``agent_sessions`` table: one row per agent launch (see ``schema.sql``).

All methods are synchronous and run on the trio thread (the kernel store's connection).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from elowen_sdk.store import utc_iso

__all__ = ["SESSION_RE", "SessionStore", "session_name"]

SESSION_RE = re.compile(r"^elowen-t(\d+)-a(\d+)$")
"""Agent session names: ``elowen-t<task id>-a<attempt>``."""

_COLUMNS = (
    "id, task_id, attempt, provider, model, session, pane_id, pid, cli_session_id, workdir, state, signal, env, started_at, ended_at, exit_status, end_reason"
)


def session_name(task_id: int, attempt: int) -> str:
    """``elowen-t<task>-a<attempt>`` (only characters tmux targets accept)."""
    return f"elowen-t{int(task_id)}-a{int(attempt)}"


def _row(row: dict[str, Any]) -> dict[str, Any]:
    row["env"] = json.loads(row["env"]) if row.get("env") else {}
    return row


class SessionStore:
    """Reads and writes ``agent_sessions`` rows (dicts with the table's columns; ``env`` parsed)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def insert(
        self, *, task_id: int, attempt: int, provider: str, model: str, workdir: str, cli_session_id: str | None, project_id: int | None = None
    ) -> dict[str, Any]:
        """Record a launch in state ``running`` (before tmux is asked: a crash in between is
        then seen by the stuck detector). ``project_id`` (the task's project) is kept on the row
        so the session's events stay in that project after the task is deleted. Returns the row.

        Raises:
            apsw.ConstraintError: a row for that session name exists.
        """
        self.store.execute(
            "INSERT INTO agent_sessions (task_id, attempt, provider, model, session, workdir, cli_session_id, started_at, project_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (task_id, attempt, provider, model, session_name(task_id, attempt), workdir, cli_session_id, utc_iso(), project_id),
        )
        return self.by_name(session_name(task_id, attempt))  # type: ignore[return-value]

    def spawned(self, name: str, *, pane_id: str, pid: int, env: Mapping[str, str]) -> None:
        """tmux created the session: remember its pane, pid and the non-secret environment."""
        self.store.execute(
            "UPDATE agent_sessions SET pane_id = ?, pid = ?, env = ? WHERE session = ?",
            (pane_id, pid, json.dumps(dict(env)), name),
        )

    def set_signal(self, name: str, signal: str) -> None:
        self.store.execute("UPDATE agent_sessions SET signal = ? WHERE session = ?", (signal, name))

    def set_cli_session_id(self, name: str, cli_session_id: str) -> None:
        self.store.execute("UPDATE agent_sessions SET cli_session_id = ? WHERE session = ?", (cli_session_id, name))

    def finish(self, name: str, state: str, *, reason: str, exit_status: int | None = None) -> bool:
        """Move a ``running`` session to ``exited`` or ``ended``; ``False`` if it was not running."""
        return bool(
            self.store.execute(
                "UPDATE agent_sessions SET state = ?, ended_at = ?, end_reason = ?, exit_status = ? WHERE session = ? AND state = 'running'",
                (state, utc_iso(), reason, exit_status, name),
            )
        )

    def by_name(self, name: str) -> dict[str, Any] | None:
        row = self.store.query_one(f"SELECT {_COLUMNS} FROM agent_sessions WHERE session = ?", (name,))
        return _row(row) if row else None

    def running(self) -> list[dict[str, Any]]:
        """Every session in state ``running``, oldest first."""
        return [_row(r) for r in self.store.query(f"SELECT {_COLUMNS} FROM agent_sessions WHERE state = 'running' ORDER BY id")]

    def count_running(self) -> int:
        row = self.store.query_one("SELECT count(*) AS n FROM agent_sessions WHERE state = 'running'")
        return int(row["n"]) if row else 0

    def latest_for_task(self, task_id: int) -> dict[str, Any] | None:
        row = self.store.query_one(f"SELECT {_COLUMNS} FROM agent_sessions WHERE task_id = ? ORDER BY attempt DESC LIMIT 1", (task_id,))
        return _row(row) if row else None

    def previous(self, task_id: int, attempt: int) -> dict[str, Any] | None:
        """The latest session of ``task_id`` before ``attempt`` (for a resume), or ``None``."""
        row = self.store.query_one(f"SELECT {_COLUMNS} FROM agent_sessions WHERE task_id = ? AND attempt < ? ORDER BY attempt DESC LIMIT 1", (task_id, attempt))
        return _row(row) if row else None

    def list_sessions(self, *, task_id: int | None = None, state: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Sessions, newest first."""
        where, params = ["1 = 1"], []
        if task_id is not None:
            where.append("task_id = ?")
            params.append(task_id)
        if state is not None:
            where.append("state = ?")
            params.append(state)
        params.append(limit)
        sql = f"SELECT {_COLUMNS} FROM agent_sessions WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
        return [_row(r) for r in self.store.query(sql, params)]

"""The durable side of cron: jobs, their runs, the ticker's heartbeat (tables ``cron_*``, this
plugin's ``schema.sql``). Synchronous; called on the trio thread.

A *job row* is the ``cron_jobs`` row as a dict; a *run row* the ``cron_runs`` row. Run
statuses: ``claimed`` (committed before the run starts), ``running`` (its conversation exists
and the turn was started), then one of ``ran``, ``failed`` (with ``error``), ``missed`` (the
daemon was down past the grace, or the job was paused), ``skipped`` (a previous run of the job
was still going).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from elowen_sdk import Store, utc_iso

__all__ = ["OPEN", "CronStore", "iso", "parse_iso"]

OPEN = ("claimed", "running")
"""Run statuses of a fire not finished yet."""


def iso(t: datetime) -> str:
    """An aware instant as the store's UTC text (``2026-12-24T08:00:00.000Z``)."""
    return utc_iso(t.timestamp())


def parse_iso(text: str) -> datetime:
    """The inverse of :func:`iso` (aware, UTC)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class CronStore:
    """Jobs and runs over ``store`` (the plugin's ``ctx.store``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- jobs --------------------------------------------------------------------------------

    def create_job(self, **fields: Any) -> dict[str, Any]:
        """Insert a job (``owner_id``, ``owner_role``, ``name``, ``prompt``, ``schedule``,
        ``tz``, ``spec``, ``project_id``, ``model``, ``deliver``, ``catchup``,
        ``catchup_cap``, ``next_fire``) and return its row."""
        now = utc_iso()
        cols = [*fields, "created_at", "updated_at"]
        job_id = self.store.execute(
            f"INSERT INTO cron_jobs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            (*fields.values(), now, now),
        )
        job = self.job(job_id)
        assert job is not None
        return job

    def job(self, job_id: int) -> dict[str, Any] | None:
        """The job row, or ``None``."""
        return self.store.query_one("SELECT * FROM cron_jobs WHERE id = ?", (job_id,))

    def jobs(self, *, owner_id: int | None, after: int | None, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit + 1`` jobs by id (ascending) after ``after``; ``owner_id`` ``None``:
        every owner's."""
        sql = "SELECT * FROM cron_jobs WHERE id > ?"
        params: list[Any] = [after or 0]
        if owner_id is not None:
            sql += " AND owner_id = ?"
            params.append(owner_id)
        return self.store.query(sql + " ORDER BY id LIMIT ?", (*params, limit + 1))

    def update_job(self, job_id: int, **fields: Any) -> None:
        """Set columns of a job (``updated_at`` too)."""
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.store.execute(f"UPDATE cron_jobs SET {sets}, updated_at = ? WHERE id = ?", (*fields.values(), utc_iso(), job_id))

    def delete_job(self, job_id: int) -> bool:
        """Delete a job and its runs; ``False`` when there was none."""
        with self.store.transaction():
            self.store.execute("DELETE FROM cron_runs WHERE job_id = ?", (job_id,))
            return self.store.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,)) > 0

    def stop_owner_jobs(self, owner_id: int, reason: str) -> list[int]:
        """Stop every active or paused job of ``owner_id``; returns their ids."""
        rows = self.store.query("SELECT id FROM cron_jobs WHERE owner_id = ? AND state IN ('active', 'paused')", (owner_id,))
        ids = [r["id"] for r in rows]
        if ids:
            self.store.execute(
                f"UPDATE cron_jobs SET state = 'stopped', stop_reason = ?, updated_at = ? WHERE id IN ({', '.join('?' * len(ids))})", (reason, utc_iso(), *ids)
            )
        return ids

    def owners(self) -> list[dict[str, Any]]:
        """``[{owner_id, owner_role}]`` of every job still able to fire."""
        return self.store.query("SELECT DISTINCT owner_id, owner_role FROM cron_jobs WHERE state IN ('active', 'paused')")

    def due(self, now: datetime, limit: int = 500) -> list[dict[str, Any]]:
        """Jobs (active or paused) whose ``next_fire`` is at or before ``now``, soonest first."""
        return self.store.query(
            "SELECT * FROM cron_jobs WHERE next_fire IS NOT NULL AND next_fire <= ? AND state IN ('active', 'paused') ORDER BY next_fire LIMIT ?",
            (iso(now), limit),
        )

    def next_due(self) -> str | None:
        """The soonest ``next_fire`` of any job that can fire, or ``None``."""
        row = self.store.query_one("SELECT MIN(next_fire) AS t FROM cron_jobs WHERE next_fire IS NOT NULL AND state IN ('active', 'paused')")
        return row["t"] if row else None

    # -- claiming fires ----------------------------------------------------------------------

    def claim(self, job: dict[str, Any], records: Iterable[tuple[str, str, str, str | None]], next_fire: str | None, *, done: bool) -> list[int] | None:
        """In one transaction: insert one run per ``(scheduled_for, trigger, status, error)``
        and move the job's ``next_fire`` from the value in ``job`` to ``next_fire`` (``done``:
        the one-shot is finished). Returns the ids of the inserted ``claimed`` runs, or
        ``None`` when the job changed meanwhile (nothing is written: compare-and-set on
        ``next_fire``, so a fire is never claimed twice)."""
        now = utc_iso()
        with self.store.transaction():
            changed = self.store.execute(
                "UPDATE cron_jobs SET next_fire = ?, state = CASE WHEN ? THEN 'done' ELSE state END, updated_at = ? "
                "WHERE id = ? AND next_fire IS ? AND state IN ('active', 'paused')",
                (next_fire, int(done), now, job["id"], job["next_fire"]),
            )
            if changed != 1:
                return None
            claimed = []
            for scheduled_for, trigger, status, error in records:
                run_id = self.store.execute(
                    "INSERT OR IGNORE INTO cron_runs (job_id, scheduled_for, trigger, status, error, claimed_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (job["id"], scheduled_for, trigger, status, error, now, None if status == "claimed" else now),
                )
                if run_id and status == "claimed":
                    claimed.append(run_id)
        return claimed

    def claim_manual(self, job_id: int) -> int | None:
        """A ``manual`` run of the job (run-now), claimed; ``None`` when a run of the job is
        still open."""
        now = utc_iso()
        with self.store.transaction():
            if self.open_run(job_id) is not None:
                return None
            return self.store.execute(
                "INSERT INTO cron_runs (job_id, scheduled_for, trigger, status, claimed_at) VALUES (?, ?, 'manual', 'claimed', ?)", (job_id, now, now)
            )

    def open_run(self, job_id: int) -> dict[str, Any] | None:
        """The job's oldest claimed or running run, or ``None``."""
        return self.store.query_one("SELECT * FROM cron_runs WHERE job_id = ? AND status IN ('claimed', 'running') ORDER BY id LIMIT 1", (job_id,))

    def open_runs(self) -> list[dict[str, Any]]:
        """Every claimed or running run, oldest first (after a restart: the interrupted ones)."""
        return self.store.query("SELECT * FROM cron_runs WHERE status IN ('claimed', 'running') ORDER BY id")

    # -- runs --------------------------------------------------------------------------------

    def run(self, run_id: int) -> dict[str, Any] | None:
        """The run row, or ``None``."""
        return self.store.query_one("SELECT * FROM cron_runs WHERE id = ?", (run_id,))

    def runs(self, job_id: int, *, before: int | None, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit + 1`` runs of the job, newest first, with ids below ``before``."""
        return self.store.query("SELECT * FROM cron_runs WHERE job_id = ? AND id < ? ORDER BY id DESC LIMIT ?", (job_id, before or 2**62, limit + 1))

    def last_runs(self, job_ids: list[int]) -> dict[int, dict[str, Any]]:
        """The newest run of each job (those that have one)."""
        if not job_ids:
            return {}
        rows = self.store.query(
            f"SELECT r.* FROM cron_runs r JOIN (SELECT job_id, MAX(id) AS id FROM cron_runs WHERE job_id IN ({', '.join('?' * len(job_ids))}) GROUP BY job_id) m ON r.id = m.id",
            job_ids,
        )
        return {r["job_id"]: r for r in rows}

    def start_run(self, run_id: int, conversation_id: int) -> bool:
        """``claimed → running`` with its conversation, committed before the turn starts;
        ``False`` when the run is no longer claimed (its job was deleted)."""
        return (
            self.store.execute(
                "UPDATE cron_runs SET status = 'running', conversation_id = ?, started_at = ? WHERE id = ? AND status = 'claimed'",
                (conversation_id, utc_iso(), run_id),
            )
            == 1
        )

    def finish_run(self, run_id: int, status: str, *, error: str | None = None, result: str | None = None, delivered: str | None = None) -> None:
        """Close an open run with ``status`` (``ran``, ``failed``, ``missed``, ``skipped``)."""
        self.store.execute(
            "UPDATE cron_runs SET status = ?, error = ?, result = ?, delivered = COALESCE(?, delivered), finished_at = ? WHERE id = ? AND status IN ('claimed', 'running')",
            (status, error, result, delivered, utc_iso(), run_id),
        )

    def set_delivered(self, run_id: int, delivered: str) -> None:
        """Record where a finished run's result went."""
        self.store.execute("UPDATE cron_runs SET delivered = ? WHERE id = ?", (delivered, run_id))

    # -- the ticker --------------------------------------------------------------------------

    def ticker(self) -> dict[str, Any] | None:
        """``{heartbeat, started_at, restarts}`` or ``None`` before the first tick ever."""
        return self.store.query_one("SELECT heartbeat, started_at, restarts FROM cron_ticker WHERE id = 1")

    def ticker_started(self, now: str, *, restarted: bool) -> None:
        """A ticker (re)started at ``now``."""
        self.store.execute(
            "INSERT INTO cron_ticker (id, heartbeat, started_at, restarts) VALUES (1, ?, ?, 0) "
            "ON CONFLICT (id) DO UPDATE SET heartbeat = excluded.heartbeat, started_at = excluded.started_at, restarts = restarts + ?",
            (now, now, int(restarted)),
        )

    def beat(self, now: str) -> None:
        """The ticker's heartbeat."""
        self.store.execute("UPDATE cron_ticker SET heartbeat = ? WHERE id = 1", (now,))

    def add_gap(self, start: str, end: str, reason: str) -> None:
        """Record a time the ticker was not running (``daemon_down``, ``ticker_restarted``)."""
        self.store.execute("INSERT INTO cron_gaps (gap_start, gap_end, reason) VALUES (?, ?, ?)", (start, end, reason))

    def gaps(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest gaps first."""
        return self.store.query("SELECT gap_start, gap_end, reason FROM cron_gaps ORDER BY id DESC LIMIT ?", (limit,))

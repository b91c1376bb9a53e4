"""The kernel store: one SQLite file through apsw, WAL, plus the audit writer.

* One connection serves the trio thread (queries, transactions, event inserts). It is not meant
  to be shared with worker threads: a transaction is open on the connection, not per task, so
  never ``await`` inside :meth:`Store.transaction`.
* Audit records of acknowledged actions are written with the action: :meth:`Store.audit`
  called inside an open :meth:`Store.transaction` (on its thread) inserts the row in that
  transaction, so the action and its record commit (or roll back) together;
  :meth:`Store.audit_now` writes one at once outside a transaction (for an action that had to
  await, recorded before it is acknowledged).
* Everything else (high-volume, explicitly lossy records: hook calls and failures, capability
  denials, plugin task errors, calls from worker threads) goes through the asynchronous path:
  :meth:`Store.audit` outside a transaction only appends to an in-memory queue, and
  :meth:`Store.run_audit_writer` (one task, on a second connection) writes everything queued in
  one transaction per wake-up, in a worker thread. Those records are lost if the process dies
  before the next write (normally within milliseconds).
* :meth:`Store.after_commit` runs a callback once the outermost transaction commits (never
  after a rollback): the event bus uses it as an outbox, fanning an event out only after the
  change it belongs to is committed.
* The kernel schema is ``schema.sql`` beside this module, versioned by ``PRAGMA user_version``;
  plugins apply their own schema files with :meth:`Store.apply_plugin_schema`, versioned in the
  ``plugin_schemas`` table. Both use the format parsed by :func:`parse_schema`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import apsw
import trio

from elowen_sdk import ElowenError

__all__ = ["AuditRecord", "Schema", "SchemaError", "Store", "parse_schema", "utc_iso"]

log = logging.getLogger(__name__)

KERNEL_SCHEMA = Path(__file__).with_name("schema.sql")

Params = Sequence[Any] | Mapping[str, Any]

_VERSION_LINE = re.compile(r"^--\s*(?:schema-)?version:\s*(\d+)\s*$", re.MULTILINE)
_UPGRADE_LINE = re.compile(r"^--\s*upgrade to\s+(\d+)\s*$", re.MULTILINE)
_INSERT = re.compile(r"^\s*(?:INSERT|REPLACE)\b", re.IGNORECASE)
_AUDIT_INSERT = "INSERT INTO audit (ts, actor, action, target, outcome, detail) VALUES (?, ?, ?, ?, ?, ?)"


class SchemaError(ElowenError):
    """A schema file is malformed, or a database is at a version this code cannot handle."""


def utc_iso(t: float | None = None) -> str:
    """``t`` (seconds since the epoch; now if ``None``) as UTC ISO 8601 with milliseconds,
    e.g. ``"2026-11-30T12:00:00.123Z"``."""
    if t is None:
        t = time.time()
    secs = int(t)
    ms = int((t - secs) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"


@dataclass(frozen=True, slots=True)
class Schema:
    """A parsed schema file.

    Attributes:
        version: the current version (≥ 1).
        base: the complete current schema, run on a fresh database.
        upgrades: ``{n: sql}`` turning a version ``n - 1`` database into version ``n``;
            either empty or exactly ``2..version``.
    """

    version: int
    base: str
    upgrades: Mapping[int, str] = field(default_factory=dict)


def parse_schema(text: str, *, version: int | None = None, name: str = "schema") -> Schema:
    """Parse a schema file.

    Format: an optional ``-- version: N`` line (``-- schema-version: N`` also accepted); the complete current schema; then optional
    ``-- upgrade to N`` sections, each turning a version ``N-1`` database into version ``N``.
    ``version`` is the version the caller expects (a plugin passes it); when both are given
    they must agree.

    Raises:
        SchemaError: no version at all, disagreeing versions, or upgrade sections that are not
            exactly ``2..version``.
    """
    head, *rest = _UPGRADE_LINE.split(text)
    found = _VERSION_LINE.search(head)
    declared = int(found.group(1)) if found else None
    if declared is not None and version is not None and declared != version:
        raise SchemaError(f"{name}: file says version {declared}, caller says {version}")
    final = declared if declared is not None else version
    if final is None or final < 1:
        raise SchemaError(f"{name}: needs a version ≥ 1 (a '-- version: N' line)")
    upgrades = {int(rest[i]): rest[i + 1] for i in range(0, len(rest), 2)}
    if upgrades and sorted(upgrades) != list(range(2, final + 1)):
        raise SchemaError(f"{name}: upgrade sections {sorted(upgrades)} must be exactly 2..{final}")
    return Schema(version=final, base=head, upgrades=upgrades)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One queued audit record (``ts`` in seconds since the epoch, formatted when written)."""

    ts: float
    actor: str
    action: str
    target: str
    outcome: str
    detail: Mapping[str, Any] | None


def _audit_row(r: AuditRecord) -> tuple[str, str, str, str, str, str]:
    detail = json.dumps(dict(r.detail) if r.detail else {}, default=str, separators=(",", ":"), ensure_ascii=False)
    return (utc_iso(r.ts), r.actor, r.action, r.target, r.outcome, detail)


def synchronous_mode() -> str:
    """SQLite's ``synchronous`` setting for the store: ``NORMAL`` (the default: in WAL mode a
    power loss may lose the last commits, never consistency) or ``FULL`` (an fsync per
    commit: no acknowledged commit lost on a power loss), from ``ELOWEN_SQLITE_SYNCHRONOUS``.

    Raises:
        ValueError: another value.
    """
    mode = os.environ.get("ELOWEN_SQLITE_SYNCHRONOUS", "NORMAL").strip().upper()
    if mode not in ("NORMAL", "FULL"):
        raise ValueError(f"ELOWEN_SQLITE_SYNCHRONOUS must be NORMAL or FULL, not {mode!r}")
    return mode


@lru_cache(maxsize=512)
def _is_insert(sql: str) -> bool:
    return _INSERT.match(sql) is not None


class Store:
    """The kernel's SQLite store.

    Args:
        path: the database file (created, mode 0600, if missing). Use
            :func:`elowen.core.paths.db_path` for the default.
        busy_timeout_ms: how long a statement waits for another connection's write lock.

    Raises:
        SchemaError: the database was written by a newer Elowen (its ``user_version`` is higher
            than ``schema.sql``'s version).
        apsw.Error: the file cannot be opened as an SQLite database.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5_000) -> None:
        self.path = Path(path)
        self._busy_timeout_ms = busy_timeout_ms
        if not self.path.exists():
            # SQLite gives the -wal and -shm files the database file's mode.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        self._conn = self._connect()
        self._depth = 0
        self._tx_thread: int | None = None
        self._on_commit: list[list[Callable[[], None]]] = []
        self._audit_queue: deque[AuditRecord] = deque()
        self._audit_lock = threading.Lock()
        self._audit_conn: apsw.Connection | None = None
        self._wake: trio.Event | None = None
        self._wake_pending = False
        self._token: trio.lowlevel.TrioToken | None = None
        self._trio_thread: int | None = None
        #: Transactions written by the audit writer so far (a metric; tests read it).
        self.audit_batches = 0
        self.schema_version = self._migrate_kernel()

    # -- connections -------------------------------------------------------------------------

    def _connect(self) -> apsw.Connection:
        conn = apsw.Connection(str(self.path))
        conn.set_busy_timeout(self._busy_timeout_ms)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchall()[0][0]
        if mode != "wal":
            raise SchemaError(f"{self.path}: could not switch to WAL (journal_mode is {mode!r})")
        conn.execute(f"PRAGMA synchronous = {synchronous_mode()}")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def close(self) -> None:
        """Write queued audit records, then close both connections. Idempotent."""
        try:
            self.flush_audit()
        finally:
            if self._audit_conn is not None:
                self._audit_conn.close()
                self._audit_conn = None
            self._conn.close()

    @property
    def connection(self) -> apsw.Connection:
        """The underlying apsw connection (trio thread only), for what this API lacks."""
        return self._conn

    # -- statements --------------------------------------------------------------------------

    def query(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        """Run one statement; every row as ``{column: value}``."""
        cursor = self._conn.execute(sql, params)
        rows: list[dict[str, Any]] = []
        names: list[str] | None = None
        for row in cursor:
            if names is None:
                names = [d[0] for d in cursor.description]
            rows.append(dict(zip(names, row)))
        return rows

    def query_one(self, sql: str, params: Params = ()) -> dict[str, Any] | None:
        """The first row of :meth:`query`, or ``None`` when there is none."""
        cursor = self._conn.execute(sql, params)
        for row in cursor:
            names = [d[0] for d in cursor.description]
            result = dict(zip(names, row))
            cursor.fetchall()  # finish the statement so it does not hold a read snapshot
            return result
        return None

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run a statement (or a script of several).

        Returns:
            for an ``INSERT``/``REPLACE``: the new row's rowid, or 0 when no row was inserted
            (``INSERT OR IGNORE``); otherwise the number of rows changed.
        """
        self._conn.execute(sql, params).fetchall()
        if _is_insert(sql):
            return self._conn.last_insert_rowid() if self._conn.changes() else 0
        return self._conn.changes()

    def executemany(self, sql: str, seq: Iterable[Params]) -> None:
        """Run one statement for each parameter set in ``seq`` (wrap it in a transaction for
        speed and atomicity)."""
        self._conn.executemany(sql, seq).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """A transaction; nested use opens a savepoint.

        The outermost level is ``BEGIN IMMEDIATE`` (takes the write lock up front, so a later
        write cannot fail on a stale snapshot). Commits on normal exit; rolls back (to the
        savepoint, when nested) on any exception, which propagates. Synchronous: do not
        ``await`` inside, other tasks share this connection.
        """
        if self._depth == 0:
            self._conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            self._tx_thread = threading.get_ident()
            self._on_commit = [[]]
            try:
                yield self
            except BaseException:
                self._depth = 0
                self._tx_thread = None
                self._on_commit = []
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._depth = 0
            self._tx_thread = None
            callbacks, self._on_commit = self._on_commit[0], []
            try:
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            for fn in callbacks:
                try:
                    fn()
                except Exception:
                    log.exception("after-commit callback %r failed", fn)
            return
        name = f"elowen_sp{self._depth}"
        self._conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        self._on_commit.append([])
        try:
            yield self
        except BaseException:
            self._on_commit.pop()  # rolled back: its callbacks never run
            if self._conn.in_transaction:  # SQLite may have rolled back everything (SQLITE_FULL)
                with contextlib.suppress(apsw.SQLError):
                    self._conn.execute(f"ROLLBACK TO {name}")
                    self._conn.execute(f"RELEASE {name}")
            raise
        else:
            self._conn.execute(f"RELEASE {name}")
            done = self._on_commit.pop()
            self._on_commit[-1].extend(done)
        finally:
            self._depth -= 1

    @property
    def in_transaction(self) -> bool:
        """Whether a :meth:`transaction` is open on the calling thread."""
        return self._depth > 0 and self._tx_thread == threading.get_ident()

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` once the open transaction commits (at once when none is open); never
        after a rollback (of the transaction, or of the savepoint it was registered in).
        Exceptions from ``fn`` are logged, not raised."""
        if not self.in_transaction:
            fn()
            return
        self._on_commit[-1].append(fn)

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check``: ``"ok"``, or the problems found, one per line."""
        return "\n".join(str(r[0]) for r in self._conn.execute("PRAGMA integrity_check"))

    # -- schemas -----------------------------------------------------------------------------

    def _run_script(self, sql: str) -> None:
        self._conn.execute(sql).fetchall()

    def _migrate_kernel(self) -> int:
        schema = parse_schema(KERNEL_SCHEMA.read_text(encoding="utf-8"), name=str(KERNEL_SCHEMA))
        with self.transaction():
            current = int(self._conn.execute("PRAGMA user_version").fetchall()[0][0] or 0)
            if current == schema.version:
                return current
            if current > schema.version:
                raise SchemaError(f"{self.path}: database schema version {current} is newer than this Elowen's ({schema.version}); upgrade Elowen")
            self._upgrade(schema, current, "kernel")
            self._conn.execute(f"PRAGMA user_version = {int(schema.version)}")
        log.info("kernel schema of %s at version %d (was %d)", self.path, schema.version, current)
        return schema.version

    def _upgrade(self, schema: Schema, current: int, name: str) -> None:
        if current == 0:
            self._run_script(schema.base)
        elif schema.upgrades:
            for n in range(current + 1, schema.version + 1):
                self._run_script(schema.upgrades[n])
        else:
            # A schema without upgrade sections must be written to be re-runnable
            # (CREATE ... IF NOT EXISTS).
            self._run_script(schema.base)
        log.debug("schema %s: %d -> %d", name, current, schema.version)

    def plugin_schema_version(self, plugin: str) -> int:
        """The schema version ``plugin`` last applied, 0 if none."""
        row = self.query_one("SELECT version FROM plugin_schemas WHERE plugin = ?", (plugin,))
        return int(row["version"]) if row else 0

    def apply_plugin_schema(self, plugin: str, sql: str, version: int) -> bool:
        """Apply a plugin's schema file, versioned per plugin, atomically.

        ``sql`` uses the :func:`parse_schema` format. Same version as recorded: no-op. No record:
        the complete schema runs. Higher version: the ``-- upgrade to N`` sections above the
        recorded version run; a file without such sections runs whole again (write it with
        ``IF NOT EXISTS``). The new version is recorded in ``plugin_schemas``.

        Returns:
            whether anything ran.

        Raises:
            SchemaError: a malformed file, or the recorded version is higher than ``version``
                (a plugin downgrade; its tables may not match its code).
            apsw.Error: the SQL failed; nothing of it was applied.
        """
        schema = parse_schema(sql, version=version, name=f"plugin {plugin!r} schema")
        with self.transaction():
            current = self.plugin_schema_version(plugin)
            if current == schema.version:
                return False
            if current > schema.version:
                raise SchemaError(f"plugin {plugin!r}: database has its schema version {current}, newer than the installed plugin's {schema.version}")
            self._upgrade(schema, current, f"plugin {plugin!r}")
            self.execute(
                "INSERT INTO plugin_schemas (plugin, version, applied_at) VALUES (?, ?, ?) "
                "ON CONFLICT (plugin) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at",
                (plugin, schema.version, utc_iso()),
            )
        log.info("plugin %s schema at version %d (was %d)", plugin, schema.version, current)
        return True

    # -- audit -------------------------------------------------------------------------------

    def audit(
        self,
        actor: str,
        action: str,
        target: str = "",
        outcome: str = "ok",
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Record an action.

        Inside an open :meth:`transaction` on the calling thread the row is inserted in that
        transaction (it commits or rolls back with the action). Otherwise the record is queued
        (never touches the disk, never blocks; asynchronous and lossy on a crash) and written by
        :meth:`run_audit_writer` or :meth:`flush_audit`. Safe from any thread. ``detail`` must be
        JSON-serialisable (anything else is written with ``str()``).
        """
        if self.in_transaction:
            self._conn.execute(_AUDIT_INSERT, _audit_row(AuditRecord(time.time(), actor, action, target, outcome, detail))).fetchall()
            return
        self._audit_queue.append(AuditRecord(time.time(), actor, action, target, outcome, dict(detail) if detail else None))
        if not self._wake_pending and self._wake is not None:
            self._wake_pending = True
            if threading.get_ident() == self._trio_thread:
                self._wake.set()
            else:
                self._wake_from_thread()

    def audit_now(
        self,
        actor: str,
        action: str,
        target: str = "",
        outcome: str = "ok",
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Write an audit record at once, durably (in the open transaction if there is one);
        for an acknowledged action that could not share a transaction with its record.
        Trio thread (the store's connection) only.

        Raises:
            apsw.Error: the write failed (e.g. ``apsw.FullError``: the disk is full).
        """
        row = _audit_row(AuditRecord(time.time(), actor, action, target, outcome, detail))
        self._conn.execute(_AUDIT_INSERT, row).fetchall()

    def _wake_from_thread(self) -> None:
        token = self._token
        if token is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(self._set_wake)

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    @property
    def audit_pending(self) -> int:
        """Records queued and not yet written."""
        return len(self._audit_queue)

    def _audit_connection(self) -> apsw.Connection:
        if self._audit_conn is None:
            self._audit_conn = self._connect()
        return self._audit_conn

    def flush_audit(self) -> int:
        """Write every queued audit record now, in one transaction, on the calling thread.

        Returns:
            the number of records written.

        Raises:
            apsw.Error: the write failed; the records are queued again, in order.
        """
        with self._audit_lock:
            queue = self._audit_queue
            batch: list[AuditRecord] = []
            while queue:  # audit() only appends; only this method pops, under the lock
                batch.append(queue.popleft())
            if not batch:
                return 0
            rows = [_audit_row(r) for r in batch]
            conn = self._audit_connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(_AUDIT_INSERT, rows).fetchall()
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except BaseException:
                queue.extendleft(reversed(batch))
                raise
            self.audit_batches += 1
            return len(batch)

    async def run_audit_writer(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The single audit writer task: on each wake-up, write everything queued in one
        transaction (in a worker thread). On cancellation it writes what is left, then exits.

        A failed write is logged and retried after a second; records are never dropped.

        Raises:
            RuntimeError: a writer is already running for this store.
        """
        if self._wake is not None:
            raise RuntimeError("an audit writer is already running for this store")
        self._token = trio.lowlevel.current_trio_token()
        self._trio_thread = threading.get_ident()
        self._wake = trio.Event()
        self._wake_pending = False
        task_status.started()
        try:
            while True:
                if not self._audit_queue:
                    await self._wake.wait()
                self._wake = trio.Event()
                self._wake_pending = False
                try:
                    await trio.to_thread.run_sync(self.flush_audit)
                except apsw.Error:
                    log.exception("audit write failed; %d records kept, retrying", len(self._audit_queue))
                    await trio.sleep(1.0)
        finally:
            self._wake = None
            self._token = None
            self._trio_thread = None
            self._wake_pending = False
            try:
                self.flush_audit()
            except apsw.Error:
                log.exception("final audit flush failed; %d records lost", len(self._audit_queue))

"""The store against a real SQLite file: pragmas, schema versioning, transactions, audit writer."""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

import apsw
import pytest
import trio

from elowen.core import paths
from elowen.core.store import KERNEL_SCHEMA, SchemaError, Store, parse_schema, utc_iso


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "elowen.db")
    yield s
    s.close()


# -- paths ---------------------------------------------------------------------------------


def test_paths_follow_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELOWEN_HOME", str(tmp_path / "h"))
    monkeypatch.delenv("ELOWEN_DB", raising=False)
    home = paths.home()
    assert home == tmp_path / "h" and stat.S_IMODE(home.stat().st_mode) == 0o700
    assert paths.db_path() == home / "elowen.db"
    monkeypatch.setenv("ELOWEN_DB", str(tmp_path / "other.db"))
    assert paths.db_path() == tmp_path / "other.db"
    data = paths.plugin_data_dir("hello")
    assert data == home / "plugins" / "hello" and data.is_dir()
    for bad in ("..", "../x", "a/b", "", "Hello"):
        with pytest.raises(ValueError):
            paths.plugin_data_dir(bad)


# -- connection and schema ---------------------------------------------------------------


def test_pragmas_and_kernel_schema(store: Store, tmp_path: Path) -> None:
    assert store.query_one("PRAGMA journal_mode") == {"journal_mode": "wal"}
    assert store.query_one("PRAGMA synchronous") == {"synchronous": 1}  # NORMAL
    assert store.query_one("PRAGMA foreign_keys") == {"foreign_keys": 1}
    version = parse_schema(KERNEL_SCHEMA.read_text()).version
    assert store.query_one("PRAGMA user_version") == {"user_version": version}
    assert store.schema_version == version
    tables = {r["name"] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"events", "audit", "plugin_schemas"} <= tables
    assert stat.S_IMODE((tmp_path / "elowen.db").stat().st_mode) == 0o600
    assert store.integrity_check() == "ok"


def test_reopen_is_idempotent_and_newer_database_refused(tmp_path: Path) -> None:
    db = tmp_path / "elowen.db"
    s = Store(db)
    s.execute("INSERT INTO events (type, data, ts) VALUES ('x', '{}', 't')")
    s.close()
    s = Store(db)  # same version: nothing re-runs (the base schema has no IF NOT EXISTS)
    assert s.query_one("SELECT count(*) AS n FROM events") == {"n": 1}
    s.execute("PRAGMA user_version = 999")
    s.close()
    with pytest.raises(SchemaError, match="newer"):
        Store(db)


def test_parse_schema_format() -> None:
    text = "-- version: 3\nCREATE TABLE a (x);\n-- upgrade to 2\nALTER 2;\n-- upgrade to 3\nALTER 3;\n"
    schema = parse_schema(text)
    assert schema.version == 3 and "CREATE TABLE a" in schema.base
    assert set(schema.upgrades) == {2, 3} and "ALTER 3" in schema.upgrades[3]
    assert parse_schema("-- schema-version: 2\nX;").version == 2
    with pytest.raises(SchemaError, match="exactly 2..3"):
        parse_schema("-- version: 3\nX;\n-- upgrade to 3\nY;")
    with pytest.raises(SchemaError, match="caller says"):
        parse_schema("-- version: 2\nX;", version=3)
    with pytest.raises(SchemaError, match="needs a version"):
        parse_schema("CREATE TABLE x (y);")


def test_plugin_schema_versioning(store: Store) -> None:
    v1 = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT);"
    assert store.apply_plugin_schema("notes", v1, 1) is True
    store.execute("INSERT INTO notes (body) VALUES ('a')")
    assert store.apply_plugin_schema("notes", v1, 1) is False  # same version: no-op
    assert store.plugin_schema_version("notes") == 1

    v2 = "-- version: 2\nCREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, tag TEXT);\n-- upgrade to 2\nALTER TABLE notes ADD COLUMN tag TEXT;\n"
    assert store.apply_plugin_schema("notes", v2, 2) is True
    assert store.query("SELECT body, tag FROM notes") == [{"body": "a", "tag": None}]
    row = store.query_one("SELECT version FROM plugin_schemas WHERE plugin = 'notes'")
    assert row == {"version": 2}
    with pytest.raises(SchemaError, match="newer"):
        store.apply_plugin_schema("notes", v1, 1)

    # A fresh database runs the complete v2 schema, not the upgrade steps.
    assert store.apply_plugin_schema("other", v2.replace("notes", "other"), 2) is True
    assert [c["name"] for c in store.query("PRAGMA table_info(other)")] == ["id", "body", "tag"]


def test_failed_plugin_schema_applies_nothing(store: Store) -> None:
    bad = "CREATE TABLE half (x);\nTHIS IS NOT SQL;"
    with pytest.raises(apsw.SQLError):
        store.apply_plugin_schema("broken", bad, 1)
    assert store.query_one("SELECT name FROM sqlite_master WHERE name = 'half'") is None
    assert store.plugin_schema_version("broken") == 0


# -- statements and transactions -----------------------------------------------------------


def test_execute_query_shapes(store: Store) -> None:
    store.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
    assert store.execute("INSERT INTO t (name) VALUES (?)", ("a",)) == 1
    assert store.execute("INSERT INTO t (name) VALUES (:n)", {"n": "b"}) == 2
    assert store.execute("INSERT OR IGNORE INTO t (name) VALUES ('a')") == 0
    store.executemany("INSERT INTO t (name) VALUES (?)", [("c",), ("d",)])
    assert store.execute("UPDATE t SET name = name || '!' WHERE id > 2") == 2
    assert store.query("SELECT id, name FROM t WHERE id <= 2 ORDER BY id") == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
    ]
    assert store.query_one("SELECT name FROM t WHERE id = 99") is None
    assert store.query("SELECT * FROM t WHERE 0") == []


def test_transactions_nest_and_roll_back(store: Store) -> None:
    store.execute("CREATE TABLE t (x INTEGER)")
    with store.transaction():
        store.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(RuntimeError):
            with store.transaction():
                store.execute("INSERT INTO t VALUES (2)")
                raise RuntimeError("inner fails")
        with store.transaction():
            store.execute("INSERT INTO t VALUES (3)")
    assert [r["x"] for r in store.query("SELECT x FROM t ORDER BY x")] == [1, 3]

    with pytest.raises(ValueError):
        with store.transaction():
            store.execute("INSERT INTO t VALUES (4)")
            raise ValueError("outer fails")
    assert [r["x"] for r in store.query("SELECT x FROM t ORDER BY x")] == [1, 3]
    assert not store.connection.in_transaction


def test_foreign_keys_enforced(store: Store) -> None:
    store.execute("CREATE TABLE p (id INTEGER PRIMARY KEY)")
    store.execute("CREATE TABLE c (p INTEGER REFERENCES p(id))")
    with pytest.raises(apsw.ConstraintError):
        store.execute("INSERT INTO c VALUES (42)")


# -- audit ---------------------------------------------------------------------------------


def test_audit_never_writes_on_the_caller_path(store: Store) -> None:
    store.audit("kernel", "plugin.enable", "hello", detail={"n": 1})
    assert store.audit_pending == 1
    assert store.query_one("SELECT count(*) AS n FROM audit") == {"n": 0}
    assert store.flush_audit() == 1
    row = store.query_one("SELECT * FROM audit")
    assert row is not None
    assert (row["actor"], row["action"], row["target"], row["outcome"]) == ("kernel", "plugin.enable", "hello", "ok")
    assert json.loads(row["detail"]) == {"n": 1}
    assert row["ts"].endswith("Z") and len(row["ts"]) == len("2026-11-30T12:00:00.123Z")


async def test_audit_writer_batches(store: Store) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run_audit_writer)
        for i in range(5_000):  # no checkpoint: all queued before the writer wakes
            store.audit("plugin:x", "hook.call", f"t{i}", detail={"i": i})
        with trio.fail_after(10):
            while store.audit_pending or store.query_one("SELECT count(*) AS n FROM audit")["n"] < 5_000:
                await trio.sleep(0.005)
        # one transaction for the burst (a second one only if a write was retried under load)
        first = store.audit_batches
        assert 1 <= first <= 2
        # A second burst is another single transaction.
        for i in range(100):
            store.audit("kernel", "again", str(i))
        with trio.fail_after(10):
            while store.audit_batches < first + 1:
                await trio.sleep(0.005)
        nursery.cancel_scope.cancel()
    assert store.query_one("SELECT count(*) AS n FROM audit") == {"n": 5_100}
    ids = [r["target"] for r in store.query("SELECT target FROM audit WHERE action = 'hook.call' ORDER BY id")]
    assert ids == [f"t{i}" for i in range(5_000)]  # order kept


async def test_audit_writer_flushes_on_cancel_and_takes_thread_callers(store: Store) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run_audit_writer)

        def from_thread() -> None:
            for i in range(200):
                store.audit("thread", "x", str(i))

        await trio.to_thread.run_sync(from_thread)
        with trio.fail_after(10):
            while store.query_one("SELECT count(*) AS n FROM audit")["n"] < 200:
                await trio.sleep(0.005)
        store.audit("kernel", "last")  # queued, then the writer is cancelled at once
        nursery.cancel_scope.cancel()
    assert store.query_one("SELECT count(*) AS n FROM audit WHERE action = 'last'") == {"n": 1}


async def test_only_one_audit_writer(store: Store) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run_audit_writer)
        with pytest.raises(RuntimeError, match="already running"):
            await store.run_audit_writer()
        nursery.cancel_scope.cancel()


def test_audit_caller_only_queues(store: Store) -> None:
    """Outside a transaction the caller pays a queue append, nothing more: no row is written
    until the writer flushes (the per-call cost is measured in bench/bus.py, not here)."""
    n = 20_000
    for i in range(n):
        store.audit("plugin:x", "hook.call", "on_event", "ok", {"i": i})
    assert store.audit_pending == n
    assert store.query_one("SELECT count(*) AS n FROM audit") == {"n": 0}
    store.flush_audit()
    assert store.query_one("SELECT count(*) AS n FROM audit") == {"n": n}


def test_audit_write_does_not_lock_out_the_main_connection(store: Store) -> None:
    """The audit writer has its own connection; a main-connection transaction still commits."""
    for i in range(1000):
        store.audit("k", "a", str(i))
    done = threading.Event()

    def writer() -> None:
        store.flush_audit()
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    with store.transaction():
        store.execute("INSERT INTO events (type, data, ts) VALUES ('x', '{}', ?)", (utc_iso(),))
    t.join(10)
    assert done.is_set()
    assert store.query_one("SELECT count(*) AS n FROM audit") == {"n": 1000}


def test_utc_iso_shape() -> None:
    assert utc_iso(0) == "1970-01-01T00:00:00.000Z"
    assert utc_iso(1_796_040_000.123456) == "2026-11-30T12:00:00.123Z"


def test_close_flushes(tmp_path: Path) -> None:
    s = Store(tmp_path / "db.sqlite")
    s.audit("kernel", "shutdown")
    s.close()
    again = Store(tmp_path / "db.sqlite")
    try:
        assert again.query_one("SELECT action FROM audit") == {"action": "shutdown"}
    finally:
        again.close()

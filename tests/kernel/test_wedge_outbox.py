"""A change, its event and its audit row share one transaction: events fan out only after the
commit, a rolled-back transaction leaves no event (no phantom, no id seen twice) and no audit
row (real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from elowen.core.events import EventBus
from elowen.core.store import Store


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "db.sqlite")
    yield s
    s.close()


async def test_event_in_a_transaction_fans_out_after_commit_only(store: Store) -> None:
    bus = EventBus(store)
    seen: list[tuple[int, str]] = []
    bus.add_listener(lambda e: seen.append((e.id, e.type)))
    async with bus.subscribe(last_event_id=None) as sub:
        with store.transaction():
            store.execute("INSERT INTO projects (name, path, created_at) VALUES ('p', '/tmp/p', 'now')")
            bus.publish("project.created", {"name": "p"})
            assert seen == []  # not before the commit
            assert sub.ready_nowait() == []
        assert [t for _, t in seen] == ["project.created"]
        with pytest.raises(RuntimeError), store.transaction():
            phantom = bus.publish("task.created", {"id": 99})
            raise RuntimeError("the change fails")
        assert [t for _, t in seen] == ["project.created"]  # no phantom
        assert store.query_one("SELECT count(*) AS n FROM events WHERE type = 'task.created'") == {"n": 0}
        after = bus.publish("task.created", {"id": 100})
        got = [await sub.__anext__(), await sub.__anext__()]
    assert [e.type for e in got] == ["project.created", "task.created"]
    assert got[1].data == {"id": 100}
    # the id of the rolled-back event was never delivered, so nobody saw an id twice
    assert [i for i, _ in seen] == sorted({i for i, _ in seen})
    assert after.id >= phantom.id


def test_savepoint_rollback_discards_its_events_only(store: Store) -> None:
    bus = EventBus(store)
    seen: list[str] = []
    bus.add_listener(lambda e: seen.append(e.type))
    with store.transaction():
        bus.publish("outer", {})
        with pytest.raises(ValueError), store.transaction():
            bus.publish("inner", {})
            raise ValueError
        bus.publish("outer.2", {})
    assert seen == ["outer", "outer.2"]
    assert [r["type"] for r in store.query("SELECT type FROM events ORDER BY id")] == ["outer", "outer.2"]


def test_audit_in_a_transaction_is_written_with_it(store: Store) -> None:
    with store.transaction():
        store.audit("user:1", "project.create", "project:1")
        assert store.audit_pending == 0  # not queued: in the transaction
    assert store.query_one("SELECT action FROM audit") == {"action": "project.create"}
    with pytest.raises(RuntimeError), store.transaction():
        store.audit("user:1", "project.delete", "project:1")
        raise RuntimeError
    assert store.query_one("SELECT count(*) AS n FROM audit WHERE action = 'project.delete'") == {"n": 0}
    store.audit_now("user:1", "plugin.request.enable", "x")
    assert store.audit_pending == 0
    assert store.query_one("SELECT count(*) AS n FROM audit WHERE action = 'plugin.request.enable'") == {"n": 1}


async def test_audit_from_a_thread_during_a_transaction_is_queued(store: Store) -> None:
    with store.transaction():
        await trio.to_thread.run_sync(lambda: store.audit("thread", "x"))
    assert store.audit_pending == 1
    assert store.flush_audit() == 1

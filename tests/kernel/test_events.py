"""The event bus against a real SQLite file: durability, fan-out, replay without gap or
duplicate, dropping slow subscribers, filters, listeners, pruning."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import trio
import trio.testing

from elowen.core.events import EventBus, SubscriberDropped, TypeFilter
from elowen.core.store import Store
from elowen_sdk import Event


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "elowen.db")
    yield s
    s.close()


@pytest.fixture
def bus(store: Store) -> EventBus:
    return EventBus(store, retention=50, buffer=100)


def test_publish_is_durable_and_shaped(bus: EventBus, store: Store, tmp_path: Path) -> None:
    e1 = bus.publish("task.created", {"id": 7, "title": "é"}, project_id=3)
    e2 = bus.publish("signal", {})
    assert isinstance(e1, Event) and e2.id == e1.id + 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e1.ts)
    assert (e1.type, dict(e1.data), e1.project_id) == ("task.created", {"id": 7, "title": "é"}, 3)
    assert bus.last_id() == e2.id
    # Another connection (another process, in effect) sees it.
    other = Store(tmp_path / "elowen.db")
    try:
        assert EventBus(other).replay(0) == [e1, e2]
    finally:
        other.close()


def test_publish_rejects_bad_data_without_writing(bus: EventBus) -> None:
    with pytest.raises(TypeError):
        bus.publish("x", {"f": object()})
    with pytest.raises(TypeError):
        bus.publish("x", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        bus.publish("", {})
    assert bus.last_id() == 0


def test_type_filter() -> None:
    f = TypeFilter(["task.*", "signal"])
    assert f("task.created") and f("task.x.y") and f("signal")
    assert not f("tasks.created") and not f("signals") and not f("task")
    assert TypeFilter(["*"])("anything")
    with pytest.raises(TypeError):
        TypeFilter("task.*")


async def test_live_fan_out_with_server_side_filters(bus: EventBus) -> None:
    got: dict[str, list[int]] = {"all": [], "tasks": [], "p1": []}

    async def consume(name: str, task_status=trio.TASK_STATUS_IGNORED, **kw) -> None:
        async with bus.subscribe(**kw) as events:
            task_status.started()
            async for ev in events:
                got[name].append(ev.id)

    async with trio.open_nursery() as nursery:
        await nursery.start(consume, "all")
        await nursery.start(lambda task_status: consume("tasks", task_status, types=["task.*"]))
        await nursery.start(lambda task_status: consume("p1", task_status, project_filter=lambda p: p in (1, None)))
        a = bus.publish("task.created", {}, project_id=1).id
        b = bus.publish("task.closed", {}, project_id=2).id
        c = bus.publish("signal", {}).id
        d = bus.publish("mission.paused", {}, project_id=2).id
        await trio.testing.wait_all_tasks_blocked()
        bus.close()
    assert got == {"all": [a, b, c, d], "tasks": [a, b], "p1": [a, c]}


async def test_replay_then_live_without_gap_or_duplicate(bus: EventBus) -> None:
    """Resume from an old id while a publisher keeps going (before, during and after the
    subscription starts); every id arrives exactly once, in order."""
    for i in range(1_200):  # more than one replay page
        bus.publish("tick", {"i": i})
    received: list[int] = []
    total = 3_000

    async def publisher() -> None:
        for i in range(1_200, total):
            bus.publish("tick", {"i": i})
            if i % 7 == 0:
                await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(publisher)
        with trio.fail_after(5):
            while bus.last_id() < 1_500:
                await trio.sleep(0)
        async with bus.subscribe(last_event_id=100, buffer=total) as events:
            async for ev in events:
                received.append(ev.id)
                if ev.id == total:
                    break
            end = bus.publish("end", {}).id  # anything still queued would show up before it
            with trio.fail_after(5):
                async for ev in events:
                    received.append(ev.id)
                    if ev.id == end:
                        break
            with trio.move_on_after(0.05):  # and nothing after it: no late duplicates
                async for ev in events:
                    received.append(ev.id)
    assert received == list(range(101, total + 2))


async def test_filtered_replay_and_resume_point(bus: EventBus) -> None:
    ids = [bus.publish("task.x" if i % 3 == 0 else "other", {}).id for i in range(30)]
    async with bus.subscribe(last_event_id=0, types=["task.*"]) as events:
        seen = []
        with trio.move_on_after(0.2):
            async for ev in events:
                seen.append(ev.id)
        assert seen == ids[::3]
        assert events.last_id == ids[-1]  # filtered events still advance the cursor


async def test_slow_subscriber_dropped_fast_one_gets_everything(bus: EventBus) -> None:
    fast: list[int] = []
    slow: list[int] = []
    dropped: list[SubscriberDropped] = []
    n = 500

    async def fast_consumer(task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with bus.subscribe(buffer=n) as events:
            task_status.started()
            async for ev in events:
                fast.append(ev.id)
                if len(fast) == n:
                    return

    async def slow_consumer(task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with bus.subscribe(buffer=8) as events:
            task_status.started()
            try:
                async for ev in events:
                    slow.append(ev.id)
                    await trio.sleep(0.01)
            except SubscriberDropped as exc:
                dropped.append(exc)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(fast_consumer)
            await nursery.start(slow_consumer)
            for i in range(n):
                bus.publish("burst", {"i": i})  # never waits
                if i % 50 == 0:
                    await trio.sleep(0)
    assert fast == list(range(1, n + 1))
    assert dropped and dropped[0].last_id == slow[-1]
    assert slow == list(range(1, len(slow) + 1))  # what it had was delivered, in order
    assert len(slow) < n
    assert bus.subscriber_count == 0


async def test_dropped_subscriber_resumes_from_last_id(bus: EventBus) -> None:
    async with bus.subscribe(buffer=2) as events:
        for i in range(5):
            bus.publish("e", {"i": i})
        got = []
        with pytest.raises(SubscriberDropped) as info:
            async for ev in events:
                got.append(ev.id)
    assert got == [1, 2]
    async with bus.subscribe(last_event_id=info.value.last_id) as events:
        rest = []
        async for ev in events:
            rest.append(ev.id)
            if ev.id == 5:
                break
    assert rest == [3, 4, 5]


def test_listeners_called_and_isolated(bus: EventBus, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    def bad(_ev: Event) -> None:
        raise RuntimeError("listener bug")

    bus.add_listener(bad)
    bus.add_listener(lambda ev: seen.append(ev.type))
    with caplog.at_level(logging.ERROR, logger="elowen.core.events"):
        ev = bus.publish("a", {})
    assert seen == ["a"] and ev.id == 1
    assert "listener bug" in caplog.text
    bus.remove_listener(bad)
    bus.remove_listener(bad)  # unknown: ignored
    bus.publish("b", {})
    assert seen == ["a", "b"]


async def test_failing_project_filter_withholds_only_that_event(bus: EventBus) -> None:
    def flt(p: int | None) -> bool:
        if p == 13:
            raise ValueError("unlucky")
        return True

    async with bus.subscribe(project_filter=flt) as events:
        bus.publish("x", {}, project_id=13)
        ok = bus.publish("x", {}, project_id=1)
        assert await events.__anext__() == ok


def test_prune_keeps_newest_and_ids_never_reused(bus: EventBus) -> None:
    for i in range(80):
        bus.publish("e", {"i": i})
    assert bus.prune() == 30
    rows = bus.replay(0, limit=1000)
    assert [e.id for e in rows] == list(range(31, 81))
    assert bus.prune() == 0
    bus.store.execute("DELETE FROM events")
    assert bus.last_id() == 80
    assert bus.publish("e", {}).id == 81


async def test_future_last_event_id_gets_new_events(bus: EventBus) -> None:
    bus.publish("e", {})
    async with bus.subscribe(last_event_id=10_000) as events:
        ev = bus.publish("e", {})
        assert await events.__anext__() == ev


async def test_closed_bus_ends_iteration_and_refuses(bus: EventBus) -> None:
    async with bus.subscribe() as events:
        bus.close()
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()
    with pytest.raises(trio.ClosedResourceError):
        async with bus.subscribe():
            pass

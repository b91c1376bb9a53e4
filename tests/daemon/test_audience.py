"""Events private to users (``"audience": [ids]`` in their data) reach only those users, live
and on replay — a brain conversation's deltas are not shown to anyone else, admins included."""

from __future__ import annotations

import trio

from elowen.core.events import EventBus
from elowen.core.store import Store
from elowen.daemon.auth import Principal
from elowen.daemon.routes.events import audience_filter


def principal(user_id: int | None, role: str = "member") -> Principal:
    return Principal(user_id=user_id, name=f"u{user_id}", role=role, scope="full", task_id=None, allowed_execs=None, tool_grants=(), token_id=1)


async def test_audience_filter_live_and_replay(tmp_path):
    store = Store(tmp_path / "db")
    bus = EventBus(store)
    try:
        bus.publish("brain.delta", {"text": "for 7", "audience": [7]})
        bus.publish("task.created", {"id": 1}, 1)  # a project's event (events of no project are admin-only)
        seen: dict[str, list[str]] = {}

        async def follow(name: str, me: Principal, ready: trio.Event) -> None:
            async with bus.subscribe(last_event_id=0, event_filter=audience_filter(me)) as sub:
                ready.set()
                got = []
                with trio.move_on_after(0.5):
                    async for event in sub:
                        got.append(event.data.get("text") or event.type)
                seen[name] = got

        async with trio.open_nursery() as nursery:
            readies = []
            for name, me in (("owner", principal(7)), ("other", principal(8)), ("admin", principal(1, "admin"))):
                ready = trio.Event()
                readies.append(ready)
                nursery.start_soon(follow, name, me, ready)
            for ready in readies:
                await ready.wait()
            bus.publish("brain.delta", {"text": "live for 7", "audience": [7]})
        assert seen["owner"] == ["for 7", "task.created", "live for 7"]
        assert seen["other"] == ["task.created"]
        assert seen["admin"] == ["task.created"]
    finally:
        store.close()


async def test_events_of_no_project_reach_admins_only(tmp_path):
    """A deleted task's agent events used to be published without a project and reached every
    member, even one in no project; without a project (and no audience) only admins see one."""
    store = Store(tmp_path / "db")
    bus = EventBus(store)
    try:
        bus.publish("agent.exited", {"task_id": 9, "reason": "task deleted"})
        bus.publish("decision.decided", {"decision": {"payload": {"request": "rm -rf x"}}}, 3)
        got: dict[str, list[str]] = {}
        for name, me in (("member", principal(8)), ("admin", principal(1, "admin"))):
            async with bus.subscribe(last_event_id=0, event_filter=audience_filter(me)) as sub:
                seen = []
                with trio.move_on_after(0.3):
                    async for event in sub:
                        seen.append(event.type)
                got[name] = seen
        assert got["member"] == ["decision.decided"]
        assert got["admin"] == ["agent.exited", "decision.decided"]
    finally:
        store.close()

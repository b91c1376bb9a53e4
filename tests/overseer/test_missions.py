"""Missions on a real SQLite store: states, membership, the dispatch rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elowen.core.events import EventBus
from elowen.core.store import Store
from elowen.daemon.services.tasks import TaskService
from elowen_builtins.overseer.missions import MissionConflict, MissionNotFound, MissionStore
from elowen_sdk.errors import ServiceUnavailable
from tests.support.executors import builtin_resolver

SCHEMA = Path(__file__).resolve().parents[2] / "builtin_plugins" / "overseer" / "schema.sql"


@pytest.fixture
def ms(tmp_path: Path) -> Any:
    store = Store(tmp_path / "t.db")
    store.apply_plugin_schema("overseer", SCHEMA.read_text(), 1)
    store.execute("INSERT INTO projects (id, name, path, created_at) VALUES (1, 'a', '/a', 'now'), (2, 'b', '/b', 'now')")
    for i, (project, state) in enumerate([(1, "open"), (1, "in_progress"), (1, "open"), (2, "open")], start=1):
        store.execute("INSERT INTO tasks (id, title, project_id, state, created_at, updated_at) VALUES (?, 't', ?, ?, 'now', 'now')", (i, project, state))
    events: list[tuple[str, Any]] = []
    tasks = TaskService(store, EventBus(store), builtin_resolver())  # the daemon's tasks service
    m = MissionStore(store, lambda t, d, p=None: events.append((t, d)), lambda: tasks)
    m.events = events  # type: ignore[attr-defined]
    yield m
    store.close()


def test_states_and_dispatch(ms: Any) -> None:
    mission = ms.create(name="m", level=1, project_id=1, task_ids=[1, 2, 3], max_sessions=2)
    assert mission["state"] == "paused" and mission["task_ids"] == [1, 2, 3] and mission["running"] == 1
    assert not ms.may_dispatch({"id": 1})  # paused
    ms.transition(mission["id"], "engage")
    assert ms.may_dispatch({"id": 1})  # 1 running < 2
    ms.update(mission["id"], {"max_sessions": 1})
    assert not ms.may_dispatch({"id": 1})  # 1 running ≥ 1: at once
    ms.update(mission["id"], {"max_sessions": 0, "level": 0})
    assert not ms.may_dispatch({"id": 1})  # L0 never dispatches
    ms.update(mission["id"], {"level": 3})
    assert ms.may_dispatch({"id": 1})
    assert ms.stall(mission["id"], "task 2 blocked")["state"] == "stalled"
    assert not ms.may_dispatch({"id": 1})
    with pytest.raises(MissionConflict):
        ms.transition(mission["id"], "engage")
    assert ms.transition(mission["id"], "resume")["state"] == "active"
    assert ms.transition(mission["id"], "disengage")["state"] == "disengaged"
    assert ms.may_dispatch({"id": 1})  # released: an ordinary task again
    assert ms.may_dispatch({"id": 4})  # never in a mission
    assert [t for t, _ in ms.events].count("mission.updated") >= 6


def test_membership_rules(ms: Any) -> None:
    a = ms.create(name="a", level=1, project_id=1, task_ids=[1])
    with pytest.raises(MissionConflict):
        ms.create(name="b", level=1, project_id=1, task_ids=[1])
    with pytest.raises(MissionConflict):
        ms.add_tasks(a["id"], [4])  # another project
    with pytest.raises(MissionNotFound):
        ms.add_tasks(a["id"], [99])
    assert ms.remove_task(a["id"], 1)["task_ids"] == []
    assert ms.of_task(1) is None


def test_a_mission_label_joins_the_mission_before_any_dispatch(ms: Any) -> None:
    mission = ms.create(name="m", level=0, project_id=1, engage=True)
    # the scheduler sees the task (with its label) before anyone linked it: L0, so no dispatch
    assert not ms.may_dispatch({"id": 3, "labels": [f"mission:{mission['id']}"]})
    assert ms.of_task(3)["id"] == mission["id"], "the label made it a member"
    # a label naming an unknown mission, or one of another project, makes no member
    assert ms.may_dispatch({"id": 1, "labels": ["mission:999"]})
    assert ms.may_dispatch({"id": 4, "labels": [f"mission:{mission['id']}"]})
    assert ms.of_task(4) is None


def test_without_the_tasks_service_nothing_runs_and_membership_waits(tmp_path: Path) -> None:
    """The overseer reads no kernel table: with no tasks service a mission counts no running
    task and refuses new members with a 409 instead of reading ``tasks`` itself."""
    store = Store(tmp_path / "t.db")
    store.apply_plugin_schema("overseer", SCHEMA.read_text(), 1)
    store.execute("INSERT INTO projects (id, name, path, created_at) VALUES (1, 'a', '/a', 'now')")
    store.execute("INSERT INTO tasks (id, title, project_id, state, created_at, updated_at) VALUES (1, 't', 1, 'in_progress', 'now', 'now')")

    def absent() -> Any:
        raise ServiceUnavailable("tasks", "not offered")

    m = MissionStore(store, lambda t, d, p=None: None, absent)
    mission = m.create(name="m", level=1)
    store.execute("INSERT INTO mission_tasks (task_id, mission_id, added_at) VALUES (1, ?, 'now')", (mission["id"],))
    assert m.get(mission["id"])["running"] == 0
    with pytest.raises(MissionConflict, match="tasks service"):
        m.add_tasks(mission["id"], [1])
    store.close()

"""The task service on a real store and event bus (no HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen.core.events import EventBus
from elowen.core.store import Store
from elowen.daemon.services.tasks import TaskConflict, TaskNotFound, TaskService
from elowen_sdk.services.executors import ExecSpecError, ExecutorsUnavailable
from tests.support.executors import builtin_resolver


@pytest.fixture
def svc(tmp_path: Path) -> TaskService:
    store = Store(tmp_path / "db")
    store.execute("INSERT INTO projects (name, path, created_at) VALUES ('p', '/tmp', 'now')")
    return TaskService(store, EventBus(store), builtin_resolver())


def _events(svc: TaskService) -> list[tuple[str, int | None]]:
    return [(e.type, e.project_id) for e in svc.events.replay(0)]


def test_lifecycle_and_events(svc: TaskService) -> None:
    t = svc.create(title="a", project_id=1, labels=["x", "x", "y"], exec="opus")
    assert t["state"] == "open" and t["labels"] == ["x", "y"] and t["ready"]
    assert t["exec_resolved"] == {"provider": "claude", "model": "opus"}
    svc.update(t["id"], {"state": "in_progress", "priority": 0})
    svc.progress(t["id"], "half", author="user:1")
    closed = svc.close(t["id"], "done", ["log.txt"])
    assert closed["state"] == "closed" and closed["evidence"] == ["log.txt"] and closed["closed_at"]
    with pytest.raises(TaskConflict, match="can become: open"):
        svc.close(t["id"], "again")
    with pytest.raises(TaskConflict):
        svc.update(t["id"], {"state": "in_progress"})
    reopened = svc.update(t["id"], {"state": "open"})
    assert reopened["closed_at"] is None
    svc.cancel(t["id"])
    with pytest.raises(TaskConflict):
        svc.cancel(t["id"])
    svc.delete(t["id"])
    with pytest.raises(TaskNotFound):
        svc.get(t["id"])
    assert _events(svc) == [
        ("task.created", 1),
        ("task.updated", 1),
        ("task.progress", 1),
        ("task.closed", 1),
        ("task.updated", 1),
        ("task.cancelled", 1),
        ("task.deleted", 1),
    ]


def test_dependencies_cycles_and_readiness(svc: TaskService) -> None:
    a = svc.create(title="a", project_id=1)["id"]
    b = svc.create(title="b", project_id=1, deps=[a])["id"]
    c = svc.create(title="c", project_id=1, deps=[b])["id"]
    for deps in ([c], [b], [a]):
        with pytest.raises(TaskConflict, match="cycle|itself"):
            svc.update(a, {"deps": deps})
    assert svc.get(a)["deps"] == []  # the failed update left nothing behind
    assert [t["id"] for t in svc.ready()] == [a]
    svc.close(a, "ok")
    assert [t["id"] for t in svc.ready()] == [b]
    svc.cancel(b)
    assert svc.ready() == []  # a cancelled dependency does not make c ready
    assert [t["id"] for t in svc.list_tasks(state="ready")] == []


def test_references_must_exist(svc: TaskService) -> None:
    with pytest.raises(TaskNotFound, match="project 9"):
        svc.create(title="x", project_id=9)
    with pytest.raises(TaskNotFound, match="parent task 9"):
        svc.create(title="x", project_id=1, parent_id=9)
    with pytest.raises(TaskNotFound, match="dependency task 9"):
        svc.create(title="x", project_id=1, deps=[9])
    with pytest.raises(ExecSpecError):
        svc.create(title="x", project_id=1, exec="nope:x")
    assert svc.list_tasks() == [] and _events(svc) == []


def test_children_survive_parent_deletion(svc: TaskService) -> None:
    parent = svc.create(title="p", project_id=1)["id"]
    child = svc.create(title="c", project_id=1, parent_id=parent)["id"]
    svc.delete(parent)
    assert svc.get(child)["parent_id"] is None


async def test_tasks_is_a_kernel_service_and_asks_the_executors_service(tmp_path: Path) -> None:
    from elowen.core.kernel import Kernel
    from elowen.daemon.server import build_state

    async with Kernel.open(tmp_path, discover_entry_points=False, watch_settings=False) as kernel:
        state = build_state(kernel)
        assert kernel.contributions.get("service", "tasks").obj.obj is state.tasks
        kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('p', '/tmp', 'now')")
        # no agents plugin: no spec resolves; tasks are kept (they wait) and their record says why
        assert state.tasks.create(title="x", project_id=1)["exec_resolved"] is None
        task = state.tasks.create(title="y", project_id=1, exec="codex:gpt-5")
        assert task["exec"] == "codex:gpt-5" and task["exec_resolved"] is None
        assert task["exec_error"]["code"] == "executors_unavailable" and "agents" in task["exec_error"]["message"]
        with pytest.raises(ExecutorsUnavailable) as info:
            state.resolve_exec("codex:gpt-5")
        assert info.value.status == 409


def test_count_project_and_project_path(svc: TaskService) -> None:
    """What a plugin asks instead of reading ``tasks`` / ``projects`` itself (the overseer's
    running count and the task's checkout folder)."""
    a = svc.create(title="a", project_id=1)
    b = svc.create(title="b", project_id=1)
    svc.update(b["id"], {"state": "in_progress"})
    assert svc.count([a["id"], b["id"], 999]) == 2
    assert svc.count([a["id"], b["id"], b["id"]], state="in_progress") == 1
    assert svc.count([]) == 0
    assert svc.count(range(1, 1200)) == 2  # more ids than SQLite binds at once
    with pytest.raises(ValueError, match="unknown state"):
        svc.count([a["id"]], state="running")
    assert svc.project(1) == {"id": 1, "name": "p", "path": "/tmp"}
    assert svc.project(2) is None
    assert svc.projects() == [{"id": 1, "name": "p", "path": "/tmp"}]
    assert svc.project_path(a["id"]) == "/tmp"
    assert svc.project_path(999) is None

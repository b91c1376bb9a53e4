"""Every path that creates or runs work goes through the same checks as the REST API:

* the brain worker asks the missions gate (the real overseer plugin) before it runs an
  ``elowen:`` task: not while its mission is at L0, paused or stalled, nor beyond its
  ``max_sessions``;
* the brain's ``tasks.create`` tool applies the daemon's ``[execs] allowed`` list and the
  member's own ``allowed_execs`` (the real agents plugin's ``executors`` service and the
  daemon's ``users`` service), and refuses an unknown spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from elowen.daemon.auth import Access
from elowen.daemon.services.users import UserService, UsersHostService
from elowen_sdk import Service
from tests.support.fake_cli import private_tmux_socket
from tests.support.model_server import Reply

from .conftest import brain_kernel, call

SPEC = "elowen:fake/test-model"


def _closing(request: Any) -> Reply:
    if not request.has_tools:
        return Reply(text="summary")
    if not request.tool_results:
        return Reply(tool_calls=[call("task.close", summary="done", evidence=["nothing to check"])])
    return Reply(text="Closed.")


async def _stays_open(env: Any, task_id: int, seconds: float = 1.0) -> None:
    env.service.worker.wake()
    await trio.sleep(seconds)
    assert env.tasks.get(task_id)["state"] == "open"
    assert task_id not in env.service.worker.runs


async def _closes(env: Any, task_id: int) -> None:
    env.service.worker.wake()
    with trio.fail_after(15):
        while env.tasks.get(task_id)["state"] != "closed":
            await trio.sleep(0.05)


async def test_brain_worker_asks_the_missions_gate(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, enable_more=["overseer"]) as env:
        env.server.script = _closing
        missions = env.kernel.contributions.get("service", "missions").obj.obj._store
        task = env.tasks.create(title="In a mission", project_id=env.project_id, exec=SPEC, owner_id=env.admin)
        mission = missions.create(name="m", level=0, project_id=env.project_id, task_ids=[task["id"]], engage=True)
        await _stays_open(env, task["id"])  # L0: nothing runs on its own
        missions.update(mission["id"], {"level": 2})
        missions.transition(mission["id"], "pause")
        await _stays_open(env, task["id"], 0.5)  # paused
        missions.transition(mission["id"], "engage")
        await _closes(env, task["id"])


async def test_brain_worker_respects_max_sessions(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, enable_more=["overseer"]) as env:
        missions = env.kernel.contributions.get("service", "missions").obj.obj._store
        busy = env.tasks.create(title="Busy", project_id=env.project_id, exec="opencode:a/b", owner_id=env.admin)
        env.tasks.update(busy["id"], {"state": "in_progress"})
        task = env.tasks.create(title="Waits", project_id=env.project_id, exec=SPEC, owner_id=env.admin)
        missions.create(name="m", level=2, project_id=env.project_id, max_sessions=1, task_ids=[busy["id"], task["id"]], engage=True)
        env.server.script = _closing
        await _stays_open(env, task["id"])
        env.tasks.update(busy["id"], {"state": "closed"})
        await _closes(env, task["id"])


async def test_tasks_create_applies_the_exec_allow_lists(tmp_path: Path) -> None:
    with private_tmux_socket() as sock:
        async with brain_kernel(tmp_path, enable_more=["agents", "tmux"], plugin_config={"tmux": {"socket": sock}}) as env:
            users = UsersHostService(UserService(env.kernel.store, Access(env.kernel.store)))
            env.kernel.contributions.add("kernel", "service", Service("users", users), [])
            env.kernel.store.execute("UPDATE users SET allowed_execs = '[\"opencode:*\"]' WHERE id = ?", (env.member,))
            queue = env.script(
                Reply(tool_calls=[call("tasks.create", title="Sneaky", description="x", project="proj", exec=SPEC)]),
                Reply(text="ok"),
                Reply(tool_calls=[call("tasks.create", title="Unknown", description="x", project="proj", exec="nosuchcli:x")]),
                Reply(text="ok"),
                Reply(tool_calls=[call("tasks.create", title="Fine", description="x", project="proj", exec="opencode:a/b")]),
                Reply(text="ok"),
            )
            conv = env.conversation(user=env.member)
            await env.service.turn(env.member, conv["id"], "make a brain task")
            assert "is not in your allowed executors" in queue.seen[1].tool_results[0].output
            await env.service.turn(env.member, conv["id"], "make another")
            assert "cannot create the task" in queue.seen[3].tool_results[0].output
            await env.service.turn(env.member, conv["id"], "and an allowed one")
            assert [t["title"] for t in env.tasks.list_tasks()] == ["Fine"]
            # the daemon's own list binds the admin too
            env.kernel.settings.update(lambda d: d.setdefault("execs", {}).update(allowed=["opencode:*"]))
            queue = env.script(Reply(tool_calls=[call("tasks.create", title="Admin", description="x", project="proj", exec=SPEC)]), Reply(text="ok"))
            conv = env.conversation(user=env.admin)
            await env.service.turn(env.admin, conv["id"], "make a brain task")
            assert "allowed executors" in queue.seen[1].tool_results[0].output, queue.seen[1].tool_results[0].output
            assert [t["title"] for t in env.tasks.list_tasks()] == ["Fine"]

"""The task tool (the brain spawns a coding-agent task) and the brain worker for
``elowen:<provider>/<model>`` tasks: closing itself, retries with a durable counter, the
watchdog, and recovery after a restart."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.model_server import ParsedRequest, Reply

from .conftest import BrainEnv, brain_kernel, call


async def _wait_state(env: BrainEnv, task_id: int, states: set[str], timeout: float = 15) -> dict:
    with trio.fail_after(timeout):
        while (task := env.tasks.get(task_id))["state"] not in states:
            await trio.sleep(0.02)
    return task


async def test_brain_creates_a_coding_agent_task(tmp_path: Path, api: str) -> None:
    async with brain_kernel(tmp_path, api) as env:
        queue = env.script(
            Reply(
                tool_calls=[
                    call(
                        "tasks.create",
                        title="Add a CLI flag",
                        description="Add --verbose to the tool.",
                        project="proj",
                        exec="opencode:anthropic/claude-sonnet-4",
                    )
                ]
            ),
            Reply(text="I started task for you."),
        )
        conv = env.conversation(user=env.member)
        await env.service.turn(env.member, conv["id"], "this is big, spawn an agent")
        tasks = env.tasks.list_tasks()
        assert len(tasks) == 1
        task = tasks[0]
        assert task["title"] == "Add a CLI flag" and task["owner_id"] == env.member and task["project_id"] == env.project_id
        assert task["exec_resolved"] == {"provider": "opencode", "model": "anthropic/claude-sonnet-4"}
        assert f'"id": {task["id"]}' in queue.seen[1].tool_results[0].output


async def test_brain_worker_task_closes_itself(tmp_path: Path, api: str) -> None:
    spec = {"openai": "elowen:fake/test-model", "anthropic": "elowen:fakeant/claude-test"}[api]
    async with brain_kernel(tmp_path, api) as env:

        def worker(request: ParsedRequest) -> Reply:
            assert "task_close" in request.tool_names and "ask_user" not in request.tool_names
            if not request.tool_results:
                return Reply(tool_calls=[call("files.write", path="NOTES.md", content="written by the worker\n"), call("terminal.run", command="cat NOTES.md")])
            if len(request.tool_results) == 2:
                return Reply(tool_calls=[call("task.close", summary="Wrote NOTES.md", evidence=["cat NOTES.md: written by the worker"])])
            return Reply(text="Closed.")

        env.server.script = lambda r: worker(r) if r.has_tools else Reply(text="summary")
        task = env.tasks.create(title="Write notes", description="Create NOTES.md", project_id=env.project_id, exec=spec, owner_id=env.admin)
        env.service.worker.wake()
        closed = await _wait_state(env, task["id"], {"closed", "blocked"})
        assert closed["state"] == "closed" and closed["summary"] == "Wrote NOTES.md"
        assert closed["evidence"] == ["cat NOTES.md: written by the worker"]
        assert (env.project / "NOTES.md").read_text() == "written by the worker\n"
        model = [r.model for r in env.server.requests if r.has_tools]
        assert set(model) == {spec.split("/", 1)[1]}


async def test_worker_that_does_not_close_is_retried_then_blocked(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, config={"worker_max_attempts": 2}) as env:
        env.server.script = lambda r: Reply(text="I give up.")
        task = env.tasks.create(title="Impossible", project_id=env.project_id, exec="elowen:fake/test-model")
        env.service.worker.wake()
        blocked = await _wait_state(env, task["id"], {"blocked"})
        assert blocked["attempts"] == 2 and "without closing" in blocked["resume_note"]
        prompts = [r.prompt for r in env.server.requests if r.has_tools]
        assert len(prompts) == 2 and "Note from the previous attempt" in prompts[1]


async def test_worker_refuses_destructive_commands(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:

        def worker(request: ParsedRequest) -> Reply:
            if not request.tool_results:
                return Reply(tool_calls=[call("terminal.run", command="rm -rf ~")])
            return Reply(tool_calls=[call("task.close", summary="refused: " + request.tool_results[0].output[:60])])

        env.server.script = worker
        task = env.tasks.create(title="Clean", project_id=env.project_id, exec="elowen:fake/test-model")
        env.service.worker.wake()
        closed = await _wait_state(env, task["id"], {"closed", "blocked"})
        assert closed["summary"].startswith("refused: error: refused: destructive")


async def test_watchdog_recovers_a_stalled_worker(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, config={"worker_stall_timeout": 0.5, "worker_max_attempts": 3}) as env:
        calls = []

        def script(request: ParsedRequest) -> Reply:
            calls.append(request)
            if len(calls) == 1:
                return Reply(text="", delay=3.0)  # the model hangs: no event for longer than the stall timeout
            return Reply(tool_calls=[call("task.close", summary="done on the second try")]) if not request.tool_results else Reply(text="ok")

        env.server.script = script
        task = env.tasks.create(title="Flaky", project_id=env.project_id, exec="elowen:fake/test-model")
        env.service.worker.wake()
        closed = await _wait_state(env, task["id"], {"closed", "blocked"}, timeout=20)
        assert closed["state"] == "closed" and closed["attempts"] == 1


async def test_restart_recovers_in_progress_worker_tasks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with brain_kernel(tmp_path, home=home) as env:
        env.server.script = lambda r: Reply(text="slow", delay=5)
        task = env.tasks.create(title="Long", project_id=env.project_id, exec="elowen:fake/test-model")
        env.service.worker.wake()
        await _wait_state(env, task["id"], {"in_progress"})
    async with brain_kernel(tmp_path, home=home, seed=False) as env:
        env.server.script = lambda r: Reply(tool_calls=[call("task.close", summary="resumed")]) if not r.tool_results else Reply(text="ok")
        env.service.worker.recover()  # the fixture offers the task service after the plugin loaded
        closed = await _wait_state(env, task["id"], {"closed"})
        assert closed["attempts"] == 1 and "restarted" in (closed["resume_note"] or "")

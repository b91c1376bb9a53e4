"""A daemon restart in the middle of a run: the run resumes with its iteration count and the
ledger's attempts; the turn in flight is waited for, not released again; nothing closed runs
twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Script, item, loop_kernel, parts, plan_json, until

WORK = "Build me a small CLI that converts CSV to JSON, with tests."


@pytest.mark.slow
async def test_restart_mid_run_keeps_counts_and_runs_nothing_twice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = {"executor_enabled": True}
    plan = plan_json(item("One"), item("Two", deps=(1,)), item("Three", deps=(2,)))
    async with loop_kernel(tmp_path, home=home, config=config, brain={"worker_max_attempts": 1}) as env:
        first = Script(plan=plan, behaviour={"Two": "slow"})
        env.server.script = first
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        tasks = await until(
            lambda: (
                (t := parts(env).projects.tree(1)["tasks"])
                and env.tasks.get(t[1]["id"])["state"] == "in_progress"
                and first.worker_turns == ["One", "Two"]
                and t
            ),
            what="Two running",
        )
        run = parts(env).projects.db.current_run(1)
        assert run["iterations"] == 2 and first.worker_turns == ["One", "Two"]
    # the daemon is gone; Two was in progress, its turn recorded and still open
    async with loop_kernel(tmp_path, home=home, config=config, brain={"worker_max_attempts": 1}, seed=False) as env:
        second = Script(plan=plan)
        env.server.script = second
        env.service.worker.recover()  # the fixture offers the task service after the brain loaded
        await until(lambda: parts(env).projects.db.project(1)["state"] == "done", timeout=60, what="done after the restart")
        runs = parts(env).projects.db.runs(1)
        assert len(runs) == 1 and runs[0]["id"] == run["id"] and runs[0]["stop_reason"] == "complete"
        turns = parts(env).projects.db.turns(run["id"])
        assert [(t["iteration"], t["task_id"], t["outcome"]) for t in turns] == [
            (1, tasks[0]["id"], "closed"),
            (2, tasks[1]["id"], "no_progress"),  # interrupted by the restart: counted once
            (3, tasks[1]["id"], "closed"),
            (4, tasks[2]["id"], "closed"),
        ]
        assert runs[0]["iterations"] == 4
        assert second.worker_turns == ["Two", "Three"]  # One is not run again
        assert env.tasks.get(tasks[1]["id"])["attempts"] == 1 and env.tasks.get(tasks[0]["id"])["attempts"] == 0

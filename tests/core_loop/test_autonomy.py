"""Autonomy: a project in an L0 mission plans and proposes but never executes on its own —
each dispatch is a decision the overseer escalates to a human (one task, or the whole plan);
a rejected dispatch drops the task. Real overseer, agents (decisions) and tmux plugins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.fake_cli import private_tmux_socket

from .conftest import Script, item, loop_kernel, parts, plan_json, until

WORK = "Build me a small CLI that converts CSV to JSON, with tests."


def service(env: Any, name: str) -> Any:
    return env.kernel.contributions.get("service", name).obj.obj


@pytest.mark.slow
async def test_l0_proposes_and_a_human_dispatches_one_task_or_the_whole_plan(tmp_path: Path) -> None:
    with private_tmux_socket() as sock:
        async with loop_kernel(
            tmp_path,
            config={"executor_enabled": True},
            brain={"worker_max_attempts": 1},
            enable_more=("overseer", "agents", "tmux"),
            plugin_config={"tmux": {"socket": sock}, "overseer": {"sweep_interval": 0.2}},
        ) as env:
            mission = service(env, "missions")._store.create(name="csv", level=0, project_id=env.project_id, engage=True)
            await env.kernel.registry.configure("core-loop", {"mission_id": mission["id"]})
            await until(lambda: (p := parts(env)) is not None and p.settings().mission_id == mission["id"], what="mission configured")
            script = Script(plan=plan_json(item("One"), item("Two"), item("Three"), item("Four")), behaviour={})
            env.server.script = script
            conv = env.conversation(project_id=env.project_id)
            await env.service.turn(env.admin, conv["id"], WORK)
            decisions = service(env, "decisions")
            project = await until(lambda: (p := parts(env).projects.db.project(1)) and p["plan_decision"] and p, what="plan decision")
            asked = await until(
                lambda: (
                    [d for d in decisions.list_decisions(kind="message") if d["status"] == "escalated"]
                    if len([d for d in decisions.list_decisions(kind="message") if d["status"] == "escalated"]) == 2
                    else None
                ),
                what="both escalated",
            )
            assert {d["payload"]["core_loop"]["scope"] for d in asked} == {"plan", "task"}
            assert all(d["task_id"] == project["task_id"] and "L0" in (d["rationale"] or "") for d in asked)
            await trio.sleep(1.0)
            assert script.worker_turns == []  # L0: nothing runs on its own
            one = next(d for d in asked if d["payload"]["core_loop"]["scope"] == "task")
            await decisions.decide(one["id"], "approve", decided_by="admin")
            await until(lambda: script.worker_turns == ["One"], what="One dispatched")
            # the next dispatch is asked again; the human rejects it: the task is dropped
            two = await until(
                lambda: next(
                    (
                        d
                        for d in decisions.list_decisions(kind="message")
                        if d["status"] == "escalated" and d["payload"]["core_loop"]["task_id"] not in (None, one["payload"]["core_loop"]["task_id"])
                    ),
                    None,
                ),
                what="Two asked",
            )
            await decisions.decide(two["id"], "reject", rationale="not now", decided_by="admin")
            tree = await until(lambda: (t := parts(env).projects.tree(1)["tasks"]) and t[1]["dropped"] and t, what="Two dropped")
            assert "not now" in tree[1]["drop_reason"] and env.tasks.get(tree[1]["id"])["state"] == "cancelled"
            # approving the whole plan releases the rest without more questions
            plan = next(d for d in asked if d["payload"]["core_loop"]["scope"] == "plan")
            await decisions.decide(plan["id"], "approve", decided_by="admin")
            await until(lambda: parts(env).projects.db.project(1)["state"] == "stopped", timeout=60, what="run ended")
            assert script.worker_turns == ["One", "Three", "Four"]
            assert parts(env).projects.db.runs(1)[0]["stop_reason"] == "partial"
            still_open = [d for d in decisions.list_decisions(kind="message") if d["status"] in ("pending", "escalated")]
            assert still_open == []  # the per-task question made moot by the plan approval was expired

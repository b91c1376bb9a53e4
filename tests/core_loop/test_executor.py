"""The bounded executor end to end: a work request typed into chat → plan in the ledger →
approved by a reply → executed by the brain worker against the scripted model server; one task
that never makes progress (dropped after 3 attempts), a dependency chain, a cap stop, a budget
stop in a second run, pulses, and receipts whose every line matches the ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen_builtins.core_loop.receipt import build_receipt, render_receipt

from .conftest import Script, item, loop_kernel, parts, plan_json, until

WORK = "Build me a small CLI that converts CSV to JSON, with tests."

PLAN = plan_json(
    item("Write the parser"),
    item("Write the CLI", deps=(1,)),
    item("Write the docs", priority="critical"),
    item("Write the tests", deps=(2,)),
    item("Package it", deps=(4,)),
    item("Release it", deps=(5,)),
)


def events(env: Any, type_: str) -> list[dict[str, Any]]:
    return [json.loads(r["data"]) for r in env.kernel.store.query("SELECT data FROM events WHERE type = ? ORDER BY id", (type_,))]


def check_receipt_against_ledger(env: Any, receipt: dict[str, Any]) -> None:
    """Every line of the receipt is what the ledger holds: completed ⇔ closed with evidence,
    the evidence copied verbatim, nothing invented."""
    for line in receipt["tasks"]:
        task = env.tasks.get(line["task_id"])
        assert line["title"] == task["title"] and line["state"] == task["state"]
        if line["status"] == "completed":
            assert task["state"] == "closed" and task["evidence"] and line["evidence"] == task["evidence"]
        else:
            assert line["evidence"] == [] and not (task["state"] == "closed" and task["evidence"])


async def test_work_request_to_receipt(tmp_path: Path) -> None:
    config = {"plan_approval": True, "executor_enabled": True, "executor_max_iterations": 6, "pulse_every_n_tasks": 2}
    async with loop_kernel(tmp_path, config=config, brain={"worker_max_attempts": 1}) as env:
        script = Script(plan=PLAN, behaviour={"Write the docs": "fail"})
        env.server.script = script
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        await until(lambda: parts(env).projects.db.project(1)["state"] == "awaiting_approval", what="plan awaiting approval")
        assert script.worker_turns == []
        await env.service.turn(env.admin, conv["id"], "approve plan")
        await until(lambda: parts(env).projects.db.project(1)["state"] == "stopped", timeout=60, what="first run stopped")
        run1 = parts(env).projects.db.runs(1)[0]
        assert run1["stop_reason"] == "cap" and run1["iterations"] == 6
        # docs (critical) first, three turns without progress, then the chain in order
        assert script.worker_turns == ["Write the docs"] * 3 + ["Write the parser", "Write the CLI", "Write the tests"]
        tree = {t["title"]: t for t in parts(env).projects.tree(1)["tasks"]}
        docs = env.tasks.get(tree["Write the docs"]["id"])
        assert docs["state"] == "cancelled" and docs["attempts"] == 3 and "core-loop:dropped" in docs["labels"]
        assert tree["Write the docs"]["dropped"] and "3 attempts" in tree["Write the docs"]["drop_reason"]
        receipt = run1["receipt"]
        check_receipt_against_ledger(env, receipt)
        assert {line["title"]: line["status"] for line in receipt["tasks"]} == {
            "Write the parser": "completed",
            "Write the CLI": "completed",
            "Write the docs": "dropped",
            "Write the tests": "completed",
            "Package it": "not_completed",
            "Release it": "not_completed",
        }
        assert receipt["spend"]["tokens"] > 0 and receipt["stop_reason"] == "cap"
        pulses = events(env, "core_loop.pulse")
        assert [p["done"] for p in pulses] == [2] and pulses[0]["conversation_id"] == conv["id"]
        assert [e["stop_reason"] for e in events(env, "core_loop.receipt")] == ["cap"]
        text = render_receipt(receipt)
        assert "DROPPED (not completed)" in text and "evidence: ran: Write the parser" in text
        # a second run with a spend ceiling one task can pass: checked between tasks
        await env.kernel.registry.configure("core-loop", {"budget_tokens": 1})  # restarts the plugin
        await until(lambda: (p := parts(env)) is not None and p.settings().budget_tokens == 1, what="new budget seen")
        parts(env).projects.db.update_project(1, state="approved")
        await until(lambda: parts(env).projects.db.project(1)["state"] == "stopped" and len(parts(env).projects.db.runs(1)) == 2, timeout=60, what="second run")
        run2 = parts(env).projects.db.runs(1)[1]
        assert run2["stop_reason"] == "budget" and run2["iterations"] == 1 and run2["spend_tokens"] > 1
        assert script.worker_turns[-1] == "Package it" and script.worker_turns.count("Write the parser") == 1
        check_receipt_against_ledger(env, run2["receipt"])
        parent = env.tasks.get(parts(env).projects.db.project(1)["task_id"])
        assert parent["state"] == "blocked" and "budget" in parent["resume_note"]


async def test_complete_run_closes_the_parent_with_the_evidence(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path, config={"executor_enabled": True}, brain={"worker_max_attempts": 1}) as env:
        env.server.script = Script(plan=plan_json(item("One"), item("Two", deps=(1,))))
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        await until(lambda: parts(env).projects.db.project(1)["state"] == "done", timeout=60, what="done")
        run = parts(env).projects.db.runs(1)[0]
        assert run["stop_reason"] == "complete" and run["iterations"] == 2
        parent = env.tasks.get(parts(env).projects.db.project(1)["task_id"])
        assert parent["state"] == "closed" and len(parent["evidence"]) == 2 and "ran: One" in parent["evidence"][0]


async def test_closed_without_evidence_is_reopened_and_dependents_wait(tmp_path: Path) -> None:
    config = {"executor_enabled": True, "executor_max_task_attempts": 2}
    async with loop_kernel(tmp_path, config=config, brain={"worker_max_attempts": 1}) as env:
        script = Script(plan=plan_json(item("Bare"), item("After", deps=(1,))), behaviour={"Bare": "close_bare"})
        env.server.script = script
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        await until(lambda: parts(env).projects.db.project(1)["state"] == "stopped", timeout=60, what="stopped")
        run = parts(env).projects.db.runs(1)[0]
        # closed twice without evidence: reopened each time, then dropped; its dependent never ran
        assert run["stop_reason"] == "blocked" and script.worker_turns == ["Bare", "Bare"]
        bare, after = parts(env).projects.tree(1)["tasks"]
        assert env.tasks.get(bare["id"])["state"] == "cancelled" and env.tasks.get(after["id"])["state"] == "blocked"
        turns = parts(env).projects.db.turns(run["id"])
        assert [t["outcome"] for t in turns] == ["no_evidence", "no_evidence"]
        check_receipt_against_ledger(env, run["receipt"])


def test_receipt_shows_a_task_without_evidence_as_such() -> None:
    project = {"id": 1, "title": "p"}
    run = {"id": 7, "iterations": 3, "started_at": "2026-12-02T00:00:00.000Z"}
    planned = {"position": 1, "acceptance": ["x"], "dropped": False, "drop_reason": None}
    closed_bare = {"id": 5, "title": "bare", "state": "closed", "evidence": [], "summary": "done!", "attempts": 1}
    closed_ok = {"id": 6, "title": "ok", "state": "closed", "evidence": ["pytest: 3 passed"], "summary": "done", "attempts": 1}
    receipt = build_receipt(project, run, "complete", 10, [(planned, closed_bare), ({**planned, "position": 2}, closed_ok)])
    bare, ok = receipt["tasks"]
    assert bare["status"] == "closed_without_evidence" and bare["evidence"] == [] and bare["evidence_ref"] == "task #5: no evidence in the ledger"
    assert ok["status"] == "completed" and ok["evidence"] == ["pytest: 3 passed"]
    text = render_receipt(receipt)
    assert "[closed WITHOUT evidence] #5 bare\n   evidence: none in the ledger" in text


@pytest.mark.slow
async def test_disable_stops_the_run_and_enable_resumes_it(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path, config={"executor_enabled": True}, brain={"worker_max_attempts": 1}) as env:
        script = Script(plan=plan_json(item("One"), item("Two", deps=(1,))), behaviour={"One": "slow"})
        env.server.script = script
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        await until(lambda: script.worker_turns == ["One"], what="One running")
        executor = parts(env).executor
        await env.kernel.registry.disable("core-loop")
        assert parts(env) is None and executor.running == set()  # its nursery (the run) is cancelled
        script.behaviour["One"] = "close"
        await until(lambda: env.tasks.get(parts_task(env, 0))["state"] == "blocked", what="One back to held by the brain worker")
        for _ in range(10):  # nothing releases tasks while the plugin is off
            await trio.sleep(0.1)
        assert script.worker_turns == ["One"] and env.tasks.get(parts_task(env, 1))["state"] == "blocked"
        await env.kernel.registry.enable("core-loop")
        await until(lambda: (p := parts(env)) is not None and p.projects.db.project(1)["state"] == "done", timeout=60, what="done after enable")
        assert script.worker_turns == ["One", "One", "Two"]
        run = env.kernel.store.query_one("SELECT * FROM core_loop_runs WHERE project = 1")
        assert run["iterations"] == 3 and run["stop_reason"] == "complete"


def parts_task(env: Any, position: int) -> int:
    """The ledger id of the planned task at ``position`` (0-based) of project 1, read from the store."""
    rows = env.kernel.store.query("SELECT task_id FROM core_loop_tasks WHERE project = 1 ORDER BY position")
    return int(rows[position]["task_id"])


async def test_a_planned_task_deleted_from_the_ledger_leaves_the_plan_not_fatal(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path, config={"plan_approval": True, "executor_enabled": True}, brain={"worker_max_attempts": 1}) as env:
        script = Script(plan=plan_json(item("Keep"), item("Gone")))
        env.server.script = script
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        await until(lambda: parts(env).projects.db.project(1)["state"] == "awaiting_approval", what="planned")
        env.tasks.delete(parts_task(env, 1))
        parts(env).projects.approve(1, env.admin)
        await until(lambda: parts(env).projects.db.project(1)["state"] == "done", timeout=60, what="run ended")
        run = parts(env).projects.db.runs(1)[0]
        assert run["stop_reason"] == "complete" and script.worker_turns == ["Keep"]
        assert [t["title"] for t in parts(env).projects.tree(1)["tasks"]] == ["Keep"]
        assert [line["title"] for line in run["receipt"]["tasks"]] == ["Keep"]
        assert parts(env).projects.db.task(parts_task(env, 1))["drop_reason"] == "deleted from the ledger"

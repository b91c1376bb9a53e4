"""Intake before the brain turn and the plan → ledger step, against the real kernel, the real
task ledger (SQLite file) and the scripted model server as the planner."""

from __future__ import annotations

from pathlib import Path

from .conftest import EXEC, Script, item, loop_kernel, parts, plan_json, until

WORK = "Build me a small CLI that converts CSV to JSON, with tests."


async def test_intake_is_off_by_default(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path, config={"intake_enabled": False}) as env:
        script = Script(plan=plan_json(item("x")))
        env.server.script = script
        conv = env.conversation(project_id=env.project_id)
        out = await env.service.turn(env.admin, conv["id"], WORK)
        assert [m["content"] for m in out["messages"] if m["role"] == "assistant"] == ["chat reply"]
        assert script.planner_calls == 0 and parts(env).projects.db.projects() == []


async def test_chat_falls_through_and_work_is_claimed_without_a_model_call(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path) as env:
        script = Script(plan=plan_json(item("Write the converter"), item("Write the tests", deps=(1,), priority="high"), title="csv2json"))
        env.server.script = script
        conv = env.conversation(project_id=env.project_id)
        out = await env.service.turn(env.admin, conv["id"], "How do I parse CSV in Python without pandas?")
        assert [m["content"] for m in out["messages"] if m["role"] == "assistant"] == ["chat reply"]
        before = len(env.server.requests)
        out = await env.service.turn(env.admin, conv["id"], WORK)
        reply = [m["content"] for m in out["messages"] if m["role"] == "assistant"]
        assert len(reply) == 1 and "core-loop project #1" in reply[0]
        # the turn itself made no model call: the only request after it is the planner's, in the background
        project = await until(lambda: (p := parts(env).projects.db.project(1)) and p["state"] != "planning" and p, what="planned")
        assert [r.json_schema is not None for r in env.server.requests[before:]] == [True]
        assert script.chat_calls == 1 and project["state"] == "approved"
        tree = parts(env).projects.tree(1)
        parent = env.tasks.get(project["task_id"])
        assert parent["state"] == "blocked" and "core-loop:project" in parent["labels"] and parent["title"] == "csv2json"
        first, second = tree["tasks"]
        assert [t["position"] for t in tree["tasks"]] == [1, 2]
        assert all(env.tasks.get(t["id"])["state"] == "blocked" for t in tree["tasks"])  # held
        assert env.tasks.get(second["id"])["deps"] == [first["id"]]
        assert second["plan_priority"] == "high" and second["priority"] == 1 and first["priority"] == 2
        assert first["acceptance"] == ["pytest passes"] and "Acceptance criteria:\n- pytest passes" in env.tasks.get(first["id"])["description"]
        assert env.tasks.get(first["id"])["parent_id"] == parent["id"] and env.tasks.get(first["id"])["exec"] == EXEC
        # the brain's history shows the claimed message and the acknowledgement
        history = env.service.db.messages(conv["id"]) if hasattr(env.service.db, "messages") else None
        if history is not None:
            assert [m["role"] for m in history][-2:] == ["user", "assistant"]


async def test_override_phrases(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path) as env:
        env.server.script = Script(plan=plan_json(item("Rename files")))
        conv = env.conversation(project_id=env.project_id)
        out = await env.service.turn(env.admin, conv["id"], "just a question: build me a web app for tracking habits")
        assert [m["content"] for m in out["messages"] if m["role"] == "assistant"] == ["chat reply"]
        out = await env.service.turn(env.admin, conv["id"], "treat this as a project: my music files need renaming from their tags")
        assert "core-loop project #1" in out["messages"][-1]["content"]


async def test_bad_edges_are_dropped_and_logged_never_fatal(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path) as env:
        env.server.script = Script(plan=plan_json(item("a", deps=(2,)), item("b", deps=(1, 2, 9)), item("c", deps=(0, 1))))
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        project = await until(lambda: (p := parts(env).projects.db.project(1)) and p["state"] != "planning" and p, what="planned")
        assert project["state"] == "approved"
        log = project["plan_log"]
        assert any("dependency on itself" in line for line in log)
        assert any("out of range" in line and "9" in line for line in log)
        assert any("out of range" in line and "0" in line for line in log)
        assert any("cycle" in line for line in log)  # b → a closes a → b
        a, b, c = parts(env).projects.tree(1)["tasks"]
        assert env.tasks.get(a["id"])["deps"] == [b["id"]] and env.tasks.get(b["id"])["deps"] == []
        assert env.tasks.get(c["id"])["deps"] == [a["id"]]


async def test_free_text_fallback_and_garbage_fails_closed(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path) as env:
        text = "PLAN: csv tool\n1. [critical] Write the parser\n   Acceptance: parses quoted fields; pytest passes\n2. Write the CLI\n   After: 1\n   Uses argparse."
        env.server.script = Script(plan=text)
        conv = env.conversation(project_id=env.project_id)
        await env.service.turn(env.admin, conv["id"], WORK)
        project = await until(lambda: (p := parts(env).projects.db.project(1)) and p["state"] != "planning" and p, what="planned")
        first, second = parts(env).projects.tree(1)["tasks"]
        assert project["title"] == "csv tool" and first["plan_priority"] == "critical" and first["priority"] == 0
        assert first["acceptance"] == ["parses quoted fields", "pytest passes"]
        assert env.tasks.get(second["id"])["deps"] == [first["id"]] and "Uses argparse." in env.tasks.get(second["id"])["description"]
        count = len(env.tasks.list_tasks(limit=1000))
        env.server.script = Script(plan="Sure! Here is what I would do: first write a parser, then a CLI.")
        await env.service.turn(env.admin, conv["id"], "Create a Python script that renames photos by the date in their EXIF data.")
        failed = await until(lambda: (p := parts(env).projects.db.project(2)) and p["state"] != "planning" and p, what="failed")
        assert failed["state"] == "failed" and "not a plan" in failed["error"]
        assert len(env.tasks.list_tasks(limit=1000)) == count  # nothing half-written


async def test_plan_approval_holds_then_edit_then_approve_by_reply(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path, config={"plan_approval": True, "executor_enabled": True}) as env:
        script = Script(plan=plan_json(item("Write the converter"), item("Write the tests")))
        env.server.script = script
        conv = env.conversation(project_id=env.project_id)
        out = await env.service.turn(env.admin, conv["id"], WORK)
        assert "approve the plan" in out["messages"][-1]["content"]
        project = await until(lambda: (p := parts(env).projects.db.project(1)) and p["state"] != "planning" and p, what="planned")
        assert project["state"] == "awaiting_approval"
        first, second = parts(env).projects.tree(1)["tasks"]
        # the executor's tick does not touch it
        for _ in range(5):
            assert parts(env).executor.tick() == []
        assert env.tasks.get(first["id"])["state"] == "blocked" and script.worker_turns == []
        edited = parts(env).projects.edit_task(
            second["id"], {"title": "Write the tests first", "acceptance": ["20 tests pass"], "priority": "critical", "depends_on": [1]}, env.admin
        )
        assert edited["title"] == "Write the tests first" and edited["acceptance"] == ["20 tests pass"] and edited["priority"] == 0
        assert env.tasks.get(second["id"])["deps"] == [first["id"]] and "- 20 tests pass" in env.tasks.get(second["id"])["description"]
        # someone else's reply does not approve it; the asker's does
        other = env.conversation(user=env.member, project_id=env.project_id)
        out = await env.service.turn(env.member, other["id"], "approve plan")
        assert out["messages"][-1]["content"] == "chat reply"
        out = await env.service.turn(env.admin, conv["id"], "Approve the plan.")
        assert "approved" in out["messages"][-1]["content"]
        assert parts(env).projects.db.project(1)["state"] in ("approved", "done")
        await until(lambda: script.worker_turns == ["Write the converter", "Write the tests first"], what="both tasks run in order")


async def test_a_plan_interrupted_by_a_restart_is_made_on_load(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path) as env:
        env.server.script = Script(plan=plan_json(item("Only task")))
        await env.kernel.registry.disable("core-loop")
        # a project left in "planning" (the daemon stopped during the planner call)
        env.kernel.store.execute(
            "INSERT INTO core_loop_projects (ledger_project, user_id, conversation_id, request, state, created_at, updated_at) "
            "VALUES (?, ?, NULL, ?, 'planning', '2026-12-02T00:00:00.000Z', '2026-12-02T00:00:00.000Z')",
            (env.project_id, env.admin, WORK),
        )
        await env.kernel.registry.enable("core-loop")
        project = await until(
            lambda: (p := parts(env)) is not None and (row := p.projects.db.project(1))["state"] != "planning" and row, what="planned on load"
        )
        assert project["state"] == "approved" and [t["title"] for t in parts(env).projects.tree(1)["tasks"]] == ["Only task"]


async def test_no_planner_means_no_intake(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path) as env:
        env.server.script = Script(plan=plan_json(item("x")))
        conv = env.conversation(project_id=env.project_id)
        no_project = env.conversation()
        out = await env.service.turn(env.admin, no_project["id"], WORK)  # a conversation without a project folder
        assert out["messages"][-1]["content"] == "chat reply"
        await env.kernel.registry.disable("inference", cascade=True)
        assert parts(env) is not None  # the planner is optional for the plugin
        turn = type("Turn", (), {"conversation_id": str(conv["id"]), "user": str(env.admin), "message": WORK})()
        assert parts(env).intake.handle(turn) is None  # no planner: the ordinary turn runs
        assert parts(env).projects.db.projects() == []

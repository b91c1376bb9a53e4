"""A turn narrowed to some projects (a chat platform's role scope: ``TurnContext.projects``)
must not open a core-loop project in a project outside them, nor approve one there: the plan's
agents would work in a project the chat does not reach."""

from __future__ import annotations

from pathlib import Path

from elowen_sdk import TurnContext

from .conftest import Script, item, loop_kernel, parts, plan_json

WORK = "Build me a small CLI that converts CSV to JSON, with tests."


async def test_a_narrowed_turn_opens_no_project_outside_its_scope(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path) as env:
        env.server.script = Script(plan=plan_json(item("x")))
        conv = env.conversation(project_id=env.project_id)
        elsewhere = (env.project_id + 1000,)
        assert parts(env).intake.handle(TurnContext(str(conv["id"]), str(env.admin), WORK, projects=elsewhere)) is None
        assert parts(env).projects.db.projects() == [], "a turn narrowed to other projects opened a project here"
        claimed = parts(env).intake.handle(TurnContext(str(conv["id"]), str(env.admin), WORK, projects=(env.project_id,)))
        assert claimed is not None and len(parts(env).projects.db.projects()) == 1, "in scope, the intake still claims work"

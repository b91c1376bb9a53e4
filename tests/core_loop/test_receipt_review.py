"""The core loop's receipt links each task that has a git worktree branch to its diff page: a
real kernel with ``core-loop`` and ``git`` enabled, the project folder a real git repository,
the git service making a task's worktree as it does at an agent's spawn."""

from __future__ import annotations

from pathlib import Path

from elowen_builtins.core_loop.receipt import build_receipt, render_receipt
from elowen_sdk.services import GitService
from tests.mission_control.gitrepo import make_repo

from .conftest import loop_kernel, parts


async def test_receipt_links_a_task_with_a_worktree_to_its_diff(tmp_path: Path) -> None:
    async with loop_kernel(tmp_path, enable_more=("git",), plugin_config={"git": {"root": str(tmp_path / "worktrees")}}) as env:
        make_repo(env.project, {"README.md": "demo\n"})
        # an executor that does not run here: nothing spawns, the worktree is made explicitly
        with_branch = env.tasks.create(title="Has a branch", project_id=env.project_id, exec="opencode:a/b", owner_id=env.admin)
        without = env.tasks.create(title="No branch", project_id=env.project_id, exec="opencode:a/b", owner_id=env.admin)
        loop = parts(env)
        git = loop.ctx.service(GitService)
        wd = await git.workdir_for(int(with_branch["id"]), str(env.project))
        assert wd.branch == f"elowen/task-{with_branch['id']}"
        found = await loop.executor._worktrees([int(with_branch["id"]), int(without["id"])])
        assert set(found) == {int(with_branch["id"])}
        planned = {"position": 1, "acceptance": [], "dropped": False, "drop_reason": None}
        children = [(planned, env.tasks.get(int(with_branch["id"]))), ({**planned, "position": 2}, env.tasks.get(int(without["id"])))]
        run = {"id": 1, "iterations": 1, "started_at": "2026-12-02T00:00:00.000Z"}
        receipt = build_receipt({"id": 1, "title": "p"}, run, "complete", 0, children, found)
        linked, plain = receipt["tasks"]
        tid = with_branch["id"]
        assert linked["review"] == {"branch": f"elowen/task-{tid}", "state": "active", "diff": f"/tasks/{tid}#review-h"}
        assert plain["review"] is None
        text = render_receipt(receipt)
        assert f"#{tid} Has a branch\n   evidence: none in the ledger\n   diff: /tasks/{tid}#review-h (branch elowen/task-{tid}, active)" in text
        assert text.count("diff:") == 1

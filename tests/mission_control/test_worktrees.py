"""The git plugin's worktree service on real git repositories (git 2.38+ subprocesses) and a
real SQLite store: a worktree per task, status and diff of committed and uncommitted work,
merge (fast-forward and merge commit, base checked out or not), conflicts that change nothing,
refusals that keep uncommitted work, and discard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elowen.core.store import Store
from elowen_builtins.git.worktrees import Worktrees
from elowen_sdk.services.git import GitError, MergeConflict

from .gitrepo import commit, git, make_repo

SCHEMA = (Path(__file__).resolve().parents[2] / "builtin_plugins" / "git" / "schema.sql").read_text()


class Env:
    def __init__(self, tmp: Path) -> None:
        self.store = Store(tmp / "elowen.db")
        self.store.apply_plugin_schema("git", SCHEMA, 1)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.config: dict[str, Any] = {"worktrees": "auto", "projects": {}}
        self.tasks = {n: {"title": f"Task {n}", "project_id": 1, "project_name": "demo"} for n in range(1, 20)}
        self.svc = Worktrees(self.store, tmp / "data" / "worktrees", lambda: self.config, self.tasks.get, lambda t, d, _project: self.events.append((t, d)))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"a.txt": "one\ntwo\nthree\n", "README.md": "hello\n"})


def _sha(cwd: Path | str, ref: str = "HEAD") -> str:
    return git(cwd, "rev-parse", ref).strip()


async def test_a_folder_that_is_not_a_repository_gets_no_worktree(env: Env, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    wd = await env.svc.workdir_for(1, str(plain))
    assert wd.path == str(plain) and wd.branch is None and await env.svc.worktree(1) is None
    with pytest.raises(GitError) as err:
        await env.svc.diff(1)
    assert err.value.code == "no_worktree"


async def test_worktrees_off_for_a_project(env: Env, repo: Path) -> None:
    env.config["projects"] = {"demo": False}
    assert (await env.svc.workdir_for(1, str(repo))).path == str(repo)
    env.config["projects"] = {}
    env.config["worktrees"] = "off"
    assert (await env.svc.workdir_for(1, str(repo))).path == str(repo)


async def test_worktree_per_task_status_and_diff(env: Env, repo: Path) -> None:
    wd = await env.svc.workdir_for(1, str(repo))
    wt = Path(wd.path)
    assert wt != repo and wt.is_dir() and wd.branch == "elowen/task-1"
    assert git(wt, "rev-parse", "--abbrev-ref", "HEAD").strip() == "elowen/task-1"
    assert wd.writable == (str(repo / ".git"),)  # where the agent's commits are written
    assert (await env.svc.workdir_for(1, str(repo))).path == wd.path  # the same worktree again
    other = await env.svc.workdir_for(2, str(repo))
    assert other.path != wd.path and other.branch == "elowen/task-2"

    commit(wt, {"a.txt": "one\nTWO\nthree\n", "src/new.py": "print('hi')\n"}, "agent: change two")
    (wt / "notes_draft.txt").write_text("uncommitted\n")
    status = await env.svc.status(1)
    assert status["ahead"] == 1 and status["behind"] == 0 and status["dirty"] == ["notes_draft.txt"]
    assert [c["subject"] for c in status["commits"]] == ["agent: change two"]
    diff = await env.svc.diff(1)
    files = {f["path"]: f for f in diff["files"]}
    assert set(files) == {"a.txt", "src/new.py", "notes_draft.txt"}  # commits and uncommitted work
    assert files["a.txt"]["status"] == "M" and (files["a.txt"]["additions"], files["a.txt"]["deletions"]) == (1, 1)
    assert files["src/new.py"]["status"] == "A" and files["notes_draft.txt"]["status"] == "A"
    assert "-two\n+TWO" in diff["patch"] and not diff["truncated"]
    assert git(wt, "status", "--porcelain").strip() == "?? notes_draft.txt"  # the agent's index is untouched
    # the main checkout did not change
    assert (repo / "a.txt").read_text() == "one\ntwo\nthree\n" and git(repo, "status", "--porcelain") == ""


async def test_merge_refuses_uncommitted_work_then_fast_forwards_the_checked_out_base(env: Env, repo: Path) -> None:
    wt = Path((await env.svc.workdir_for(3, str(repo))).path)
    commit(wt, {"a.txt": "one\nTWO\nthree\n"}, "agent work")
    (wt / "later.txt").write_text("not committed\n")
    before = _sha(repo, "main")
    with pytest.raises(GitError) as err:
        await env.svc.merge(3)
    assert err.value.code == "dirty" and err.value.details["files"] == ["later.txt"]
    assert _sha(repo, "main") == before and (wt / "later.txt").exists()  # nothing lost, nothing moved

    result = await env.svc.merge(3, commit_pending=True)
    assert result["fast_forward"] and _sha(repo, "main") == result["commit"]
    assert (repo / "a.txt").read_text() == "one\nTWO\nthree\n" and (repo / "later.txt").exists()  # the checkout follows
    assert git(repo, "status", "--porcelain") == ""
    assert not wt.exists() and "elowen/task-3" not in git(repo, "branch", "--list")
    rec = await env.svc.worktree(3)
    assert rec is not None and rec["state"] == "merged" and rec["merged_commit"] == result["commit"]
    assert {f["path"] for f in (await env.svc.diff(3))["files"]} == {"a.txt", "later.txt"}  # still reviewable
    assert [t for t, _ in env.events] == ["worktree.created", "worktree.merged"]
    with pytest.raises(GitError) as err:
        await env.svc.merge(3)
    assert err.value.code == "not_active"


async def test_merge_commit_when_the_base_moved_on(env: Env, repo: Path) -> None:
    wt = Path((await env.svc.workdir_for(4, str(repo))).path)
    commit(wt, {"feature.txt": "feature\n"}, "agent: feature")
    commit(repo, {"README.md": "hello again\n"}, "someone else on main")
    with pytest.raises(GitError) as err:
        await env.svc.merge(4, mode="ff")
    assert err.value.code == "not_fast_forward"
    base_before = _sha(repo, "main")
    result = await env.svc.merge(4)
    assert not result["fast_forward"]
    parents = git(repo, "rev-list", "--parents", "-n", "1", result["commit"]).split()[1:]
    assert parents[0] == base_before and len(parents) == 2  # a real merge commit on top of main
    assert "Merge task #4: Task 4" in git(repo, "log", "-1", "--format=%s", "main")
    assert (repo / "feature.txt").read_text() == "feature\n" and (repo / "README.md").read_text() == "hello again\n"
    assert git(repo, "status", "--porcelain") == ""


async def test_conflict_is_reported_and_changes_nothing(env: Env, repo: Path) -> None:
    wt = Path((await env.svc.workdir_for(5, str(repo))).path)
    branch_before = commit(wt, {"a.txt": "one\nagent\nthree\n", "ok.txt": "fine\n"}, "agent edits line two")
    base_before = commit(repo, {"a.txt": "one\nhuman\nthree\n"}, "human edits line two")
    with pytest.raises(MergeConflict) as err:
        await env.svc.merge(5)
    assert err.value.files == ["a.txt"] and "a.txt" in err.value.message and "Nothing was changed" in err.value.message
    # nothing changed anywhere: base, branch, both work trees, the record
    assert _sha(repo, "main") == base_before and _sha(repo, "elowen/task-5") == branch_before
    assert (repo / "a.txt").read_text() == "one\nhuman\nthree\n" and git(repo, "status", "--porcelain") == ""
    assert (wt / "a.txt").read_text() == "one\nagent\nthree\n" and git(wt, "status", "--porcelain") == ""
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    rec = await env.svc.worktree(5)
    assert rec is not None and rec["state"] == "active"
    # resolved in the worktree, the merge goes through
    try:
        git(wt, "merge", "-q", "main")
    except Exception:
        pass  # conflicts, as expected
    (wt / "a.txt").write_text("one\nagent and human\nthree\n")
    git(wt, "add", "a.txt")
    git(wt, "commit", "-q", "--no-edit")
    result = await env.svc.merge(5)
    assert (repo / "a.txt").read_text() == "one\nagent and human\nthree\n" and _sha(repo, "main") == result["commit"]


async def test_base_checkout_with_local_changes_is_left_alone(env: Env, repo: Path) -> None:
    wt = Path((await env.svc.workdir_for(6, str(repo))).path)
    commit(wt, {"a.txt": "one\nTWO\nthree\n"}, "agent")
    (repo / "README.md").write_text("my local edit\n")
    before = _sha(repo, "main")
    with pytest.raises(GitError) as err:
        await env.svc.merge(6)
    assert err.value.code == "dirty" and str(repo) in err.value.message
    assert _sha(repo, "main") == before and (repo / "README.md").read_text() == "my local edit\n"
    assert (await env.svc.worktree(6) or {})["state"] == "active"


async def test_base_not_checked_out_moves_by_compare_and_swap(env: Env, repo: Path) -> None:
    wt = Path((await env.svc.workdir_for(7, str(repo))).path)
    commit(wt, {"x.txt": "x\n"}, "agent")
    git(repo, "switch", "-q", "-c", "elsewhere")  # main is checked out nowhere now
    result = await env.svc.merge(7)
    assert _sha(repo, "main") == result["commit"] and git(repo, "show", "main:x.txt") == "x\n"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "elsewhere" and not (repo / "x.txt").exists()


async def test_discard_removes_worktree_and_branch(env: Env, repo: Path) -> None:
    wt = Path((await env.svc.workdir_for(8, str(repo))).path)
    commit(wt, {"x.txt": "x\n"}, "agent")
    before = _sha(repo, "main")
    rec = await env.svc.discard(8)
    assert rec["state"] == "discarded" and not wt.exists() and "elowen/task-8" not in git(repo, "branch", "--list")
    assert _sha(repo, "main") == before
    # a later run of the task starts a fresh worktree from main
    again = await env.svc.workdir_for(8, str(repo))
    assert Path(again.path).is_dir() and not (Path(again.path) / "x.txt").exists()


async def test_project_in_a_subfolder_of_its_repository(env: Env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "mono", {"web/app.js": "1\n", "api/main.py": "2\n"})
    wd = await env.svc.workdir_for(9, str(repo / "web"))
    assert wd.path.endswith("/task-9/web") and (Path(wd.path) / "app.js").exists()


def test_default_root_is_outside_elowens_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from elowen_builtins.git.plugin import worktree_root

    home = tmp_path / "elowen-home"
    ctx = SimpleNamespace(config={"root": ""}, data_dir=home / "plugins" / "git")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = worktree_root(ctx)
    assert root.parent == tmp_path / "state" / "elowen" / "worktrees" and not str(root).startswith(str(home))
    other = worktree_root(SimpleNamespace(config={}, data_dir=tmp_path / "other-home" / "plugins" / "git"))
    assert other != root  # one folder per Elowen home
    assert worktree_root(SimpleNamespace(config={"root": "~/wt"}, data_dir=home)) == Path("~/wt").expanduser()

"""A sandboxed agent may write its repository's git folder (it must, to commit in its task
worktree: ``Workdir.writable``), so ``.git/config``, ``.git/hooks`` and ``.git/info/attributes``
are the agent's to plant. The daemon runs git there *outside* the sandbox (status and diff for
any viewer of the task, merge and discard for its owner, ``worktree add`` at spawn). None of
those git runs may execute a program the repository's config names: hooks, ``core.fsmonitor``,
filter / merge / diff drivers, a signing program. Real git, real SQLite store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from elowen_sdk.services.git import GitError

from .gitrepo import commit, git, make_repo
from .test_worktrees import Env


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def _trap(tmp_path: Path) -> tuple[Path, Path]:
    """A program that records each run of it in ``marker`` (and passes stdin through, so a
    filter that runs still "works")."""
    marker = tmp_path / "ran.txt"
    prog = tmp_path / "evil.sh"
    prog.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    prog.chmod(0o755)
    return prog, marker


def _plant(repo: Path, prog: Path) -> None:
    """What a hostile agent writes into the (shared) git folder of its repository."""
    gitdir = repo / ".git"
    for key, value in {
        "core.fsmonitor": str(prog),
        "filter.ev.clean": str(prog),
        "filter.ev.smudge": str(prog),
        "merge.ev.driver": f"{prog} %O %A %B",
        "diff.ev.textconv": str(prog),
        "diff.ev.command": str(prog),
        "commit.gpgSign": "true",
        "gpg.program": str(prog),
    }.items():
        git(repo, "config", key, value)
    (gitdir / "info").mkdir(exist_ok=True)
    (gitdir / "info" / "attributes").write_text("* filter=ev merge=ev diff=ev\n")
    hooks = gitdir / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-commit", "pre-commit", "post-checkout", "post-merge", "reference-transaction", "commit-msg", "pre-auto-gc"):
        (hooks / hook).write_text(f"#!/bin/sh\necho hook {hook} >> {prog.parent / 'ran.txt'}\n")
        (hooks / hook).chmod(0o755)


async def test_no_git_run_of_the_daemon_executes_what_the_repository_config_names(env: Env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\ntwo\nthree\n"})
    prog, marker = _trap(tmp_path)
    wt = Path((await env.svc.workdir_for(1, str(repo))).path)
    commit(wt, {"a.txt": "one\nTWO\nthree\n"}, "agent: work")
    commit(repo, {"a.txt": "ONE\ntwo\nthree\n"}, "someone else on main")  # a real merge, not a fast-forward
    _plant(repo, prog)  # the agent, inside its sandbox, writes the shared git folder
    (wt / "draft.txt").write_text("uncommitted\n")
    os.utime(wt / "a.txt", (1, 1))  # stat-dirty: status re-reads (and would clean-filter) it

    await env.svc.status(1)
    await env.svc.diff(1)
    await env.svc.workdir_for(2, str(repo))  # another spawn: ``worktree add`` (checkout, smudge, post-checkout)
    try:
        await env.svc.merge(1, commit_pending=True)
    except GitError:
        pass  # refusing the merge is fine; running the agent's program is not
    await env.svc.discard(2)
    assert not marker.exists(), "git run by the daemon executed the agent's program:\n" + marker.read_text()

"""Opening a pull request for a task's branch with the GitHub CLI (``gh``), where one is
installed and logged in: push ``elowen/task-<id>`` to the project's remote, then
``gh pr create --head <branch> --base <base> --title … --body …`` in the task's worktree.

Refusals (:class:`~elowen_sdk.services.git.GitError` codes, each a 409 at the route):
``gh_missing`` (no ``gh`` program: the plugin's ``gh`` config or ``$PATH``),
``gh_unauthenticated`` (``gh auth status`` fails), ``no_remote`` (the repository has no such
remote), ``dirty`` (uncommitted work and ``commit_pending`` not set), ``push_failed``,
``pr_failed``. Nothing is pushed before ``gh`` is found logged in.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from elowen_sdk.services.git import GitError

from .gitcli import git

__all__ = ["GH_TIMEOUT", "find_gh", "open_pr"]

GH_TIMEOUT = 60.0
"""Seconds one ``gh`` or ``git push`` run may take."""
_URL = re.compile(r"https?://\S+")


def find_gh(configured: str | None) -> str | None:
    """The ``gh`` program: ``configured`` (a path or a name on ``$PATH``), else ``gh`` on
    ``$PATH``; ``None`` when there is none."""
    name = (configured or "").strip() or "gh"
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name)


async def _gh(gh: str, args: Sequence[str], cwd: str) -> tuple[int, str, str]:
    env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GIT_TERMINAL_PROMPT": "0", "NO_COLOR": "1", "GH_NO_UPDATE_NOTIFIER": "1"}
    try:
        with trio.fail_after(GH_TIMEOUT):
            proc = await trio.run_process([gh, *args], cwd=cwd, env=env, capture_stdout=True, capture_stderr=True, check=False, stdin=b"")
    except trio.TooSlowError:
        raise GitError("timeout", f"gh {args[0]} took longer than {GH_TIMEOUT:g} s") from None
    except OSError as exc:
        raise GitError("gh_missing", f"the GitHub CLI could not be run ({gh}): {exc}") from None
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


async def open_pr(rec: Mapping[str, Any], *, title: str, body: str, gh_config: str | None, remote: str, commit_pending: bool) -> dict[str, Any]:
    """Push the worktree's branch to ``remote`` and open a PR of it against its base branch.
    ``rec``: the task's active ``task_worktrees`` row. Returns ``{"url", "branch", "base",
    "remote", "pushed": sha}``."""
    gh = find_gh(gh_config)
    if gh is None:
        raise GitError(
            "gh_missing",
            "the GitHub CLI (gh) is not installed or not on PATH: install it (https://cli.github.com) or set `elowen plugin config git gh=/path/to/gh`",
        )
    code, out, err = await _gh(gh, ["auth", "status"], rec["path"])
    if code != 0:
        detail = (err.strip() or out.strip()).splitlines()[-1:] or [""]
        raise GitError("gh_unauthenticated", f"the GitHub CLI is not logged in (`gh auth login` first): {detail[0][:200]}")
    url = await git(["remote", "get-url", remote], rec["path"], check=False)
    if url.code != 0:
        raise GitError("no_remote", f"the repository has no remote {remote!r} to push {rec['branch']} to (`git remote add {remote} URL`)")
    dirty = [e[3:] for e in (await git(["status", "--porcelain", "-z", "--untracked-files=all"], rec["path"])).out.split("\0") if len(e) > 3]
    if dirty and not commit_pending:
        raise GitError(
            "dirty", f"the worktree has {len(dirty)} uncommitted change(s): commit them, or open the PR with commit_pending", details={"files": dirty}
        )
    if dirty:
        email = await git(["config", "user.email"], rec["path"], check=False)
        ident = (
            {}
            if email.out.strip()
            else {
                "GIT_AUTHOR_NAME": "Elowen",
                "GIT_AUTHOR_EMAIL": "elowen@localhost",
                "GIT_COMMITTER_NAME": "Elowen",
                "GIT_COMMITTER_EMAIL": "elowen@localhost",
            }
        )
        await git(["add", "-A", "--", "."], rec["path"])
        await git(["commit", "--no-verify", "-q", "-m", title or "uncommitted work"], rec["path"], env=ident)
    pushed = await git(
        ["push", "--porcelain", "-u", remote, f"refs/heads/{rec['branch']}:refs/heads/{rec['branch']}"], rec["path"], timeout=GH_TIMEOUT, check=False
    )
    if pushed.code != 0:
        raise GitError("push_failed", f"git push {remote} {rec['branch']} failed: {(pushed.err.strip() or pushed.out.strip())[-300:]}")
    sha = (await git(["rev-parse", "HEAD"], rec["path"])).out.strip()
    args = ["pr", "create", "--head", str(rec["branch"]), "--base", str(rec["base"]), "--title", title, "--body", body]
    code, out, err = await _gh(gh, args, rec["path"])
    if code != 0:
        raise GitError("pr_failed", f"gh pr create failed (the branch was pushed): {(err.strip() or out.strip())[-300:]}")
    found = _URL.findall(out)
    return {"url": found[-1] if found else out.strip(), "branch": rec["branch"], "base": rec["base"], "remote": remote, "pushed": sha}

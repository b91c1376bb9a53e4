"""Task worktrees: create one per task at spawn, read what the agent did (status, diff,
commits), merge its branch into the base branch, or discard it. Implements
:class:`elowen_sdk.services.GitService` over the plugin's ``task_worktrees`` table.

Layout: ``<root>/p<project id>/task-<id>`` (root: see :func:`.plugin.worktree_root`) on branch ``elowen/task-<id>``,
made from the project's current branch. A merge never leaves a half-merged state: the merge is
computed in git's object store first (``git merge-tree --write-tree``, which touches no work
tree); a conflict is reported with the conflicting paths and nothing changes. Only a clean
result moves the base branch: a compare-and-swap ``update-ref`` when the base is not checked
out, else ``git merge --ff-only`` in the checkout that has it (which git refuses, untouched,
when that would overwrite local changes).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from elowen_sdk import utc_iso
from elowen_sdk.services.git import GitError, MergeConflict, Workdir

from .gitcli import LOG_FORMAT, diff_args, git, parse_log, parse_name_status, parse_numstat, parse_worktrees

__all__ = ["BRANCH_PREFIX", "MAX_PATCH", "Worktrees"]

log = logging.getLogger("elowen.plugin.git.worktrees")

BRANCH_PREFIX = "elowen/task-"
MAX_PATCH = 2_000_000
"""Characters of patch text returned at most (``truncated`` says when cut)."""
IDENTITY = {"GIT_AUTHOR_NAME": "Elowen", "GIT_AUTHOR_EMAIL": "elowen@localhost", "GIT_COMMITTER_NAME": "Elowen", "GIT_COMMITTER_EMAIL": "elowen@localhost"}
"""Identity of the commits Elowen itself makes (merge commits, "commit pending changes"),
used only where the repository has no ``user.email`` of its own."""


class Worktrees:
    """The ``git`` service. ``store``: the kernel store; ``root``: folder of the worktrees;
    ``config()``: the plugin's config (``worktrees``: ``"auto"``|``"off"``, ``projects``:
    {project name: bool}); ``task_info(task_id)``: ``{"title", "project_id", "project_name"}``
    or ``None``; ``publish(type, data, project_id)``: an event."""

    def __init__(
        self,
        store: Any,
        root: Path,
        config: Callable[[], Mapping[str, Any]],
        task_info: Callable[[int], dict[str, Any] | None],
        publish: Callable[[str, dict[str, Any], int], None],
    ) -> None:
        self.store, self.root, self.config, self.task_info, self.publish = store, root, config, task_info, publish

    # ------------------------------------------------------------------ records

    async def worktree(self, task_id: int) -> dict[str, Any] | None:
        return self.store.query_one("SELECT * FROM task_worktrees WHERE task_id = ?", (int(task_id),))

    def _set(self, task_id: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.store.execute(f"UPDATE task_worktrees SET {cols}, updated_at = ? WHERE task_id = ?", (*fields.values(), utc_iso(), int(task_id)))

    async def _active(self, task_id: int) -> dict[str, Any]:
        rec = await self.worktree(task_id)
        if rec is None:
            raise GitError("no_worktree", f"task #{task_id} has no worktree (its project is not a git repository, or worktrees are off)")
        if rec["state"] != "active":
            raise GitError("not_active", f"task #{task_id}'s worktree was already {rec['state']}")
        return rec

    # ------------------------------------------------------------------ spawn

    def enabled_for(self, project_name: str | None) -> bool:
        cfg = self.config()
        per_project = cfg.get("projects") or {}
        if project_name is not None and isinstance(per_project.get(project_name), bool):
            return bool(per_project[project_name])
        return cfg.get("worktrees", "auto") != "off"

    async def workdir_for(self, task_id: int, project_path: str) -> Workdir:
        info = self.task_info(task_id)
        if info is None or not self.enabled_for(info.get("project_name")):
            return Workdir(project_path)
        rec = await self.worktree(task_id)
        if rec is not None and rec["state"] == "active" and Path(rec["path"]).is_dir():
            return Workdir(self._subdir(rec, project_path), await self._writable(project_path), rec["branch"])
        top = await git(["rev-parse", "--show-toplevel"], project_path, check=False)
        if top.code != 0:
            return Workdir(project_path)  # not a git repository: the agent works in the folder
        head = await git(["symbolic-ref", "--quiet", "--short", "HEAD"], project_path, check=False)
        base_commit = await git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], project_path, check=False)
        if head.code != 0 or base_commit.code != 0:
            log.info("task %s: project %s has no branch with commits (detached or empty): no worktree", task_id, project_path)
            return Workdir(project_path)
        toplevel, base, sha = top.out.strip(), head.out.strip(), base_commit.out.strip()
        branch = f"{BRANCH_PREFIX}{int(task_id)}"
        path = self.root / f"p{int(info['project_id'])}" / f"task-{int(task_id)}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not any(path.iterdir()):
            path.rmdir()
        exists = await git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], toplevel, check=False)
        if not path.exists():
            await git(["worktree", "prune"], toplevel, check=False)
            if exists.code == 0:  # the branch outlived its worktree: check it out again
                await git(["worktree", "add", str(path), branch], toplevel)
            else:
                await git(["worktree", "add", "-b", branch, str(path), base], toplevel)
        now = utc_iso()
        self.store.execute(
            "INSERT INTO task_worktrees (task_id, project_id, repo, path, branch, base, base_commit, state, merged_commit, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'active', NULL, ?, ?) ON CONFLICT (task_id) DO UPDATE SET"
            " repo = excluded.repo, path = excluded.path, branch = excluded.branch, base = excluded.base,"
            " base_commit = excluded.base_commit, state = 'active', merged_commit = NULL, updated_at = excluded.updated_at",
            (int(task_id), int(info["project_id"]), toplevel, str(path), branch, base, sha, now, now),
        )
        self.publish("worktree.created", {"task_id": int(task_id), "branch": branch, "base": base, "path": str(path)}, int(info["project_id"]))
        rec = await self.worktree(task_id)
        assert rec is not None
        return Workdir(self._subdir(rec, project_path), await self._writable(project_path), branch)

    @staticmethod
    def _subdir(rec: Mapping[str, Any], project_path: str) -> str:
        """The project folder's counterpart inside the worktree (a project may be a subfolder
        of its repository)."""
        rel = os.path.relpath(os.path.realpath(project_path), os.path.realpath(rec["repo"]))
        return str(Path(rec["path"]) if rel in (".", "") else Path(rec["path"]) / rel)

    async def _writable(self, project_path: str) -> tuple[str, ...]:
        common = await git(["rev-parse", "--path-format=absolute", "--git-common-dir"], project_path, check=False)
        return (common.out.strip(),) if common.code == 0 and common.out.strip() else ()

    # ------------------------------------------------------------------ reading

    async def _base_point(self, rec: Mapping[str, Any]) -> str:
        """Where the task's work starts: the merge base of its branch and the base branch (so a
        base that moved on does not show up as the task's changes); the recorded base commit
        when the base branch is gone."""
        mb = await git(["merge-base", f"refs/heads/{rec['base']}", "HEAD"], rec["path"], check=False)
        return mb.out.strip() if mb.code == 0 and mb.out.strip() else str(rec["base_commit"])

    async def status(self, task_id: int) -> dict[str, Any]:
        rec = await self.worktree(task_id)
        if rec is None:
            raise GitError("no_worktree", f"task #{task_id} has no worktree")
        out: dict[str, Any] = {**rec, "ahead": 0, "behind": 0, "dirty": [], "commits": []}
        if rec["state"] != "active" or not Path(rec["path"]).is_dir():
            return out
        counts = await git(["rev-list", "--left-right", "--count", f"refs/heads/{rec['base']}...HEAD"], rec["path"], check=False)
        if counts.code == 0 and len(counts.out.split()) == 2:
            behind, ahead = counts.out.split()
            out["ahead"], out["behind"] = int(ahead), int(behind)
        porcelain = await git(["status", "--porcelain", "-z", "--untracked-files=all"], rec["path"])
        out["dirty"] = [entry[3:] for entry in porcelain.out.split("\0") if len(entry) > 3]
        base = await self._base_point(rec)
        commits = await git(["log", f"--format={LOG_FORMAT}", "-n", "100", f"{base}..HEAD"], rec["path"])
        out["commits"] = parse_log(commits.out)
        return out

    async def diff(self, task_id: int) -> dict[str, Any]:
        rec = await self.worktree(task_id)
        if rec is None:
            raise GitError("no_worktree", f"task #{task_id} has no worktree")
        if rec["state"] != "active" or not Path(rec["path"]).is_dir():
            return await self._merged_diff(rec)
        base = await self._base_point(rec)
        # a scratch index holding the work tree as it is (new files too), so the diff covers
        # commits and uncommitted work without touching the agent's own index
        index = self.root / f".index-{int(task_id)}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            await git(["read-tree", "HEAD"], rec["path"], env=env)
            await git(["add", "-A", "--", "."], rec["path"], env=env)
            return await self._diff_of(rec["path"], ["--cached", "-M", base], env)
        finally:
            index.unlink(missing_ok=True)

    async def _merged_diff(self, rec: Mapping[str, Any]) -> dict[str, Any]:
        """A merged task's diff: its merge commit against the base before it (first parent)."""
        if rec["state"] == "merged" and rec.get("merged_commit"):
            sha = str(rec["merged_commit"])
            parents = await git(["rev-list", "--parents", "-n", "1", sha], rec["repo"], check=False)
            ids = parents.out.split()
            before = ids[1] if len(ids) > 2 else str(rec["base_commit"])  # a merge commit, or a fast-forward
            return await self._diff_of(rec["repo"], ["-M", before, sha], None)
        return {"files": [], "patch": "", "truncated": False}

    async def _diff_of(self, cwd: str, args: list[str], env: Mapping[str, str] | None) -> dict[str, Any]:
        numstat = parse_numstat((await git(diff_args("--numstat", "-z", *args), cwd, env=env)).out)
        names = parse_name_status((await git(diff_args("--name-status", "-z", *args), cwd, env=env)).out)
        patch = (await git(diff_args("--no-color", *args), cwd, env=env)).out
        files = [{"path": p, "status": st, "additions": numstat.get(p, (0, 0))[0], "deletions": numstat.get(p, (0, 0))[1]} for st, p in names]
        return {"files": files, "patch": patch[:MAX_PATCH], "truncated": len(patch) > MAX_PATCH}

    # ------------------------------------------------------------------ merge / discard

    async def _identity(self, cwd: str) -> dict[str, str]:
        email = await git(["config", "user.email"], cwd, check=False)
        return {} if email.out.strip() else dict(IDENTITY)

    async def merge(self, task_id: int, *, mode: str = "merge", commit_pending: bool = False) -> dict[str, Any]:
        if mode not in ("merge", "ff"):
            raise GitError("bad_mode", f"merge mode must be 'merge' or 'ff', not {mode!r}")
        rec = await self._active(task_id)
        wt, repo, base, branch = rec["path"], rec["repo"], rec["base"], rec["branch"]
        info = self.task_info(task_id) or {}
        title = str(info.get("title") or "")
        dirty = [e[3:] for e in (await git(["status", "--porcelain", "-z", "--untracked-files=all"], wt)).out.split("\0") if len(e) > 3]
        if dirty and not commit_pending:
            raise GitError(
                "dirty",
                f"the worktree of task #{task_id} has {len(dirty)} uncommitted change(s) ({', '.join(dirty[:5])}{'…' if len(dirty) > 5 else ''}): "
                "commit them in the worktree, or merge with commit_pending to commit them first",
                details={"files": dirty},
            )
        if dirty:
            env = await self._identity(wt)
            await git(["add", "-A", "--", "."], wt)
            await git(["commit", "--no-verify", "-q", "-m", f"Task #{task_id}: {title or 'uncommitted work'}"], wt, env=env)
        base_sha = (await git(["rev-parse", "--verify", f"refs/heads/{base}^{{commit}}"], repo)).out.strip()
        head_sha = (await git(["rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}"], repo)).out.strip()
        up_to_date = (await git(["merge-base", "--is-ancestor", head_sha, base_sha], repo, check=False)).code == 0
        fast_forward = (await git(["merge-base", "--is-ancestor", base_sha, head_sha], repo, check=False)).code == 0
        if up_to_date:
            new_sha = base_sha
        elif fast_forward:
            new_sha = head_sha
        elif mode == "ff":
            raise GitError(
                "not_fast_forward", f"{base} has moved on since task #{task_id} branched: a fast-forward is not possible (merge with a merge commit)"
            )
        else:
            tree = await git(["merge-tree", "--write-tree", "--name-only", "--no-messages", base_sha, head_sha], repo, check=False)
            lines = tree.out.splitlines()
            if tree.code == 1:
                files = [line for line in lines[1:] if line.strip()]
                raise MergeConflict(
                    f"merging {branch} into {base} conflicts in {len(files)} file(s): {', '.join(files[:10])}. Nothing was changed; "
                    f"resolve it in the task's worktree (merge {base} there) or ask the agent, then merge again",
                    files,
                )
            if tree.code != 0 or not lines:
                raise GitError("git_failed", f"git merge-tree: {(tree.err.strip() or tree.out.strip())[:300]}")
            env = await self._identity(repo)
            message = f"Merge task #{task_id}{': ' + title if title else ''} ({branch})"
            new_sha = (await git(["commit-tree", lines[0].strip(), "-p", base_sha, "-p", head_sha, "-m", message], repo, env=env)).out.strip()
        if new_sha != base_sha:
            await self._move_base(repo, base, base_sha, new_sha)
        await self._remove(rec)
        self._set(task_id, state="merged", merged_commit=new_sha)
        result = {
            "task_id": int(task_id),
            "commit": new_sha,
            "base": base,
            "branch": branch,
            "fast_forward": fast_forward or up_to_date,
            "up_to_date": up_to_date,
        }
        self.publish("worktree.merged", result, int(rec["project_id"]))
        return result

    async def _move_base(self, repo: str, base: str, old: str, new: str) -> None:
        """Move ``base`` from ``old`` to ``new`` (a descendant of ``old``)."""
        checked_out = [w for w in parse_worktrees((await git(["worktree", "list", "--porcelain"], repo)).out) if w["branch"] == f"refs/heads/{base}"]
        if not checked_out:
            await git(["update-ref", "-m", "elowen: merge task branch", f"refs/heads/{base}", new, old], repo)
            return
        where = checked_out[0]["path"]
        local = await git(["status", "--porcelain", "--untracked-files=no"], where)
        if local.out.strip():
            raise GitError(
                "dirty",
                f"{base} is checked out in {where} with uncommitted changes: commit or stash them there first (nothing was changed)",
                details={"files": [line[3:] for line in local.out.splitlines()]},
            )
        result = await git(["merge", "--ff-only", "-q", new], where, check=False)
        if result.code != 0:
            raise GitError("git_failed", f"updating {base} in {where} failed, nothing was changed: {(result.err.strip() or result.out.strip())[:300]}")

    async def _remove(self, rec: Mapping[str, Any]) -> None:
        """Remove the worktree folder and the branch (after a merge, or on discard)."""
        if Path(rec["path"]).exists():
            done = await git(["worktree", "remove", "--force", rec["path"]], rec["repo"], check=False)
            if done.code != 0:
                shutil.rmtree(rec["path"], ignore_errors=True)
        await git(["worktree", "prune"], rec["repo"], check=False)
        await git(["branch", "-D", rec["branch"]], rec["repo"], check=False)

    async def open_pr(self, task_id: int, *, title: str, body: str, commit_pending: bool = False) -> dict[str, Any]:
        """Push the task's branch and open a pull request with ``gh`` (see :mod:`.pr`; config
        ``gh``: the program, ``remote``: default ``origin``). Raises :class:`GitError`
        (``gh_missing``, ``gh_unauthenticated``, ``no_remote``, ``dirty``, ``push_failed``,
        ``pr_failed``, ``no_worktree``, ``not_active``)."""
        from .pr import open_pr

        rec = await self._active(task_id)
        cfg = self.config()
        result = await open_pr(
            rec, title=title, body=body, gh_config=str(cfg.get("gh") or ""), remote=str(cfg.get("remote") or "origin"), commit_pending=commit_pending
        )
        result["task_id"] = int(task_id)
        self.publish("worktree.pr_opened", result, int(rec["project_id"]))
        return result

    async def discard(self, task_id: int) -> dict[str, Any]:
        rec = await self._active(task_id)
        await self._remove(rec)
        self._set(task_id, state="discarded")
        self.publish("worktree.discarded", {"task_id": int(task_id), "branch": rec["branch"]}, int(rec["project_id"]))
        out = await self.worktree(task_id)
        assert out is not None
        return out

"""The ``git`` service: each task's own git worktree and branch, and a reader of what the agent
did there (status, diff, commits), offered by the builtin ``git`` plugin.

A consumer declares ``service:git`` (optional: without it, agents work in the project folder)
and asks ``git = ctx.service(GitService)``. Every method is async and bounded in time (git runs
as a subprocess with a deadline).

A *worktree record* is a dict::

    {"task_id": int, "project_id": int, "repo": str (the project folder),
     "path": str (the worktree folder), "branch": "elowen/task-<id>",
     "base": str (the branch it was made from), "base_commit": str (its commit then),
     "state": "active" | "merged" | "discarded", "merged_commit": str | None,
     "created_at": str, "updated_at": str}      # UTC ISO 8601
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..contracts import service_contract
from ..errors import ElowenError

__all__ = ["GitError", "GitService", "MergeConflict", "Workdir"]


class GitError(ElowenError):
    """A git operation failed (``code`` says why: ``not_a_repo``, ``no_worktree``, ``dirty``,
    ``git_failed``, ``timeout``…); ``message`` is meant for the user."""

    def __init__(self, code: str, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


class MergeConflict(GitError):
    """Merging the task's branch would conflict; nothing was changed. ``details["files"]``
    lists the conflicting paths."""

    def __init__(self, message: str, files: list[str]) -> None:
        super().__init__("merge_conflict", message, details={"files": files})
        self.files = files


@dataclass(frozen=True, slots=True)
class Workdir:
    """Where an agent for a task works: ``path`` (its worktree, or the project folder when the
    task has none), ``writable`` (extra folders it must be able to write: the repository's git
    directory for a worktree), ``branch`` (``None`` without a worktree)."""

    path: str
    writable: tuple[str, ...] = ()
    branch: str | None = None


@service_contract("git")
class GitService(Protocol):
    """Task worktrees and the git reader (service ``"git"``)."""

    async def workdir_for(self, task_id: int, project_path: str) -> Workdir:
        """The folder an agent for ``task_id`` starts in: its worktree (created on first use,
        on branch ``elowen/task-<id>`` from the project's current branch) when the project is
        a git repository and worktrees are on for it; else ``project_path`` itself. Never
        raises for a project that is not a repository; raises :class:`GitError` when creating
        the worktree failed."""
        ...

    async def worktree(self, task_id: int) -> dict[str, Any] | None:
        """The task's worktree record (see the module docstring), or ``None``."""
        ...

    async def status(self, task_id: int) -> dict[str, Any]:
        """The worktree record plus ``ahead``/``behind`` (commits against the base branch),
        ``dirty`` (uncommitted paths) and ``commits`` (``[{"sha", "subject", "author",
        "date"}]``, newest first, at most 100). Raises :class:`GitError` (``no_worktree``)."""
        ...

    async def diff(self, task_id: int) -> dict[str, Any]:
        """``{"files": [{"path", "status", "additions", "deletions"}], "patch": str,
        "truncated": bool}``: the base commit against the worktree as it is (commits and
        uncommitted changes, new files included). Raises :class:`GitError`."""
        ...

    async def merge(self, task_id: int, *, mode: str = "merge", commit_pending: bool = False) -> dict[str, Any]:
        """Merge the task's branch into its base branch: ``mode`` ``"merge"`` (a merge commit
        unless a fast-forward suffices) or ``"ff"`` (fast-forward only). Returns ``{"commit",
        "fast_forward": bool}``. Raises :class:`MergeConflict` (nothing changed),
        :class:`GitError` ``dirty`` (uncommitted changes in the worktree and not
        ``commit_pending``, or in the base branch's checkout)."""
        ...

    async def discard(self, task_id: int) -> dict[str, Any]:
        """Remove the task's worktree and delete its branch; returns the record (``state``
        ``"discarded"``)."""
        ...

"""The git plugin's routes (a builtin plugin: mounted at their own paths).

``GET  /tasks/{id}/worktree``   the task's worktree: branch, base, ahead/behind, uncommitted
                                paths, commits (404 ``no_worktree``)
``GET  /tasks/{id}/diff``       files changed (status, additions, deletions) and the unified
                                patch, base → worktree as it is (commits and uncommitted work)
``POST /tasks/{id}/merge``      ``{"mode": "merge"|"ff", "commit_pending": bool}`` → ``{"commit",
                                "fast_forward", …}``; 409 ``merge_conflict`` (``files``),
                                ``dirty``, ``not_fast_forward``, ``task_running``: nothing changed
``POST /tasks/{id}/discard``    remove the worktree and its branch
``POST /tasks/{id}/pr``         ``{"commit_pending": bool}``: push the branch and ``gh pr create``
                                (title: the task's title; body: its description, summary and
                                number) → ``{"url", "branch", "base", "remote", "pushed"}``;
                                409 ``gh_missing``, ``gh_unauthenticated``, ``no_remote``,
                                ``dirty``, ``push_failed``, ``pr_failed``
``GET  /worktrees``             ``?state=active|merged|discarded``: the caller's visible task
                                worktrees with their task's state (the dashboard's "to review")

Reading needs sight of the task's project; merging and discarding follow the one acting rule
(:meth:`elowen_sdk.Principal.may_act`: the task's owner or an admin) and are refused while an
agent may still be working in the worktree (task ``in_progress``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elowen_sdk import HTTPError, Principal, Request, Route
from elowen_sdk.services.git import GitError, MergeConflict
from elowen_sdk.services.tasks import TasksService

from .worktrees import Worktrees

__all__ = ["routes"]

_STATUS = {
    "no_worktree": 404,
    "not_active": 409,
    "dirty": 409,
    "merge_conflict": 409,
    "not_fast_forward": 409,
    "bad_mode": 422,
    "timeout": 409,
    "gh_missing": 409,
    "gh_unauthenticated": 409,
    "no_remote": 409,
    "push_failed": 409,
    "pr_failed": 409,
}


def _error(exc: GitError) -> HTTPError:
    err = HTTPError(_STATUS.get(exc.code, 409), exc.code, exc.message)
    return err


def routes(service: Callable[[], Worktrees], tasks: Callable[[], TasksService]) -> list[Route]:
    """The plugin's routes; ``service()`` is the current :class:`Worktrees`, ``tasks()`` the
    daemon's tasks service."""

    def task_for(me: Principal, raw: str, *, act: bool) -> dict[str, Any]:
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:  # beyond 64 bits: no such task
            raise HTTPError(404, "not_found", f"task {raw} not found")
        task = tasks().exists(int(raw))
        if task is None or not me.can_see_project(task["project_id"]):
            raise HTTPError(404, "not_found", f"task {raw} not found")
        if act and not me.may_act(task["owner_id"], task["project_id"]):
            raise HTTPError(403, "forbidden", "only the task's owner or an admin may do this")
        return task

    async def worktree(req: Request) -> Any:
        task = task_for(req.principal, req.params["id"], act=False)
        try:
            return await service().status(int(task["id"]))
        except GitError as exc:
            raise _error(exc) from None

    async def diff(req: Request) -> Any:
        task = task_for(req.principal, req.params["id"], act=False)
        try:
            return await service().diff(int(task["id"]))
        except GitError as exc:
            raise _error(exc) from None

    async def merge(req: Request) -> Any:
        task = task_for(req.principal, req.params["id"], act=True)
        body = req.json if isinstance(req.json, dict) else {}
        mode, pending = body.get("mode", "merge"), body.get("commit_pending", False)
        if not isinstance(mode, str) or not isinstance(pending, bool) or set(body) - {"mode", "commit_pending"}:
            raise HTTPError(422, "validation_error", 'body: {"mode": "merge"|"ff", "commit_pending": bool}')
        if task["state"] == "in_progress":
            raise HTTPError(
                409, "task_running", f"task #{task['id']} is in progress: its agent may still be working in the worktree (close or cancel it first)"
            )
        try:
            return await service().merge(int(task["id"]), mode=mode, commit_pending=pending)
        except MergeConflict as exc:
            err = _error(exc)
            err.message = exc.message
            raise err from None
        except GitError as exc:
            raise _error(exc) from None

    async def discard(req: Request) -> Any:
        task = task_for(req.principal, req.params["id"], act=True)
        if task["state"] == "in_progress":
            raise HTTPError(409, "task_running", f"task #{task['id']} is in progress: close or cancel it before discarding its worktree")
        try:
            return await service().discard(int(task["id"]))
        except GitError as exc:
            raise _error(exc) from None

    async def open_pr(req: Request) -> Any:
        task = task_for(req.principal, req.params["id"], act=True)
        body = req.json if isinstance(req.json, dict) else {}
        pending = body.get("commit_pending", False)
        if not isinstance(pending, bool) or set(body) - {"commit_pending"}:
            raise HTTPError(422, "validation_error", 'body: {"commit_pending": bool}')
        if task["state"] == "in_progress":
            raise HTTPError(409, "task_running", f"task #{task['id']} is in progress: close or cancel it before opening a PR of its branch")
        full = tasks().get(int(task["id"]))
        parts = [str(full.get("description") or "").strip(), str(full.get("summary") or "").strip(), f"Opened by Elowen for task #{task['id']}."]
        try:
            return await service().open_pr(
                int(task["id"]), title=str(full.get("title") or f"Task #{task['id']}"), body="\n\n".join(p for p in parts if p), commit_pending=pending
            )
        except GitError as exc:
            raise _error(exc) from None

    async def list_worktrees(req: Request) -> Any:
        state = req.query.get("state") or "active"
        if state not in ("active", "merged", "discarded"):
            raise HTTPError(422, "validation_error", "state must be active, merged or discarded")
        rows = service().store.query("SELECT * FROM task_worktrees WHERE state = ? ORDER BY task_id DESC LIMIT 500", (state,))
        items = []
        for row in rows:
            task = tasks().exists(int(row["task_id"]))
            if task is not None and req.principal.can_see_project(task["project_id"]):
                items.append({**row, "task_state": task["state"]})
        return {"items": items, "next_cursor": None}

    return [
        Route("GET", "/worktrees", list_worktrees, summary="Task worktrees (state active by default), newest task first, at most 500"),
        Route("GET", "/tasks/{id}/worktree", worktree, summary="A task's git worktree: branch, commits, uncommitted files"),
        Route("GET", "/tasks/{id}/diff", diff, summary="What a task's agent changed (files and patch)"),
        Route("POST", "/tasks/{id}/merge", merge, summary="Merge a task's branch into its base branch"),
        Route("POST", "/tasks/{id}/discard", discard, summary="Remove a task's worktree and branch"),
        Route("POST", "/tasks/{id}/pr", open_pr, summary="Push a task's branch and open a pull request with gh"),
    ]

"""Reviewing a task's work on its page: the git plugin's worktree record, commits and diff
(``GET /tasks/{id}/worktree`` and ``/diff``) as the ``review`` panel, and the merge and discard
actions (``POST /actions/tasks/<id>/merge|discard|pr``, proxied to the daemon), and "ask the
agent for changes" (``POST /actions/tasks/<id>/request-changes``: the same ``PATCH /tasks/{id}``
``{"state": "open", "resume_note"}`` as ``elowen task reopen ID --note``; the next agent works
in the same worktree, which stays active until merged or discarded).

The unified patch is split into files and hunks here and drawn as a plain, coloured diff
(additions, deletions, hunk headers) that works without script; the page also embeds the patch
(up to :data:`RICH_MAX` characters) as JSON for ``static/review.js``, which draws it with the
vendored diff2html and highlight.js (``static/vendor/README.md``) and hides the plain text. A panel whose plugin is off
(404 from the daemon's plugin routes, ``not_found``) says so; a task without a worktree says why.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, abort, render_template, request

from .common import api, login_required
from .panels import deferred, gather

__all__ = ["bp", "review", "split_patch"]

bp = Blueprint("review", __name__, url_prefix="/actions")

RICH_MAX = 500_000
"""Characters of patch handed to diff2html at most (a longer patch: the plain text only)."""
MAX_LINES = 4000
"""Patch lines drawn on the page at most (the rest: "… more lines")."""


def split_patch(patch: str, limit: int = MAX_LINES) -> tuple[list[dict[str, Any]], int]:
    """``git diff`` text → ``[{"path", "lines": [(kind, text)]}]`` with kind ``hunk``, ``add``,
    ``del``, ``ctx`` or ``meta``; and how many lines were left out past ``limit``."""
    files: list[dict[str, Any]] = []
    shown = hidden = 0
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            files.append({"path": parts[1] if len(parts) == 2 else line[11:], "lines": []})
            continue
        if not files:
            continue
        if shown >= limit:
            hidden += 1
            continue
        if line.startswith("@@"):
            kind = "hunk"
        elif line.startswith(("+++", "---", "index ", "new file", "deleted file", "similarity", "rename ", "old mode", "new mode", "Binary")):
            kind = "meta"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        if kind != "meta":
            files[-1]["lines"].append((kind, line))
            shown += 1
    return files, hidden


async def review(args: dict[str, str]) -> dict[str, Any]:
    """Context of ``partials/review.html``: ``worktree`` (status record or ``None``),
    ``diff``, ``patch_files``, ``hidden_lines``, ``rich_patch`` (the patch for diff2html, or
    ``""``), ``task_state``, ``review_error``, ``review_missing``."""
    tid = args.get("id", "")
    if not tid.isdigit():
        abort(404)
    r = await gather(wt=deferred("GET", f"/tasks/{tid}/worktree"), diff=deferred("GET", f"/tasks/{tid}/diff"), task=deferred("GET", f"/tasks/{tid}"))
    wt, diff = r["wt"], r["diff"]
    code = wt.body.get("error", {}).get("code") if isinstance(wt.body, dict) and isinstance(wt.body.get("error"), dict) else None
    ctx: dict[str, Any] = {"task_id": int(tid), "worktree": None, "diff": None, "patch_files": [], "hidden_lines": 0, "rich_patch": "", "review_error": None}
    ctx["task_state"] = r["task"].body.get("state") if r["task"].ok and isinstance(r["task"].body, dict) else None
    ctx["review_missing"] = wt.status == 404 and code != "no_worktree"
    if wt.ok:
        ctx["worktree"] = wt.body
    elif not ctx["review_missing"] and code != "no_worktree":
        ctx["review_error"] = wt.error_message()
    if diff.ok and isinstance(diff.body, dict):
        ctx["diff"] = diff.body
        patch = str(diff.body.get("patch") or "")
        ctx["patch_files"], ctx["hidden_lines"] = split_patch(patch)
        if not diff.body.get("truncated") and len(patch) <= RICH_MAX:
            ctx["rich_patch"] = patch
    return ctx


async def _flash(reply: Any, ok_text: str) -> Any:
    if reply.ok:
        return await render_template("partials/flash.html", ok=True, text=ok_text), 200, {"X-Elowen-Ok": "1"}
    if reply.status == 404 and not (isinstance(reply.body, dict) and (reply.body.get("error") or {}).get("code") == "no_worktree"):
        return await render_template("partials/flash.html", ok=False, text="Not available: the git plugin is disabled or not installed.")
    return await render_template("partials/flash.html", ok=False, text=reply.error_message())


@bp.post("/tasks/<int:task_id>/merge")
@login_required
async def merge(task_id: int) -> Any:
    """Merge the task's branch (form: ``mode`` merge|ff, ``commit_pending`` on|absent)."""
    form = await request.form
    mode = form.get("mode", "merge")
    if mode not in ("merge", "ff"):
        abort(400)
    reply = await api("POST", f"/tasks/{task_id}/merge", json={"mode": mode, "commit_pending": form.get("commit_pending") == "on"})
    body = reply.body if isinstance(reply.body, dict) else {}
    text = f"Merged into {body.get('base')} as {str(body.get('commit', ''))[:10]}." if reply.ok else ""
    return await _flash(reply, text)


@bp.post("/tasks/<int:task_id>/discard")
@login_required
async def discard(task_id: int) -> Any:
    return await _flash(await api("POST", f"/tasks/{task_id}/discard"), f"The worktree of task #{task_id} and its branch were removed.")


@bp.post("/tasks/<int:task_id>/pr")
@login_required
async def open_pr(task_id: int) -> Any:
    """Push the task's branch and open a pull request with ``gh`` (form: ``commit_pending``)."""
    form = await request.form
    reply = await api("POST", f"/tasks/{task_id}/pr", json={"commit_pending": form.get("commit_pending") == "on"})
    body = reply.body if isinstance(reply.body, dict) else {}
    return await _flash(reply, f"Pull request opened: {body.get('url')}" if reply.ok else "")


@bp.post("/tasks/<int:task_id>/request-changes")
@login_required
async def request_changes(task_id: int) -> Any:
    """Reopen the task with the reviewer's note (form: ``note``, required) for its next agent."""
    note = ((await request.form).get("note") or "").strip()
    if not note:
        return await render_template("partials/flash.html", ok=False, text="Say what should change: the note is what the agent reads.")
    reply = await api("PATCH", f"/tasks/{task_id}", json={"state": "open", "resume_note": note})
    return await _flash(reply, f"Task #{task_id} reopened with your note: its agent continues in the same worktree.")

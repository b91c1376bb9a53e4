"""The proof-of-work receipt of a run: built from the ledger only, never from an agent's prose.

A receipt (JSON, stored with the run and sent back where the work was asked)::

    {"project": int, "title": str, "run": int, "stop_reason": str, "iterations": int,
     "spend": {"tokens": int}, "started_at": str, "ended_at": str,
     "tasks": [{"position": int, "task_id": int, "title": str, "state": str,
                "status": "completed" | "dropped" | "closed_without_evidence" | "not_completed",
                "summary": str | None, "evidence": [str], "evidence_ref": str,
                "attempts": int, "acceptance": [str], "reason": str | None,
                "review": {"branch": str, "state": str, "diff": str} | None}]}

``review``: the task's git worktree branch (the git plugin's record: ``active``, ``merged`` or
``discarded``) and ``diff``, the path of its task page whose "Review the work" panel shows the
diff (``/tasks/<id>#review-h``); ``None`` when the task had no worktree of its own.

``completed`` means the ledger shows the task closed WITH evidence; ``evidence`` is the ledger's
list, copied verbatim. A task closed without evidence is listed as such, never as completed.
"""

from __future__ import annotations

from typing import Any

from elowen_sdk import utc_iso

__all__ = ["build_receipt", "diff_path", "render_receipt"]


def _status(task: dict[str, Any], planned: dict[str, Any]) -> str:
    if task["state"] == "closed":
        return "completed" if task["evidence"] else "closed_without_evidence"
    if planned["dropped"] or task["state"] == "cancelled":
        return "dropped"
    return "not_completed"


def diff_path(task_id: int) -> str:
    """The web path where a task's diff is shown (its page's review panel)."""
    return f"/tasks/{int(task_id)}#review-h"


def build_receipt(
    project: dict[str, Any],
    run: dict[str, Any],
    stop_reason: str,
    spend_tokens: int,
    children: list[tuple[dict[str, Any], dict[str, Any]]],
    worktrees: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The receipt of ``run`` (see the module docstring); ``children``: ``(planned row, ledger
    task record)`` pairs in plan order; ``worktrees``: {task id: the git service's worktree
    record} for the tasks that have one."""
    worktrees = worktrees or {}
    lines = []
    for planned, task in children:
        status = _status(task, planned)
        evidence = [str(e) for e in task.get("evidence") or []] if task["state"] == "closed" else []
        ref = f"task #{task['id']}: " + ("; ".join(evidence) if evidence else "no evidence in the ledger")
        lines.append(
            {
                "position": planned["position"],
                "task_id": task["id"],
                "title": task["title"],
                "state": task["state"],
                "status": status,
                "summary": task.get("summary") if task["state"] == "closed" else None,
                "evidence": evidence,
                "evidence_ref": ref[:2000],
                "attempts": int(task.get("attempts") or 0),
                "acceptance": list(planned.get("acceptance") or []),
                "reason": planned.get("drop_reason") if status == "dropped" else None,
                "review": _review(task["id"], worktrees.get(int(task["id"]))),
            }
        )
    return {
        "project": project["id"],
        "title": project.get("title") or "",
        "run": run["id"],
        "stop_reason": stop_reason,
        "iterations": int(run["iterations"]),
        "spend": {"tokens": int(spend_tokens)},
        "started_at": run["started_at"],
        "ended_at": utc_iso(),
        "tasks": lines,
    }


def _review(task_id: int, wt: dict[str, Any] | None) -> dict[str, Any] | None:
    if not wt or not wt.get("branch"):
        return None
    return {"branch": str(wt["branch"]), "state": str(wt.get("state") or "active"), "diff": diff_path(task_id)}


_MARK = {"completed": "done", "dropped": "DROPPED (not completed)", "closed_without_evidence": "closed WITHOUT evidence", "not_completed": "not completed"}


def render_receipt(receipt: dict[str, Any]) -> str:
    """The receipt as plain text (a notification body, a chat message)."""
    out = [f"Receipt of project #{receipt['project']} {receipt['title']!r}, run {receipt['run']}: stopped — {receipt['stop_reason']}."]
    for line in receipt["tasks"]:
        out.append(f"{line['position']}. [{_MARK[line['status']]}] #{line['task_id']} {line['title']}")
        if line["evidence"]:
            out.extend(f"   evidence: {e}" for e in line["evidence"])
        elif line["status"] != "completed":
            out.append("   evidence: none in the ledger" + (f" ({line['reason']})" if line.get("reason") else ""))
        review = line.get("review")
        if review:
            out.append(f"   diff: {review['diff']} (branch {review['branch']}, {review['state']})")
    out.append(f"Spend: {receipt['spend']['tokens']} tokens over {receipt['iterations']} agent turns.")
    return "\n".join(out)

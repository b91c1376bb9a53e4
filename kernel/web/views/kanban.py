"""The kanban board's panel: one query per column (newest first, paged by the daemon's
cursor) and the per-state counts (``GET /tasks/counts``), with the board's filters taken from
the page's query string, so the board is right at any number of tasks.

Open, in-progress and blocked columns show their first :data:`OPEN_PAGE` cards; Closed and
Cancelled only the last :data:`DONE_PAGE`. Each column ends with a "Show more" control that
fetches the column's next page (``/partials/kanban_more``) when the count says there are more.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from .common import api, me
from .panels import TASK_STATES, deferred, gather

__all__ = ["DONE_PAGE", "FILTERS", "MOVES", "OPEN_PAGE", "filters_of", "kanban", "kanban_more", "move_of"]

DONE_STATES = ("closed", "cancelled")
OPEN_PAGE = 50
"""Cards first shown in the open, in-progress and blocked columns."""
DONE_PAGE = 10
"""Cards first shown in the Closed and Cancelled columns."""
MORE_PAGE = 50
"""Cards each "Show more" adds."""
FILTERS = ("project", "label", "priority", "mission", "owner", "q")
"""Query-string filters of the board (passed on to ``GET /tasks`` and ``/tasks/counts``)."""


MOVES: dict[tuple[str, str], str] = {
    **{(s, "cancelled"): "cancel" for s in ("open", "in_progress", "blocked")},
    **{(s, "open"): "reopen" for s in ("blocked", "closed", "cancelled")},
}
"""The drags the board carries out, (from state, to state) -> the card action it runs
(``/actions/tasks/<id>/<action>``, the same as the card's Cancel and Reopen buttons). Every
other drop is refused with :func:`move_of`'s reason."""


def move_of(src: str, dst: str) -> dict[str, str]:
    """What dropping a ``src`` card on the ``dst`` column does: ``{"action": "cancel"|"reopen"}``
    or ``{"reason": text}`` (why not, and what to do instead; the text follows "Task #N ")."""
    action = MOVES.get((src, dst))
    if action:
        return {"action": action}
    if src == dst:
        return {"reason": "is already here."}
    if dst == "in_progress":
        if src == "open":
            return {"reason": "starts by itself when an agent is free: a task goes in progress when an agent takes it."}
        return {"reason": "cannot be started by a drop: drop it on Open to queue it, and an agent takes it."}
    if dst == "blocked":
        return {"reason": "cannot be blocked by a drop: its agent or the scheduler blocks a task (a question, a missing CLI). Cancel it to stop it."}
    if dst == "closed":
        return {"reason": "cannot be closed by a drop: a task closes with its agent's report when the work is done. Cancel it instead."}
    if src == "in_progress" and dst == "open":
        return {"reason": "is running: its agent works on it. Cancel it to stop it, then reopen it."}
    return {"reason": f"is {src.replace('_', ' ')}: it can only be reopened (drop it on Open)."}


def _moves() -> dict[str, dict[str, dict[str, str]]]:
    """:func:`move_of` for every pair of columns, {from: {to: ...}} (the board's ``data-moves``)."""
    return {s: {d: move_of(s, d) for d in TASK_STATES if d != s} for s in TASK_STATES}


def filters_of(args: dict[str, str]) -> dict[str, str]:
    """The board's filters present (non-empty) in ``args``; numeric ones must be digits (others
    are dropped rather than sent on)."""
    out = {}
    for key in FILTERS:
        value = (args.get(key) or "").strip()
        if not value:
            continue
        if key in ("project", "priority", "mission", "owner") and not value.isdigit():
            continue
        out[key] = value[:200]
    return out


def _query(filters: dict[str, str]) -> str:
    return ("?" + urlencode(filters)) if filters else ""


async def _retry_execs() -> list[str]:
    """The specs a card's "Retry with…" picker offers (what the user may run: see
    :func:`.pages.exec_choices`)."""
    from .pages import exec_choices  # pages imports the panels, which import this module

    reply = await api("GET", "/executors")
    items = reply.body.get("items") if reply.ok and isinstance(reply.body, dict) else None
    return exec_choices([i for i in items or [] if isinstance(i, dict)], me().user.get("allowed_execs"))


async def _signals() -> dict[int, str]:
    """The live screen signal of each running agent, by task id (``{}`` without the agents plugin)."""
    reply = await api("GET", "/sessions", params={"state": "running", "limit": 500})
    return {int(s["task_id"]): str(s.get("signal") or "") for s in reply.items() if s.get("task_id") is not None}


async def kanban(args: dict[str, str]) -> dict[str, Any]:
    """Context of ``partials/kanban.html``: ``columns`` {state: {"items", "count", "next"}},
    ``projects`` {id: name}, ``signals``, ``execs`` (the cards' "Retry with…" choices),
    ``filters``, ``query`` (the filters as a query string), ``moves`` (what a drag between two
    columns does, see :func:`move_of`)."""
    filters = filters_of(args)
    calls = {f"col_{s}": deferred("GET", "/tasks", state=s, order="desc", limit=DONE_PAGE if s in DONE_STATES else OPEN_PAGE, **filters) for s in TASK_STATES}
    r = await gather(
        counts=deferred("GET", "/tasks/counts", **filters),
        projects=deferred("GET", "/projects", limit=500),
        signals=_signals,
        execs=_retry_execs,
        **calls,
    )
    counts = r["counts"].body.get("counts", {}) if r["counts"].ok and isinstance(r["counts"].body, dict) else {}
    columns: dict[str, dict[str, Any]] = {}
    error = None
    for s in TASK_STATES:
        reply = r[f"col_{s}"]
        if not reply.ok:
            error = reply.error_message()
        items = reply.items()
        columns[s] = {"items": items, "count": int(counts.get(s, len(items))), "next": reply.body.get("next_cursor") if reply.ok else None}
    return {
        "columns": columns,
        "projects": {p["id"]: p["name"] for p in r["projects"].items()},
        "signals": r["signals"],
        "execs": r["execs"],
        "filters": filters,
        "query": _query(filters),
        "moves": _moves(),
        "tasks_error": error,
    }


async def kanban_more(args: dict[str, str]) -> dict[str, Any]:
    """Context of ``partials/kanban_more.html``: the next page of one column."""
    state = args.get("state", "")
    if state not in TASK_STATES:
        state = "open"
    filters = filters_of(args)
    r = await gather(
        page=deferred("GET", "/tasks", state=state, order="desc", limit=MORE_PAGE, cursor=args.get("cursor") or None, **filters),
        projects=deferred("GET", "/projects", limit=500),
        signals=_signals,
        execs=_retry_execs,
    )
    reply = r["page"]
    return {
        "state": state,
        "items": reply.items(),
        "next": reply.body.get("next_cursor") if reply.ok else None,
        "projects": {p["id"]: p["name"] for p in r["projects"].items()},
        "signals": r["signals"],
        "execs": r["execs"],
        "filters": filters,
        "query": _query(filters),
        "tasks_error": None if reply.ok else reply.error_message(),
    }

"""Page panels: each is a loader (daemon calls → template context) and a partial template.

Pages render their panels inline; the browser re-fetches one at ``/partials/<name>`` when an
event the panel listens to arrives (``data-live`` on the panel's element, see
``static/live.js``) and after a reconnect (resync). A panel whose daemon route is missing
(plugin disabled or not installed: 404) renders a "not available" notice instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import trio
from quart import Blueprint, abort, render_template, request

from .common import LoggedOut, api, login_required, me

__all__ = ["PANELS", "Panel", "bp", "load", "task_titles", "waited"]

bp = Blueprint("panels", __name__)

TASK_STATES = ("open", "in_progress", "blocked", "closed", "cancelled")
LEVELS = ("L0", "L1", "L2", "L3")


@dataclass(frozen=True, slots=True)
class Panel:
    """A named panel: ``loader(args) -> context`` and its ``template``."""

    loader: Callable[[dict[str, str]], Awaitable[dict[str, Any]]]
    template: str


def _first(group: BaseExceptionGroup) -> BaseException:
    """The exception to re-raise from a failed nursery: a logout wins, then the first."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                walk(sub)
        else:
            leaves.append(e)

    walk(group)
    return next((e for e in leaves if isinstance(e, LoggedOut)), leaves[0])


async def gather(**calls: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """Run the calls concurrently; their results by key. The first failure is re-raised bare
    (not as an exception group) so the app's error handlers see it."""
    out: dict[str, Any] = {}

    async def run(key: str, fn: Callable[[], Awaitable[Any]]) -> None:
        out[key] = await fn()

    try:
        async with trio.open_nursery() as nursery:
            for key, fn in calls.items():
                nursery.start_soon(run, key, fn)
    except BaseExceptionGroup as group:
        raise _first(group) from None
    return out


def deferred(method: str, path: str, **params: Any) -> Callable[[], Awaitable[Any]]:
    return lambda: api(method, path, params=params or None)


# ---------------------------------------------------------------------- loaders


def waited(iso: Any, now: datetime | None = None) -> str:
    """How long ago ``iso`` (UTC ISO 8601) was, for "waiting …": ``"under a minute"``,
    ``"4 min"``, ``"2 h 5 min"``, ``"3 days"``; ``""`` when it does not parse."""
    try:
        then = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return ""
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    minutes = int(((now or datetime.now(UTC)) - then).total_seconds() // 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 48 * 60:
        return f"{minutes // 60} h {minutes % 60} min"
    return f"{minutes // (24 * 60)} days"


async def task_titles(ids: Any) -> dict[int, str]:
    """``{task id: title}`` of up to 50 of ``ids`` (tasks the user may not read are left out)."""
    wanted = sorted({int(i) for i in ids if i})[:50]
    if not wanted:
        return {}
    found = await gather(**{str(i): deferred("GET", f"/tasks/{i}") for i in wanted})
    return {int(k): str(v.body.get("title", "")) for k, v in found.items() if v.ok and isinstance(v.body, dict)}


async def _waiting(titles: bool = False) -> dict[str, Any]:
    """What waits for a human: pending agent decisions, decisions the overseer escalated
    (its ``/escalations``, when the overseer is on) and the brain's approvals; with
    ``titles``, also ``titles`` ({task id: title}) of the decisions' tasks."""
    r = await gather(
        decisions=deferred("GET", "/decisions", status="pending", limit=200),
        escalated=deferred("GET", "/escalations", limit=200),
        approvals=deferred("GET", "/brain/approvals"),
    )
    merged = {d["id"]: d for d in r["escalated"].items()}
    for d in r["decisions"].items():
        merged.setdefault(d["id"], d)
    decisions = [merged[k] for k in sorted(merged)]
    return {
        "titles": await task_titles(d.get("task_id") for d in decisions) if titles else {},
        "decisions": decisions,
        "answer_kinds": ANSWER_KINDS,
        "who": await decider_names(decisions),
        "decisions_missing": r["decisions"].missing and r["escalated"].missing,
        "approvals": r["approvals"].items(),
        "approvals_missing": r["approvals"].missing,
    }


#: Decision kinds answered with text (``POST /decisions/{id}`` ``{"action": "answer", "text"}``):
#: an ``elowen ask`` (``message``: the asker gets the text), a liveness ``check`` (the text is
#: typed into the idle agent) and a ``review``. ``prompt``/``question`` (a CLI's own prompt)
#: take approve, reject or a numbered choice instead (agents plugin, ``service.decide``).
ANSWER_KINDS = ("message", "check", "review")


async def decider_names(decisions: list[dict[str, Any]]) -> dict[str, str]:
    """``decided_by`` values of the form ``user:<id>`` → what to show: admins see user names
    (``GET /users``, admins only; a removed user reads "a removed user"), members see "you" for themselves
    and "another user" for anyone else (they may not list users). Other deciders (the
    overseer, an agent) are left out and shown as they are."""
    ids = {d["decided_by"] for d in decisions if isinstance(d.get("decided_by"), str) and d["decided_by"].startswith("user:")}
    if not ids:
        return {}
    session = me()
    if session.is_admin:
        names = {f"user:{u['id']}": u["name"] for u in (await api("GET", "/users", params={"limit": 500})).items()}
        return {d: names.get(d, "a removed user") for d in ids}
    mine = f"user:{session.user.get('id')}"
    return {d: "you" if d == mine else "another user" for d in ids}


async def badge(_: dict[str, str]) -> dict[str, Any]:
    waiting = await _waiting()
    return {"count": len(waiting["decisions"]) + len(waiting["approvals"])}


async def projects(_: dict[str, str]) -> dict[str, Any]:
    """The projects the user may file tasks in: ``{"projects": {id: name}}`` (the create-task
    form's select; live on ``project.*``)."""
    reply = await api("GET", "/projects", params={"limit": 500})
    return {"projects": {p["id"]: p["name"] for p in reply.items()}}


async def agents(_: dict[str, str]) -> dict[str, Any]:
    """Context of ``partials/agents.html``: ``agents`` (running sessions, each plus ``title``,
    ``project`` (name), ``age`` (since it started, as :func:`waited`)), ``agents_missing``.
    No spend per agent: the coding-agent CLIs bill their own providers and the relay's usage
    (``InferenceService.usage_since``) is instance-wide, so the panel says so."""
    r = await gather(sessions=deferred("GET", "/sessions", state="running"), projects=deferred("GET", "/projects", limit=500))
    reply = r["sessions"]
    items = reply.items()
    wanted = sorted({int(a["task_id"]) for a in items if a.get("task_id")})[:50]
    tasks = await gather(**{str(i): deferred("GET", f"/tasks/{i}") for i in wanted}) if wanted else {}
    names = {p["id"]: p["name"] for p in r["projects"].items()}
    agents = []
    for a in items:
        t = tasks.get(str(a.get("task_id")))
        task = t.body if t is not None and t.ok and isinstance(t.body, dict) else {}
        project = task.get("project_id")
        agents.append(
            {
                **a,
                "title": str(task.get("title") or ""),
                "project": names.get(project, f"project {project}" if project else ""),
                "age": waited(a.get("started_at")),
            }
        )
    return {"agents_missing": reply.missing, "agents": agents}


async def missions(_: dict[str, str]) -> dict[str, Any]:
    reply = await api("GET", "/missions", params={"limit": 100})
    path = reply.body.get("decision_path") if reply.ok and isinstance(reply.body, dict) else None
    return {"missions_missing": reply.missing or not reply.ok, "missions": reply.items(), "levels": LEVELS, "decision_path": path}


async def escalations(_: dict[str, str]) -> dict[str, Any]:
    return await _waiting(titles=True)


async def task(args: dict[str, str]) -> dict[str, Any]:
    tid = args.get("id", "")
    if not tid.isdigit():
        abort(404)
    r = await gather(
        task=deferred("GET", f"/tasks/{tid}"), decisions=deferred("GET", "/decisions", task=tid, limit=100), sessions=deferred("GET", "/sessions", task=tid)
    )
    if r["task"].status == 404:
        abort(404)
    t = r["task"].body if r["task"].ok else None
    sessions = r["sessions"].items()
    running = [s for s in sessions if s.get("state") == "running"]
    session = me()
    can_type = t is not None and (session.is_admin or t.get("owner_id") == session.user.get("id"))
    return {
        "task": t,
        "task_id": int(tid),
        "titles": {int(tid): str(t.get("title", ""))} if t else {},
        "decisions": r["decisions"].items(),
        "decisions_missing": r["decisions"].missing,
        "answer_kinds": ANSWER_KINDS,
        "who": await decider_names(r["decisions"].items()),
        "sessions": sessions,
        "live_session": running[-1]["session"] if running else None,
        "can_type": can_type,
    }


async def plugins(_: dict[str, str]) -> dict[str, Any]:
    reply = await api("GET", "/plugins")
    return {"plugins": reply.items()}


async def tools(_: dict[str, str]) -> dict[str, Any]:
    """Tools offered to the brain now: the ``tool`` contributions of every enabled plugin."""
    enabled = [p["name"] for p in (await api("GET", "/plugins")).items() if p.get("state") == "enabled"]
    replies = await gather(**{name: deferred("GET", f"/plugins/{name}") for name in enabled})
    found: dict[str, list[str]] = {}
    for name, reply in replies.items():
        if reply.ok:
            names = [c["name"] for c in reply.body.get("contributions", []) if c.get("kind") == "tool"]
            if names:
                found[name] = sorted(names)
    return {"tools": [(p, found[p]) for p in sorted(found)]}


async def users(_: dict[str, str]) -> dict[str, Any]:
    if not me().is_admin:
        return {"users": [], "users_forbidden": True}
    r = await gather(users=deferred("GET", "/users", limit=500), projects=deferred("GET", "/projects", limit=500))
    return {
        "users": r["users"].items(),
        "users_forbidden": r["users"].status == 403,
        "all_projects": {p["id"]: p["name"] for p in r["projects"].items()},
        "me_id": me().user.get("id"),
    }


PANELS: dict[str, Panel] = {
    "badge": Panel(badge, "partials/badge.html"),
    "projects": Panel(projects, "partials/projects.html"),
    "agents": Panel(agents, "partials/agents.html"),
    "missions": Panel(missions, "partials/missions.html"),
    "escalations": Panel(escalations, "partials/escalations.html"),
    "task": Panel(task, "partials/task.html"),
    "plugins": Panel(plugins, "partials/plugins.html"),
    "tools": Panel(tools, "partials/tools.html"),
    "users": Panel(users, "partials/users.html"),
}


# the board's loaders live in .kanban (they use gather/deferred above)
from . import kanban as _board  # noqa: E402

PANELS["kanban"] = Panel(_board.kanban, "partials/kanban.html")
PANELS["kanban_more"] = Panel(_board.kanban_more, "partials/kanban_more.html")
from . import review as _review  # noqa: E402

PANELS["review"] = Panel(_review.review, "partials/review.html")
from . import needs as _needs  # noqa: E402

PANELS["needs"] = Panel(_needs.needs, "partials/needs.html")
from . import checklist as _checklist  # noqa: E402

PANELS["checklist"] = Panel(_checklist.checklist, "partials/checklist.html")
from . import mcp as _mcp  # noqa: E402

PANELS["mcp_servers"] = Panel(_mcp.mcp_servers, "partials/mcp_servers.html")
PANELS["mcp_tools"] = Panel(_mcp.mcp_tools, "partials/mcp_tools.html")
from . import memories as _memories  # noqa: E402

PANELS["memories"] = Panel(_memories.memories, "partials/memories.html")
PANELS["memory_history"] = Panel(_memories.history, "partials/memory_history.html")


async def load(*names: str, args: dict[str, str] | None = None) -> dict[str, Any]:
    """The merged context of several panels, loaded concurrently."""
    loaded = await gather(**{name: (lambda n=name: PANELS[n].loader(args or {})) for name in names})
    out: dict[str, Any] = {}
    for name in names:
        out.update(loaded[name])
    return out


@bp.get("/partials/<name>")
@login_required
async def partial(name: str) -> str:
    """One panel's HTML (for htmx refreshes)."""
    panel = PANELS.get(name)
    if panel is None:
        abort(404)
    args = dict(request.args.items())
    return await render_template(panel.template, **await panel.loader(args), args=args)

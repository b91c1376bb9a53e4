"""Plugin glue: the ``intake`` hook, the executor's ambient tick (``core-loop.tick``), the
``/core-loop/…`` routes, and where pulses and receipts go (the notify service when one is
enabled, and always a ``core_loop.pulse`` / ``core_loop.receipt`` event on the bus).

Disabling the plugin cancels its nursery: the planner calls and executor runs stop; their
state is in the store (runs resume, with their counts, when it is enabled again).
"""

from __future__ import annotations

import logging
from typing import Any

from elowen_sdk import HTTPError, Loop, Route, hookimpl
from elowen_sdk.services import NotifyService

from .executor import ProjectExecutor
from .intake import Intake
from .projects import ProjectError, Projects
from .receipt import render_receipt
from .settings import Settings

__all__ = ["CoreLoop", "intake", "on_load", "on_unload", "register_loops", "register_routes"]

log = logging.getLogger("elowen.plugin.core-loop")


class CoreLoop:
    """The plugin's parts for one enable."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.projects = Projects(ctx, self.settings)
        self.executor = ProjectExecutor(ctx, self.projects, self.settings, self.report)
        self.intake = Intake(ctx, self.projects, self.settings, self.plan_soon)

    def settings(self) -> Settings:
        return Settings.from_config(self.ctx.config)

    def plan_soon(self, pid: int) -> None:
        self.ctx.start_soon(self._plan, pid, name=f"core-loop.plan.{pid}")

    async def _plan(self, pid: int) -> None:
        project = await self.projects.plan(pid)
        if project["state"] == "failed":
            await self._tell(project, "Planning failed", f"Project #{pid}: {project['error']}")
            return
        tree = self.projects.tree(pid)
        lines = [f"{t['position']}. [{t['plan_priority']}] #{t['id']} {t['title']}" for t in tree["tasks"]]
        ask = (
            '\nReply "approve plan" (or use `elowen core-loop approve`) to start it; edit tasks before approving.'
            if project["state"] == "awaiting_approval"
            else ""
        )
        await self._tell(project, f"Plan ready: {project['title']}", "\n".join(lines) + ask)

    async def report(self, kind: str, project: dict[str, Any], payload: dict[str, Any]) -> None:
        """A pulse or a receipt: an event on the bus, and a notification to the asker."""
        self.ctx.publish(
            f"core_loop.{kind}", {"project": project["id"], "conversation_id": project["conversation_id"], **payload}, project_id=project["ledger_project"]
        )
        if kind == "pulse":
            await self._tell(project, "Progress", payload["text"])
        else:
            await self._tell(project, f"Receipt: {project['title']}", render_receipt(payload))

    async def _tell(self, project: dict[str, Any], title: str, body: str) -> None:
        if project.get("user_id") is None:
            return
        try:
            notify: NotifyService = self.ctx.service(NotifyService)
        except LookupError:
            return
        try:
            await notify.notify(int(project["user_id"]), title[:60], body[:4000], url=f"/tasks/{project['task_id']}" if project.get("task_id") else None)
        except (LookupError, ValueError) as exc:
            log.warning("core-loop project %s: notification not sent: %s", project["id"], exc)

    # -- routes -----------------------------------------------------------------------------

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/core-loop/projects", self._list, "Core-loop projects of the caller (all for an admin)"),
            Route("GET", "/core-loop/projects/{id}", self._show, "A project, its plan tree and runs"),
            Route("POST", "/core-loop/projects/{id}/approve", self._approve, "Approve a plan waiting for approval"),
            Route("POST", "/core-loop/projects/{id}/run", self._rerun, "Start a new run of a stopped project"),
            Route("GET", "/core-loop/projects/{id}/receipt", self._receipt, "The receipt of the project's latest ended run"),
            Route("PATCH", "/core-loop/tasks/{id}", self._edit, "Edit a held planned task (title, description, acceptance, priority, depends_on)"),
        ]

    @staticmethod
    def _who(request: Any) -> tuple[int | None, bool]:
        principal = request.principal
        if principal.scope != "full":
            raise HTTPError(403, "forbidden", "agent tokens cannot act on core-loop projects")
        return principal.user_id, principal.role == "admin"

    @staticmethod
    def _id(request: Any) -> int:
        raw = str(request.params.get("id", ""))
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:  # "٣" is a digit to Python; 19+ digits overflow SQLite
            raise HTTPError(400, "bad_id", f"not an id: {raw!r}")
        return int(raw)

    def _sight(self, request: Any, pid: int | None) -> None:
        """404 unless the caller still sees the project's ledger project: a member taken off
        that project neither reads nor approves, re-runs or edits the plan they once asked
        for (the acting rule, :meth:`elowen_sdk.Principal.may_act`)."""
        project = self.projects.db.project(pid) if pid is not None else None
        if project is not None and not request.principal.can_see_project(project["ledger_project"]):
            raise HTTPError(404, "not_found", f"no core-loop project {pid}")

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ProjectError as exc:
            raise HTTPError(exc.status if exc.status in (400, 404, 409, 422) else 409, exc.code, str(exc)) from None

    def _list(self, request: Any) -> dict[str, Any]:
        user, admin = self._who(request)
        rows = self.projects.db.projects(user_id=None if admin else user)
        return {"projects": [p for p in rows if request.principal.can_see_project(p["ledger_project"])]}

    def _show(self, request: Any) -> dict[str, Any]:
        user, admin = self._who(request)
        self._sight(request, self._id(request))
        return self._call(self.projects.tree, self._id(request), user, admin=admin)  # type: ignore[no-any-return]

    def _approve(self, request: Any) -> dict[str, Any]:
        user, admin = self._who(request)
        self._sight(request, self._id(request))
        return self._call(self.projects.approve, self._id(request), user, admin=admin)  # type: ignore[no-any-return]

    def _rerun(self, request: Any) -> dict[str, Any]:
        user, admin = self._who(request)
        pid = self._id(request)
        self._sight(request, pid)
        project = self._call(self.projects._own, pid, user, admin)
        if project["state"] != "stopped":
            raise HTTPError(409, "not_stopped", f"project {pid} is {project['state']}: only a stopped project can run again")
        return self.projects.db.update_project(pid, state="approved")

    def _receipt(self, request: Any) -> dict[str, Any]:
        user, admin = self._who(request)
        pid = self._id(request)
        self._sight(request, pid)
        self._call(self.projects._own, pid, user, admin)
        ended = [r for r in self.projects.db.runs(pid) if r["receipt"] is not None]
        if not ended:
            raise HTTPError(404, "no_receipt", f"project {pid} has no ended run yet")
        receipt = ended[-1]["receipt"]
        return {"receipt": receipt, "text": render_receipt(receipt)}

    def _edit(self, request: Any) -> dict[str, Any]:
        user, admin = self._who(request)
        if not isinstance(request.json, dict):
            raise HTTPError(400, "bad_body", "the body must be a JSON object")
        planned = self.projects.db.task(self._id(request))
        self._sight(request, planned["project"] if planned else None)
        return self._call(self.projects.edit_task, self._id(request), request.json, user, admin=admin)  # type: ignore[no-any-return]


_parts: dict[str, CoreLoop] = {}  # plugin name → the parts of the current enable


def _get(ctx: Any) -> CoreLoop:
    parts = _parts.get(ctx.name)
    if parts is None or parts.ctx is not ctx:
        parts = _parts[ctx.name] = CoreLoop(ctx)
    return parts


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    """``core-loop.tick``: the executor's ambient tick (every ``executor_interval`` seconds)."""
    parts = _get(ctx)
    register(Loop("core-loop.tick", parts.settings().executor_interval, parts.executor.tick, run_at_start=True))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    """The ``/core-loop/…`` routes."""
    for route in _get(ctx).routes():
        register(route)


@hookimpl
def intake(ctx: Any, turn: Any) -> Any:
    """Claim a chat message that is a clear unit of work (see :mod:`.intake`)."""
    return _get(ctx).intake.handle(turn)


@hookimpl
def on_load(ctx: Any) -> None:
    """Resume planning of projects a restart interrupted."""
    parts = _get(ctx)
    for project in parts.projects.db.projects(state="planning"):
        parts.plan_soon(project["id"])


@hookimpl
def on_unload(ctx: Any) -> None:
    """Forget this enable's parts (its nursery, with planner calls and runs, is cancelled)."""
    _parts.pop(ctx.name, None)

"""Plugin glue of ``agents``: builds the :class:`~.service.AgentsService` of each enable,
offers its services, registers its loops and routes, runs it in the plugin's nursery and
follows the events it needs.

Services:

* ``agents`` — the :class:`~.service.AgentsService` itself (contract
  :class:`elowen_sdk.services.agents.AgentsService`).
* ``executors`` — :class:`~.executors.Executors`, the executor provider registry and exec
  grammar (contract :class:`elowen_sdk.services.executors.ExecutorsService`; route
  ``GET /executors``).
* ``decisions`` — :class:`~.decide.Decisions` (contract
  :class:`elowen_sdk.services.agents.DecisionsService`): decision paths learn of decisions from
  the ``decision.created`` event and answer with ``await decide(...)``.

Events followed: task events wake the scheduler; the deriver's ``signal`` events are recorded
on the session (``auth_required`` blocks the task).
"""

from __future__ import annotations

from typing import Any

from elowen_sdk import Loop, Service, hookimpl
from elowen_sdk.services import UsersService

from .api import routes
from .config import AgentsConfig
from .executors import routes as executor_routes
from .service import AgentsService

__all__ = ["on_event", "on_load", "on_service", "on_unload", "register_loops", "register_routes", "register_services", "service_for"]

_runtime: dict[str, tuple[Any, AgentsService]] = {}  # plugin name → (its context, its service)

_WAKE_EVENTS = frozenset({"task.created", "task.closed", "task.cancelled"})


def _tokens(ctx: Any) -> tuple[Any, Any]:
    """Agent tokens through the daemon's ``users`` service, resolved at each call; a kernel
    without the daemon has none: its agents get no ``ELOWEN_TOKEN``."""

    def users() -> UsersService | None:
        try:
            return ctx.service(UsersService)
        except LookupError:
            return None

    def create(task_id: int) -> str | None:
        svc = users()
        return None if svc is None else svc.agent_token(task_id)

    def revoke(task_id: int) -> int:
        svc = users()
        return 0 if svc is None else svc.revoke_task_tokens(task_id)

    return (create, revoke)


def service_for(ctx: Any) -> AgentsService:
    """The service of this enable of the plugin (created on first use)."""
    entry = _runtime.get(ctx.name)
    if entry is None or entry[0] is not ctx:
        svc = AgentsService(ctx, AgentsConfig.from_mapping(ctx.config), tokens=_tokens(ctx))
        _runtime[ctx.name] = (ctx, svc)
        return svc
    return entry[1]


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    svc = service_for(ctx)
    register(Service("agents", svc))
    register(Service("decisions", svc.decisions))
    register(Service("executors", svc.executors))


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    svc = service_for(ctx)
    cfg = svc.config
    register(Loop("agents.liveness", cfg.liveness_interval, svc.liveness))
    register(Loop("agents.stuck", cfg.stuck_interval, svc.stuck))
    register(Loop("agents.janitor", cfg.janitor_interval, svc.janitor))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: service_for(ctx)):
        register(route)
    for route in executor_routes(lambda: service_for(ctx).executors):
        register(route)


@hookimpl
def on_load(ctx: Any) -> None:
    """Start the service: it waits for tmux and the task service, re-adopts live agents,
    reconciles dead ones, then schedules."""
    ctx.start_soon(service_for(ctx).run, name="agents.run")


@hookimpl
def on_unload(ctx: Any) -> None:
    """Forget this enable's service; agent sessions keep running in tmux."""
    _runtime.pop(ctx.name, None)


@hookimpl
def on_service(ctx: Any, name: str, available: bool) -> None:
    """A service appeared or is going: the scheduler starts once ``tasks`` is there."""
    entry = _runtime.get(ctx.name)
    if entry is not None and entry[0] is ctx:
        entry[1].service_announced(name, available)


def provides_executors(ctx: Any, plugin: object) -> bool:
    """Whether the enabled plugin ``plugin`` contributes an executor (a provider plugin)."""
    return any(owned.plugin == plugin for owned in ctx.contributions("executor").values())


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    """Wake the scheduler when a task appears, is reopened, or a dependency closes; record the
    deriver's signals; end the agent of a cancelled or deleted task at once; take back the live
    agents of an executor provider plugin that was just enabled."""
    entry = _runtime.get(ctx.name)
    if entry is None or entry[0] is not ctx:
        return
    if event.type == "signal":
        entry[1].lifecycle.on_signal(event.data)
    elif event.type == "plugin.enabled" and provides_executors(ctx, event.data.get("name")):
        if entry[1].ready.is_set():  # before that, run() adopts them all anyway
            entry[1]._start(entry[1].lifecycle.adopt)  # agents of its executors waited for it
    elif event.type in ("task.cancelled", "task.deleted", "task.closed"):
        entry[1]._start(entry[1].lifecycle.janitor)  # end its agent now, not at the next janitor run
        if event.type in _WAKE_EVENTS:
            entry[1].wake()
    elif event.type in _WAKE_EVENTS or (
        event.type == "task.updated" and "state" in event.data.get("changed", ()) and event.data.get("task", {}).get("state") == "open"
    ):
        if event.type == "task.updated":
            entry[1]._start(entry[1].lifecycle.janitor)  # an agent left from before a close and reopen ends first
        entry[1].wake()

"""Plugin glue of ``agents``: builds the :class:`~.service.AgentsService` of each enable,
offers it as services ``agents`` and ``decisions``, registers its loops and routes, runs it in
the plugin's nursery and wakes the scheduler on task events.

Services:

* ``agents`` — the :class:`~.service.AgentsService` itself.
* ``decisions`` — :class:`Decisions`: ``set_gate(gate)``, ``get(id)``, ``list(...)``,
  ``create(kind, ...)``, ``await decide(id, action, ...)`` (the overseer's interface).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from elowen_sdk import Loop, Service, hookimpl

from .api import routes
from .config import AgentsConfig
from .decisions import Gate
from .service import AgentsService

__all__ = ["Decisions", "on_event", "on_load", "on_unload", "register_loops", "register_routes", "register_services", "service_for"]

log = logging.getLogger(__name__)

_runtime: dict[str, tuple[Any, AgentsService]] = {}  # plugin name → (its context, its service)

_WAKE_EVENTS = frozenset({"task.created", "task.closed", "task.cancelled"})


def _tokens(ctx: Any) -> tuple[Any, Any] | None:
    try:
        from elowen.daemon.auth import create_agent_token, revoke_task_tokens
    except ImportError:
        log.warning("agents: no daemon token support; agents get no ELOWEN_TOKEN")
        return None
    return (lambda task_id: create_agent_token(ctx.store, task_id), lambda task_id: revoke_task_tokens(ctx.store, task_id))


def service_for(ctx: Any) -> AgentsService:
    """The service of this enable of the plugin (created on first use)."""
    entry = _runtime.get(ctx.name)
    if entry is None or entry[0] is not ctx:
        svc = AgentsService(ctx, AgentsConfig.from_mapping(ctx.config), tokens=_tokens(ctx))
        _runtime[ctx.name] = (ctx, svc)
        return svc
    return entry[1]


class Decisions:
    """The ``decisions`` service: the decision queue as other plugins see it."""

    def __init__(self, service: AgentsService) -> None:
        self._svc = service

    def set_gate(self, gate: Gate | None) -> None:
        """Install the decision gate (``None`` removes it); see :mod:`.decisions`."""
        self._svc.set_gate(gate)

    def get(self, decision_id: int) -> dict[str, Any] | None:
        return self._svc.decisions.get(decision_id)

    def list(self, **filters: Any) -> list[dict[str, Any]]:
        """``status=``, ``task_id=``, ``kind=``, ``after=``, ``limit=``."""
        return self._svc.decisions.list(**filters)

    def create(self, kind: str, *, task_id: int | None = None, session: str | None = None, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Create a pending decision (e.g. ``review`` or ``message``)."""
        return self._svc.decisions.create(kind, task_id=task_id, session=session, payload=payload or {})

    async def decide(self, decision_id: int, action: str, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`.service.AgentsService.decide`."""
        return await self._svc.decide(decision_id, action, **kwargs)


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    svc = service_for(ctx)
    register(Service("agents", svc))
    register(Service("decisions", Decisions(svc)))


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    svc = service_for(ctx)
    cfg = svc.config
    register(Loop("agents.sweep", cfg.sweep_interval, svc.sweep))
    register(Loop("agents.liveness", cfg.liveness_interval, svc.liveness))
    register(Loop("agents.stuck", cfg.stuck_interval, svc.stuck))
    register(Loop("agents.janitor", cfg.janitor_interval, svc.janitor))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: service_for(ctx)):
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
def on_event(ctx: Any, event: Any) -> None:
    """Wake the scheduler when a task appears, is reopened, or a dependency closes."""
    if event.type in _WAKE_EVENTS or (event.type == "task.updated" and "state" in event.data.get("changed", ()) and event.data.get("task", {}).get("state") == "open"):
        entry = _runtime.get(ctx.name)
        if entry is not None:
            entry[1].wake()

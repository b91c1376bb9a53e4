"""Plugin glue: registers the builtin tools, the ``"brain"`` service, the routes, the
``elowen`` executor, the worker watchdog and the platform loop; on load pauses goals left
active by a restart, starts the brain worker and the chat platforms' adapters (see
:mod:`.channels`), which then follow the ``platform`` contributions (``plugin.*`` events)."""

from __future__ import annotations

import functools
from typing import Any

from elowen_sdk import Executor, Loop, Service, hookimpl

from .api import routes
from .service import BrainService
from .tools import builtin_tools
from .worker import BrainWorker

__all__ = ["on_event", "on_load", "on_unload", "register_executors", "register_loops", "register_routes", "register_services", "register_tools"]

_services: dict[str, BrainService] = {}  # plugin name → the service of the current enable


def _service(ctx: Any) -> BrainService:
    service = _services.get(ctx.name)
    if service is None or service.ctx is not ctx:
        service = _services[ctx.name] = BrainService(ctx)
        service.worker = BrainWorker(service)
    return service


@hookimpl
def register_tools(ctx: Any, register: Any) -> None:
    """The builtin tools: files.*, terminal.run, ask_user, tasks.create, task.close."""
    for tool in builtin_tools():
        register(tool)


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    """``Service("brain", BrainService)``."""
    register(Service("brain", _service(ctx)))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    """The ``/brain/…`` routes (see :mod:`.api`)."""
    for route in routes(_service(ctx)):
        register(route)


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    """``Executor("elowen", BrainWorker)``: tasks with exec ``elowen:<provider>/<model>``."""
    register(Executor("elowen", _service(ctx).worker))


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    """The worker watchdog (every 1/4 of ``worker_stall_timeout``, at most 30 s)."""
    interval = min(30.0, max(0.05, float(ctx.config.get("worker_stall_timeout", 600)) / 4))
    register(Loop("brain.watchdog", interval, _service(ctx).worker.watchdog))
    register(Loop("brain.channels", 5.0, functools.partial(_service(ctx).platforms.reconcile, force=False)))


@hookimpl
def on_load(ctx: Any) -> None:
    """Pause goals a restart left active, expire stale approvals, start the worker loop and
    the platform adapters."""
    service = _service(ctx)
    service.on_start()
    ctx.start_soon(service.worker.run, name="brain.worker")
    service.platforms.reconcile()


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    """Wake the worker when a task is created or reopened; follow platform plugins being
    enabled or disabled."""
    if event.type in ("task.created", "task.updated"):
        service = _services.get(ctx.name)
        if service is not None and service.worker is not None:
            service.worker.wake()
    elif event.type.startswith("plugin."):
        service = _services.get(ctx.name)
        if service is not None and service.ctx is ctx:
            service.platforms.reconcile()


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Forget the service (its nursery, with running turns, workers and platform adapters, is
    already cancelled)."""
    service = _services.pop(ctx.name, None)
    if service is not None:
        service.platforms.stop_all()

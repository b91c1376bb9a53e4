"""Plugin glue of ``notify``: builds the :class:`Runtime` of each enable, offers the ``notify``
service (:class:`~elowen_sdk.services.notify.NotifyService`), serves the ``/notifications``
routes, runs the delivery worker in the plugin's nursery and turns events into
notifications (:mod:`.fanout`).

Events published: ``notify.created`` (``notification``, ``unread``, ``audience: [user_id]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from elowen_sdk import Loop, Service, hookimpl
from elowen_sdk.services.tasks import TasksService
from elowen_sdk.services.users import UsersService

from .api import routes
from .dispatch import DispatchConfig, Dispatcher
from .fanout import Fanout
from .outbox import Outbox
from .service import Notifier
from .webpush import VapidKey

__all__ = ["Runtime", "on_event", "on_load", "on_unload", "register_loops", "register_routes", "register_services", "runtime_for"]

WAITING_INTERVAL = 1.0
"""Seconds between checks of held decisions and approvals (``wait_grace``)."""


@dataclass
class Runtime:
    """Everything one enable of the plugin runs."""

    ctx: Any
    config: Any
    outbox: Outbox
    dispatcher: Dispatcher
    notifier: Notifier
    fanout: Fanout
    client: httpx.AsyncClient


def _service(ctx: Any, contract: Any) -> Any:
    try:
        return ctx.service(contract)
    except LookupError:
        return None


_runtimes: dict[str, Runtime] = {}


def runtime_for(ctx: Any) -> Runtime:
    """The runtime of this enable (created on first use; the VAPID key is loaded or made)."""
    rt = _runtimes.get(ctx.name)
    if rt is None or rt.ctx is not ctx:
        config = ctx.config
        outbox = Outbox(ctx.store)
        vapid = VapidKey(ctx.data_dir, str(config["vapid_subject"])) if config["web_push"] else None
        client = httpx.AsyncClient(timeout=httpx.Timeout(float(config["delivery_timeout"])), follow_redirects=False)
        dispatcher = Dispatcher(outbox, DispatchConfig.from_mapping(config), vapid, client)

        def users() -> Any:
            return _service(ctx, UsersService)

        notifier = Notifier(outbox, dispatcher, users, ctx.publish)
        fanout = Fanout(
            notifier.create, users, lambda: _service(ctx, TasksService), admin_recipients=config["admin_recipients"], wait_grace=float(config["wait_grace"])
        )
        rt = _runtimes[ctx.name] = Runtime(ctx, config, outbox, dispatcher, notifier, fanout, client)
    return rt


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    register(Service("notify", runtime_for(ctx).notifier))


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    register(Loop("notify.waiting", WAITING_INTERVAL, runtime_for(ctx).fanout.sweep))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: runtime_for(ctx)):
        register(route)


@hookimpl
def on_load(ctx: Any) -> None:
    """Start the delivery worker (pending deliveries of earlier runs go out now)."""
    ctx.start_soon(runtime_for(ctx).dispatcher.run, name="notify.dispatch")


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Close the push client (the worker was cancelled with the nursery; what it had not
    delivered stays pending for the next enable)."""
    rt = _runtimes.pop(ctx.name, None)
    if rt is not None:
        await rt.client.aclose()


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    rt = _runtimes.get(ctx.name)
    if rt is None or event.type.startswith("notify."):
        return
    try:
        rt.fanout.on_event(event.type, event.data)
    except Exception:
        ctx.log.exception("notifying of %s %s failed", event.type, event.id)

"""Plugin glue of ``cron``: the ``/cron/*`` routes, the brain tools ``cron.add`` /
``cron.list`` / ``cron.remove`` with the ``before_tool_call`` stamp that tells them who calls
(see :mod:`.tools`), the ticker (started on load in the plugin's nursery, so disabling the
plugin stops it and every run), and the ``user.*`` events that stop the jobs of a deleted or
demoted owner."""

from __future__ import annotations

from typing import Any

from elowen_sdk import hookimpl

from .api import routes
from .runtime import Cron
from .tools import CallerStamp, tools

__all__ = ["before_tool_call", "on_event", "on_load", "on_unload", "register_routes", "register_tools", "runtime_for"]

_runtimes: dict[str, Cron] = {}  # plugin name → the runtime of the current enable
_stamps: dict[str, CallerStamp] = {}  # plugin name → the caller stamp of the current enable


def runtime_for(ctx: Any) -> Cron:
    """The :class:`Cron` runtime of this enable of the plugin (created on first use)."""
    rt = _runtimes.get(ctx.name)
    if rt is None or rt.ctx is not ctx:
        rt = _runtimes[ctx.name] = Cron(ctx)
    return rt


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    """The ``/cron/…`` routes (see :mod:`.api`)."""
    for route in routes(lambda: runtime_for(ctx)):
        register(route)


@hookimpl
def register_tools(ctx: Any, register: Any) -> None:
    """``cron.add``, ``cron.list``, ``cron.remove`` (see :mod:`.tools`)."""
    stamp = _stamps[ctx.name] = CallerStamp()
    for tool in tools(lambda: runtime_for(ctx), stamp):
        register(tool)


@hookimpl
def before_tool_call(ctx: Any, call: Any) -> Any:
    """Stamp the conversation's user onto this plugin's tools."""
    stamp = _stamps.get(ctx.name)
    return stamp.patch(call) if stamp is not None else None


@hookimpl
def on_load(ctx: Any) -> None:
    """Start the ticker (it first recovers runs a restart interrupted)."""
    ctx.start_soon(runtime_for(ctx).supervise, name="cron.ticker")


@hookimpl
def on_unload(ctx: Any) -> None:
    """Forget the runtime (its nursery, ticker and runs are already cancelled)."""
    if _runtimes.get(ctx.name) is not None and _runtimes[ctx.name].ctx is ctx:
        del _runtimes[ctx.name]


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    """``user.updated`` / ``user.removed``: stop the jobs of a demoted or deleted owner."""
    if event.type not in ("user.updated", "user.removed"):
        return
    rt = _runtimes.get(ctx.name)
    user_id = (event.data or {}).get("id")
    if rt is None or rt.ctx is not ctx or not isinstance(user_id, int):
        return
    rt.user_changed(user_id, event.type == "user.removed")

"""The discord plugin's hook implementations: ``Platform("discord", factory)`` (the brain runs
the :class:`.adapter.DiscordAdapter` the factory returns), the ``discord`` notification
surface (:mod:`.surface`), registered with the notify service while both are enabled, and
``turn_context``, which adds the role prompts of a Discord sender's roles to their turn, and
the admin-only server-management brain tools (:mod:`.tools`) with the ``before_tool_call``
stamp that tells them who calls."""

from __future__ import annotations

from typing import Any

from elowen_sdk import Patch, Platform, hookimpl

from .adapter import DiscordAdapter
from .surface import DiscordSurface
from .tools import CallerStamp, tools

__all__ = ["before_tool_call", "on_load", "on_service", "on_unload", "register_platforms", "register_tools", "turn_context"]

_adapters: dict[str, DiscordAdapter] = {}
"""Plugin name → the adapter the brain runs now (set by the factory, cleared when it ends)."""
_stamps: dict[str, CallerStamp] = {}
"""Plugin name → the caller stamp of the current enable."""


@hookimpl
def register_platforms(ctx: Any, register: Any) -> None:
    """``Platform("discord", factory)``: the brain calls ``factory(gateway)``."""

    class _Adapter(DiscordAdapter):
        async def run(self) -> None:
            try:
                await super().run()
            finally:
                if _adapters.get(ctx.name) is self:
                    del _adapters[ctx.name]

    def factory(gateway: Any) -> DiscordAdapter:
        adapter = _Adapter(gateway, ctx)
        _adapters[ctx.name] = adapter
        return adapter

    register(Platform("discord", factory))


@hookimpl
def register_tools(ctx: Any, register: Any) -> None:
    """``discord.list_channels``, ``discord.create_thread``, ``discord.pin_message`` (admins
    only; see :mod:`.tools`)."""
    stamp = _stamps[ctx.name] = CallerStamp()
    for tool in tools(lambda: _adapters.get(ctx.name), stamp, ctx):
        register(tool)


@hookimpl
def before_tool_call(ctx: Any, call: Any) -> Any:
    """Stamp the conversation's user onto this plugin's tools."""
    stamp = _stamps.get(ctx.name)
    return stamp.patch(call) if stamp is not None else None


def _attach(ctx: Any) -> None:
    from elowen_sdk.services.notify import NotifyService

    try:
        ctx.service(NotifyService).register_surface(DiscordSurface(lambda: _adapters.get(ctx.name)))
    except LookupError:
        pass  # notify is off; on_service says when it comes
    except Exception as exc:  # a missing capability grant, say: notifications just do not reach Discord
        ctx.log.warning("cannot register the discord notification surface: %s", exc)


@hookimpl
def on_load(ctx: Any) -> None:
    _attach(ctx)


@hookimpl
def on_service(ctx: Any, name: str, available: bool) -> None:
    if name == "notify" and available:
        _attach(ctx)


@hookimpl
def on_unload(ctx: Any) -> None:
    from elowen_sdk.services.notify import NotifyService

    try:
        ctx.service(NotifyService).unregister_surface("discord")
    except Exception:
        pass  # notify already gone
    _adapters.pop(ctx.name, None)


@hookimpl
def turn_context(ctx: Any, turn: Any) -> Any:
    """The role prompts of the Discord roles of a sender whose Discord turn is running now."""
    adapter = _adapters.get(ctx.name)
    prompts = adapter.role_prompts.get(str(turn.user)) if adapter is not None else None
    if not prompts:
        return None
    return Patch("turn_context", "Guidance for this Discord conversation (from the sender's roles):\n" + "\n".join(f"- {p}" for p in prompts))

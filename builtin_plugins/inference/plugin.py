"""Plugin glue: offers ``Service("inference", Relay)`` (contract
:class:`elowen_sdk.services.InferenceService`) built from the kernel's settings
(``[inference.providers.*]``) and store, serves the ``/providers`` routes (:mod:`.api`), and
closes its connections when disabled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elowen_sdk import Service, hookimpl

from .api import routes
from .relay import Relay

__all__ = ["make_relay", "on_unload", "register_routes", "register_services"]

_relays: dict[str, Relay] = {}  # plugin name → the relay of the current enable


def _settings_snapshot(ctx: Any) -> Mapping[str, Any]:
    """The kernel's current settings document, read at each call so edits apply at once."""
    return ctx.settings


def make_relay(ctx: Any) -> Relay:
    """A :class:`Relay` over the kernel's settings and store, with the plugin's
    ``default_model``."""
    store = ctx.store if ctx.has("store") else None
    updater = ctx.update_settings if ctx.has("settings.write") else None
    return Relay(lambda: _settings_snapshot(ctx), store, default_model=str(ctx.config.get("default_model", "")), settings_updater=updater)


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    """Register ``Service("inference", Relay)``."""
    relay = _relays[ctx.name] = make_relay(ctx)
    register(Service("inference", relay))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    """Register ``GET/POST /providers`` and ``DELETE /providers/{name}`` over this enable's
    relay."""
    for route in routes(lambda: _relays[ctx.name]):
        register(route)


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Close the relay's HTTP connection pools."""
    relay = _relays.pop(ctx.name, None)
    if relay is not None:
        await relay.aclose()

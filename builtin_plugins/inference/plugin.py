"""Plugin glue: offers ``Service("inference", Relay)`` built from the kernel's settings
(``[inference.providers.*]``) and store, and closes its connections when disabled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elowen_sdk import Service, hookimpl

from .relay import Relay

__all__ = ["make_relay", "on_unload", "register_services"]

_relays: dict[str, Relay] = {}  # plugin name → the relay of the current enable


def _settings_snapshot(ctx: Any) -> Mapping[str, Any]:
    """The kernel's current settings document, read at each call so edits apply at once."""
    return ctx.settings


def make_relay(ctx: Any) -> Relay:
    """A :class:`Relay` over the kernel's settings and store, with the plugin's
    ``default_model``."""
    store = ctx.store if ctx.has("store") else None
    return Relay(lambda: _settings_snapshot(ctx), store, default_model=str(ctx.config.get("default_model", "")))


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    """Register ``Service("inference", Relay)``."""
    relay = _relays[ctx.name] = make_relay(ctx)
    register(Service("inference", relay))


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Close the relay's HTTP connection pools."""
    relay = _relays.pop(ctx.name, None)
    if relay is not None:
        await relay.aclose()

"""Plugin glue: offers the ``"tmux"`` service and runs its control client in the plugin's
nursery while the plugin is enabled."""

from __future__ import annotations

from typing import Any

from elowen_sdk import Service, hookimpl

from .server import TmuxService

__all__ = ["make_service", "on_load", "on_unload", "register_services"]

_services: dict[str, TmuxService] = {}  # plugin name → the service of the current enable


def make_service(config: Any) -> TmuxService:
    """A :class:`TmuxService` from the plugin config (keys of ``elowen-plugin.toml``)."""
    pause = float(config.get("pause_after", 5))
    return TmuxService(
        str(config.get("socket", "elowen")),
        width=int(config.get("width", 200)),
        height=int(config.get("height", 50)),
        enter_delay=float(config.get("enter_delay", 0.5)),
        pause_after=pause if pause > 0 else None,
    )


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    """Register ``Service("tmux", TmuxService)`` (built from ``ctx.config``)."""
    service = make_service(ctx.config)
    _services[ctx.name] = service
    register(Service("tmux", service))


@hookimpl
def on_load(ctx: Any) -> None:
    """Start the control client in the plugin's nursery."""
    ctx.require("process.spawn", "run tmux")
    service = _services.get(ctx.name)
    if service is None:  # contributions are registered before on_load; be safe anyway
        service = _services[ctx.name] = make_service(ctx.config)
    ctx.start_soon(service.run, name="tmux.control")


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Detach the control clients; agent sessions keep running."""
    service = _services.pop(ctx.name, None)
    if service is not None:
        await service.aclose()

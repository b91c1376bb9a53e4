"""Plugin glue: offers the ``"tmux"`` service (contract :class:`elowen_sdk.services.TmuxService`;
consumers ask ``ctx.service(TmuxService)`` and catch the errors of :mod:`elowen_sdk.errors`)
and runs its control client in the plugin's nursery while the plugin is enabled."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from elowen_sdk import Service, hookimpl

from .server import TmuxService

__all__ = ["default_socket", "make_service", "on_load", "on_unload", "register_services"]

_services: dict[str, TmuxService] = {}  # plugin name → the service of the current enable


def default_socket(home: Path) -> str:
    """The tmux socket of an Elowen home: ``elowen-`` + 8 hex digits of its resolved path."""
    return "elowen-" + hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:8]


def make_service(config: Any, home: Path | None = None) -> TmuxService:
    """A :class:`TmuxService` from the plugin config (keys of ``elowen-plugin.toml``); an empty
    ``socket`` means :func:`default_socket` of ``home`` (``"elowen"`` without one)."""
    pause = float(config.get("pause_after", 5))
    socket = str(config.get("socket") or "")
    if not socket:
        socket = default_socket(home) if home is not None else "elowen"
    return TmuxService(
        socket,
        width=int(config.get("width", 200)),
        height=int(config.get("height", 50)),
        enter_delay=float(config.get("enter_delay", 0.5)),
        pause_after=pause if pause > 0 else None,
    )


def _home(ctx: Any) -> Path:
    # the plugin's data folder is $ELOWEN_HOME/plugins/<name>
    return Path(ctx.data_dir).parent.parent


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    """Register ``Service("tmux", TmuxService)`` (built from ``ctx.config``)."""
    service = make_service(ctx.config, _home(ctx))
    _services[ctx.name] = service
    register(Service("tmux", service))


@hookimpl
def on_load(ctx: Any) -> None:
    """Start the control client in the plugin's nursery."""
    ctx.require("process.spawn", "run tmux")
    service = _services.get(ctx.name)
    if service is None:  # contributions are registered before on_load; be safe anyway
        service = _services[ctx.name] = make_service(ctx.config, _home(ctx))
    ctx.start_soon(service.run, name="tmux.control")


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Detach the control clients; agent sessions keep running."""
    service = _services.pop(ctx.name, None)
    if service is not None:
        await service.aclose()

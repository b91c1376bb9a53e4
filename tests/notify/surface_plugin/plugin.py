"""A chat-platform-like plugin that receives notifications exactly as docs/notifications.md
tells platform authors: register a surface in ``on_load`` and on ``on_service("notify",
True)``, unregister in ``on_unload``. What it received is kept in :data:`RECEIVED`."""

from __future__ import annotations

from typing import Any

from elowen_sdk import hookimpl
from elowen_sdk.services.notify import Notification, NotifyService

RECEIVED: list[Notification] = []


class EchoSurface:
    name = "echo"

    async def deliver(self, notification: Notification) -> bool:
        RECEIVED.append(notification)
        return True


def _attach(ctx: Any) -> None:
    try:
        ctx.service(NotifyService).register_surface(EchoSurface())
    except LookupError:
        pass


@hookimpl
def on_load(ctx: Any) -> None:
    _attach(ctx)


@hookimpl
def on_service(ctx: Any, name: str, available: bool) -> None:
    if name == "notify" and available:
        _attach(ctx)


@hookimpl
def on_unload(ctx: Any) -> None:
    try:
        ctx.service(NotifyService).unregister_surface("echo")
    except LookupError:
        pass

"""The whatsapp plugin's hook implementations: ``Platform("whatsapp", factory)``; the brain
runs the :class:`.adapter.WhatsAppAdapter` the factory returns."""

from __future__ import annotations

from typing import Any

from elowen_sdk import Platform, hookimpl

from .adapter import WhatsAppAdapter

__all__ = ["register_platforms"]


@hookimpl
def register_platforms(ctx: Any, register: Any) -> None:
    """``Platform("whatsapp", factory)``: the brain calls ``factory(gateway)``."""

    def factory(gateway: Any) -> WhatsAppAdapter:
        return WhatsAppAdapter(gateway, ctx)

    register(Platform("whatsapp", factory))

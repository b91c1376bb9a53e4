"""Test plugin for the ``intake`` hook: claims a message that is exactly ``ping``."""

from __future__ import annotations

from typing import Any

from elowen_sdk import Patch, hookimpl


@hookimpl
def intake(turn: Any) -> Any:
    return Patch("intake", "claimed: pong") if turn.message == "ping" else None

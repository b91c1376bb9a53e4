"""Small helpers every integration test needs: a free loopback port and a bounded wait."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

__all__ = ["free_port", "wait"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(predicate: Callable[[], Any], what: str = "condition", timeout: float = 20.0, on_fail: Callable[[], str] | None = None, *, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned), at most ``timeout``
    seconds; then fail the test naming ``what`` (and ``on_fail()``'s text)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}" + (f"\n{on_fail()}" if on_fail else ""))

"""Small helpers every integration test needs: a free loopback port and a bounded wait."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["free_port", "until", "wait"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(
    predicate: Callable[[], Any], what: str = "condition", timeout: float = 20.0, on_fail: Callable[[], str] | None = None, *, interval: float = 0.05
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned), at most ``timeout``
    seconds; then fail the test naming ``what`` (and ``on_fail()``'s text)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}" + (f"\n{on_fail()}" if on_fail else ""))


async def until(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """The trio version of :func:`wait`: poll every 50 ms without blocking the event loop."""
    with trio.move_on_after(timeout):
        while True:
            value = predicate()
            if value:
                return value
            await trio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")

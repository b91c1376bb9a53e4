"""Fixtures for the tmux plugin tests: a real tmux server on a private, unique socket."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import trio

from elowen_builtins.tmux import TmuxService, open_tmux


@pytest.fixture
def socket_name() -> Iterator[str]:
    """A socket name unique to the test; the server is killed afterwards."""
    name = f"elowen-test-{uuid.uuid4().hex[:10]}"
    yield name
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)
    socket_path(name).unlink(missing_ok=True)  # tmux 3.3a leaves the socket file behind


def socket_path(name: str) -> Path:
    """Where tmux puts the socket of ``-L name``: ``$TMUX_TMPDIR/tmux-UID/name``."""
    return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / name


@pytest.fixture
async def tmux_service(socket_name: str) -> AsyncIterator[TmuxService]:
    """A running service (small panes, short Enter delay so tests stay fast)."""
    async with open_tmux(socket_name, width=100, height=30, enter_delay=0.05) as service:
        yield service


def tmux_cli(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a plain tmux command on the test server (the reference the service is checked against)."""
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=False)


async def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> None:
    """Poll ``predicate`` until true; fail the test after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(interval)
        return
    raise AssertionError(f"condition not met within {timeout}s")


def file_reader(path: Path) -> Callable[[], bytes]:
    """A callable returning the bytes of ``path`` (empty if missing)."""
    return lambda: path.read_bytes() if path.exists() else b""


PYTHON = sys.executable

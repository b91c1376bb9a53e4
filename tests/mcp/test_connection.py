"""``ServerConnection`` against the real stdio test server (``servers/calc_server.py``): which
failures keep the connection and which end and restart it.

The plugin context is a small stand-in (``data_dir``, ``log``, ``start_soon`` on a real trio
nursery): these tests are about the connection, not the kernel, which ``test_client.py``
covers through a real daemon.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen_builtins.mcp_client import connection
from elowen_builtins.mcp_client.config import parse_server
from elowen_builtins.mcp_client.connection import McpToolError, ServerConnection, read_timeout
from elowen_builtins.mcp_client.plugin import _live

SERVER = Path(__file__).parent / "servers" / "calc_server.py"


class _Ctx:
    def __init__(self, nursery: trio.Nursery, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.log = logging.getLogger("elowen.test.mcp")
        self._nursery = nursery

    def start_soon(self, fn: Any, *args: Any, name: str | None = None) -> None:
        self._nursery.start_soon(fn, *args, name=name)


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[_Ctx]:
    async with trio.open_nursery() as nursery:
        yield _Ctx(nursery, tmp_path)
        nursery.cancel_scope.cancel()


def _conn(ctx: _Ctx, mode: str, timeout: float = 20) -> ServerConnection:
    cfg = parse_server("calc", {"command": sys.executable, "args": [str(SERVER), mode], "timeout": timeout})
    return ServerConnection(ctx, cfg, {})


async def test_an_error_answer_keeps_the_connection(ctx: _Ctx) -> None:
    conn = _conn(ctx, "ok")
    assert await conn.call("add", {"a": 1, "b": 2}) == {"result": 3}
    with pytest.raises(McpToolError, match="no_such_tool"):
        await conn.call("no_such_tool", {})  # the server answers a JSON-RPC error
    assert await conn.call("add", {"a": 2, "b": 2}) == {"result": 4}
    assert conn.status()["starts"] == 1 and conn.status()["state"] == "ready"


async def test_a_server_that_dies_mid_call_is_restarted(ctx: _Ctx) -> None:
    conn = _conn(ctx, "crash")
    with pytest.raises(McpToolError, match="failed during boom"):
        await conn.call("boom", {})
    with trio.fail_after(20):
        while conn.status()["starts"] < 2 or conn.status()["state"] != "ready":
            await trio.sleep(0.05)


async def test_a_server_that_never_answers_initialize_fails_and_is_retried(ctx: _Ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "DISCOVER_TIMEOUT", 1.0)
    conn = _conn(ctx, "mute", timeout=1)
    assert read_timeout(conn.cfg) == 1.0
    t0 = time.monotonic()
    with pytest.raises(McpToolError):
        await conn.call("add", {"a": 1, "b": 1})
    assert time.monotonic() - t0 < 5  # the call is bounded by the server's timeout
    # Before the SDK read timeout was set the connection stayed "starting" for good.
    with trio.fail_after(30):
        while conn.status()["starts"] < 2:
            await trio.sleep(0.05)
    assert conn.status()["last_error"]


def test_a_removed_servers_tool_says_so() -> None:
    cfg = parse_server("gone", {"command": "true"})
    with pytest.raises(McpToolError, match="'gone' was removed"):
        _live(cfg, lambda: None)

"""One enable of the ``mcp`` plugin: the lazily started MCP server and the bridge from the
daemon's plugin route (an :class:`elowen_sdk.Request`) to the SDK's ASGI transport.

Nothing here imports the ``mcp`` SDK: :mod:`.server` is imported by the first ``/mcp``
request, so the daemon's cold start does not pay for it. The session manager and every
request's transport task run in the plugin's own nursery (``ctx.start_soon``), so disabling
the plugin ends them.

The bridge: the daemon has already authenticated the bearer token (no token → 401 before
anything here runs); the request becomes an ASGI ``http`` scope carrying the caller
(``scope["elowen.caller"]``), the SDK's transport answers through ``send``, and the answer goes
back as a streamed :class:`elowen_sdk.Response` (``application/json`` or
``text/event-stream``) once the transport started it.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from elowen_sdk import HTTPError, Principal, Request, Response
from elowen_sdk.services import UsersService

from .daemon_api import DaemonApi

__all__ = ["McpRuntime"]

START_TIMEOUT = 30.0
"""Seconds the SDK may take to load and start, and a transport to start its answer."""
_PASS_HEADERS = ("accept", "content-type", "mcp-protocol-version", "mcp-session-id", "last-event-id", "mcp-method", "mcp-name")


class McpRuntime:
    """The MCP server of one plugin enable (``ctx``)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        home = Path(ctx.data_dir).parent.parent  # $ELOWEN_HOME/plugins/<name>/ → $ELOWEN_HOME
        self.api = DaemonApi(home, float(ctx.config.get("call_timeout", 60)))
        self._manager: Any = None
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self._lock = trio.Lock()
        self.requests = 0

    # ---------------------------------------------------------------- state

    @staticmethod
    def sdk_loaded() -> bool:
        """Whether the ``mcp`` SDK is imported in this process."""
        return "mcp" in sys.modules

    def status(self) -> dict[str, Any]:
        return {"sdk_loaded": self.sdk_loaded(), "started": self._ready.is_set(), "requests": self.requests, "stateless": True}

    def _limits(self) -> Any:
        from .server import Limits

        cfg = self.ctx.config
        return Limits(float(cfg.get("ask_timeout", 900)), float(cfg.get("turn_timeout", 600)))

    async def _start(self) -> trio.Nursery:
        async with self._lock:
            if self._nursery is None:
                # the SDK import (~0.7 s), once, off the event loop: other requests go on meanwhile
                server = await trio.to_thread.run_sync(importlib.import_module, f"{__package__}.server")

                self._manager = server.build_manager(self.api, self._limits)

                def started(nursery: trio.Nursery) -> None:
                    self._nursery = nursery
                    self._ready.set()

                self.ctx.start_soon(server.run_manager, self._manager, started, name="mcp.session-manager")
                with trio.fail_after(START_TIMEOUT):
                    await self._ready.wait()
        assert self._nursery is not None
        return self._nursery

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await self.api.aclose()

    # ---------------------------------------------------------------- the caller

    def audiences(self, me: Principal) -> frozenset[str]:
        """``agent`` for agent tokens; else ``person``, ``overseer`` for a mission's parked
        overseer principal, and both for admins (see :mod:`.tools`)."""
        if me.scope == "agent":
            return frozenset({"agent"})
        if me.is_admin:
            return frozenset({"person", "overseer"})
        overseer = False
        if self.ctx.has("service:users") and me.user_id is not None:
            try:
                overseer = self.ctx.service(UsersService).overseer_mission(me.user_id) is not None
            except LookupError:
                overseer = False
        return frozenset({"overseer"}) if overseer else frozenset({"person"})

    # ---------------------------------------------------------------- the bridge

    async def handle(self, req: Request) -> Response:
        """Answer one ``/mcp`` request (``POST`` messages; ``GET``/``DELETE`` get the SDK's
        stateless answers: 405 / no session)."""
        authorization = req.headers.get("authorization", "")
        if req.principal is None or not authorization:
            raise HTTPError(401, "unauthorized", "a bearer token is required")
        from .server import SCOPE_KEY, Caller

        nursery = await self._start()
        self.requests += 1
        caller = Caller(req.principal, authorization, self.audiences(req.principal))
        body = b"" if req.json is None else json.dumps(req.json, ensure_ascii=False).encode("utf-8")
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in req.headers.items() if k in _PASS_HEADERS]
        if req.method == "POST" and "content-type" not in req.headers:
            headers.append((b"content-type", b"application/json"))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": req.method,
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": None,
            "server": None,
            "state": {},
            SCOPE_KEY: caller,
        }
        exchange = _Exchange(body)
        nursery.start_soon(exchange.run, self._manager.handle_request, scope)
        try:
            with trio.fail_after(START_TIMEOUT):
                status, content_type = await exchange.started()
        except BaseException:
            exchange.cancel()
            raise
        return Response(status=status, content_type=content_type, stream=exchange.body())


class _Exchange:
    """One ASGI request/response between the route and the SDK's transport."""

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._sent_body = False
        self._disconnected = trio.Event()
        self._start: tuple[int, str] | None = None
        self._start_event = trio.Event()
        self._send, self._recv = trio.open_memory_channel[bytes | None](64)
        self._scope = trio.CancelScope()

    async def run(self, app: Any, scope: dict[str, Any]) -> None:
        with self._scope:
            try:
                await app(scope, self._receive, self._on_send)
            finally:
                if self._start is None:
                    self._start = (500, "application/json")
                    self._start_event.set()
                with trio.CancelScope(shield=True):
                    try:
                        self._send.send_nowait(None)
                    except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                        pass
                    self._send.close()

    async def _receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._disconnected.wait()
        return {"type": "http.disconnect"}

    async def _on_send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])}
            self._start = (int(message["status"]), headers.get("content-type", "application/json"))
            self._start_event.set()
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            try:
                if chunk:
                    await self._send.send(chunk)
                if not message.get("more_body", False):
                    await self._send.send(None)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._disconnected.set()  # the HTTP client went away

    async def started(self) -> tuple[int, str]:
        await self._start_event.wait()
        assert self._start is not None
        return self._start

    def cancel(self) -> None:
        self._disconnected.set()
        self._scope.cancel()

    async def body(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._recv:
                if chunk is None:
                    break
                yield chunk
        finally:
            self._recv.close()
            self.cancel()

"""One supervised connection to an external MCP server (official ``mcp`` SDK client, 2.3).

* Started on demand: the first tool call starts a supervisor task in the plugin's nursery; it
  opens the connection (spawns the stdio process, or connects to the URL), and reopens it with
  exponential backoff (0.5 s doubling to 30 s) after it failed or broke. Disabling the plugin
  cancels the task, which ends the process (the SDK closes its stdin, then terminates it).
* Never blocks a turn: a call waits at most the server's ``timeout`` (seconds) in all —
  connecting included; a call that times out, or finds the connection closed, breaks it (a
  hung process is ended and restarted) and raises :class:`McpToolError` with a message for the
  model; a JSON-RPC error answer (the server's ``MCPError``) raises it too but keeps the
  connection. Every request, ``initialize`` included, has the SDK's read timeout
  (:func:`read_timeout`). While the server is failing, calls fail at once with the last error.
* The SDK is imported when a connection is first opened, not before.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import trio

from elowen_sdk import ElowenError

from .config import ServerConfig

__all__ = [
    "DISCOVER_TIMEOUT",
    "MAX_BACKOFF",
    "McpToolError",
    "ServerConnection",
    "discover",
    "open_client",
    "read_timeout",
    "resource_snapshot",
    "resource_value",
    "result_value",
    "snapshot",
]

MAX_BACKOFF = 30.0
FIRST_BACKOFF = 0.5
DISCOVER_TIMEOUT = 30.0


class McpToolError(ElowenError):
    """A tool of an external MCP server failed: the server's own error, a timeout, or the
    server not running. The message is meant for the model."""


def read_timeout(cfg: ServerConfig) -> float:
    """Seconds the SDK waits for any one answer, ``initialize`` included: the server's
    ``timeout`` or :data:`DISCOVER_TIMEOUT`, whichever is longer. Without it a server that
    accepts the connection but never answers ``initialize`` would hold its connection in
    "starting" for good (every call would time out, none would restart it)."""
    return max(cfg.timeout, DISCOVER_TIMEOUT)


@contextlib.asynccontextmanager
async def open_client(cfg: ServerConfig, secrets: Mapping[str, str], errlog: Path) -> AsyncIterator[Any]:
    """An entered ``mcp.Client`` for ``cfg``: stdio with ``env`` + its secret env over the SDK's
    minimal inherited set (stderr appended to ``errlog``), or streamable HTTP with ``headers``
    + its secret headers."""
    from mcp import Client

    if cfg.command:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        env = dict(cfg.env) | {k: secrets[k] for k in cfg.secret_env if k in secrets}
        params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env)
        errlog.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(errlog, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as err:
            async with Client(stdio_client(params, errlog=err), read_timeout_seconds=read_timeout(cfg)) as client:
                yield client
    else:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = dict(cfg.headers) | {k: secrets[k] for k in cfg.secret_headers if k in secrets}
        timeout = httpx2.Timeout(min(cfg.timeout, 30.0), read=max(cfg.timeout, 30.0))
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
            assert cfg.url is not None
            async with Client(streamable_http_client(cfg.url, http_client=http), read_timeout_seconds=read_timeout(cfg)) as client:
                yield client


def result_value(result: Any) -> Any:
    """A ``CallToolResult`` as a brain tool result: its structured content, else its text
    (contents joined by blank lines; non-text contents named). Raises :class:`McpToolError`
    for an error result."""
    parts: list[str] = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'content')}]")
    if result.is_error:
        raise McpToolError("\n\n".join(parts) or "the tool failed")
    if result.structured_content is not None:
        return result.structured_content
    return "\n\n".join(parts)


def _no_resources(client: Any) -> bool:
    """Whether the server did not announce the ``resources`` capability."""
    caps = client.server_capabilities
    return caps is None or getattr(caps, "resources", None) is None


def _answered(exc: BaseException) -> bool:
    """Whether ``exc`` is the server's JSON-RPC error answer (the connection is fine), not an
    ``MCPError`` the SDK raises itself: its read timeout (``REQUEST_TIMEOUT``, -32001) or the
    connection closing under the request (``CONNECTION_CLOSED``, -32000; mcp 2.3
    ``jsonrpc_dispatcher``)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if not isinstance(exc, MCPError):
        return False
    return exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        leaves = exc.exceptions
        return "; ".join(_describe(e) for e in leaves[:3])
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


class ServerConnection:
    """The connection to one server, shared by every call of its tools."""

    def __init__(self, ctx: Any, cfg: ServerConfig, secrets: Mapping[str, str], errlog: Path | None = None) -> None:
        self.ctx = ctx
        self.cfg = cfg
        self._secrets = dict(secrets)
        self._errlog = errlog or Path(ctx.data_dir) / "logs" / f"{cfg.name}.stderr.log"
        self._client: Any = None
        self._state = "stopped"  # stopped | starting | ready | failed
        self._changed = trio.Event()
        self._broken = trio.Event()
        self.last_error: str | None = None
        self.starts = 0
        self.calls = 0
        self._scope: trio.CancelScope | None = None
        self._closed = False

    def status(self) -> dict[str, Any]:
        return {"state": self._state, "starts": self.starts, "calls": self.calls, "last_error": self.last_error}

    def _set(self, state: str) -> None:
        self._state = state
        self._changed.set()
        self._changed = trio.Event()

    def close(self) -> None:
        """End the connection for good (its server was removed or changed): the supervisor
        task ends, and with it the server's process."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()
        self._set("stopped")

    async def _supervise(self) -> None:
        with trio.CancelScope() as self._scope:
            if self._closed:
                return
            await self._supervise_loop()

    async def _supervise_loop(self) -> None:
        backoff = FIRST_BACKOFF
        while True:
            self._broken = trio.Event()
            self._set("starting")
            self.starts += 1
            try:
                async with open_client(self.cfg, self._secrets, self._errlog) as client:
                    self._client = client
                    self.last_error = None
                    backoff = FIRST_BACKOFF
                    self._set("ready")
                    await self._broken.wait()
            except Exception as exc:  # the server failed to start or its connection died
                self.last_error = _describe(exc)
                self.ctx.log.warning("MCP server %s: %s", self.cfg.name, self.last_error)
            finally:
                self._client = None
            self._set("failed")
            await trio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _break(self, why: str) -> None:
        self.last_error = why
        self._broken.set()

    async def _ready_client(self) -> Any:
        if self._closed:
            raise McpToolError(f"MCP server {self.cfg.name!r} was removed")
        if self._state == "stopped":
            self._state = "starting"
            self.ctx.start_soon(self._supervise, name=f"mcp-client.{self.cfg.name}")
        while self._state != "ready":
            if self._state == "failed" or self._closed:
                raise McpToolError(f"MCP server {self.cfg.name!r} is not available ({self.last_error}); it is being restarted")
            await self._changed.wait()
        return self._client

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call ``tool`` (the server's own name) within the server's timeout.

        Raises:
            McpToolError: the tool's error result, a timeout, or the server unavailable.
        """
        self.calls += 1
        limit = self.cfg.timeout
        with trio.move_on_after(limit) as scope:
            client = await self._ready_client()
            try:
                result = await client.call_tool(tool, dict(arguments))
            except McpToolError:
                raise
            except Exception as exc:
                if _answered(exc):
                    raise McpToolError(f"MCP server {self.cfg.name!r}: {tool}: {exc}") from None
                why = _describe(exc)
                self._break(why)
                raise McpToolError(f"MCP server {self.cfg.name!r} failed during {tool}: {why}") from None
        if scope.cancelled_caught:
            self._break(f"{tool} timed out after {limit:g} s")
            raise McpToolError(f"MCP server {self.cfg.name!r}: {tool} did not answer within {limit:g} s (the server is restarted)")
        return result_value(result)

    async def _bounded(self, what: str, op: Any) -> Any:
        """``await op(client)`` within the timeout (the connection included); a failure or a
        timeout breaks the connection and raises :class:`McpToolError`."""
        with trio.move_on_after(self.cfg.timeout) as scope:
            client = await self._ready_client()
            try:
                return await op(client)
            except Exception as exc:
                if _answered(exc):
                    raise McpToolError(f"MCP server {self.cfg.name!r}: {what}: {exc}") from None
                why = _describe(exc)
                self._break(why)
                raise McpToolError(f"MCP server {self.cfg.name!r}: {what} failed: {why}") from None
        assert scope.cancelled_caught
        self._break(f"{what} timed out after {self.cfg.timeout:g} s")
        raise McpToolError(f"MCP server {self.cfg.name!r}: {what} did not answer within {self.cfg.timeout:g} s")

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools now as ``{"name", "description", "input_schema"}``, within the
        timeout (raises :class:`McpToolError`)."""

        async def op(client: Any) -> list[dict[str, Any]]:
            return [snapshot(t) for t in (await client.list_tools()).tools]

        result: list[dict[str, Any]] = await self._bounded("tools/list", op)
        return result

    async def list_resources(self) -> list[dict[str, Any]]:
        """The server's resources now as ``{"uri", "name", "description", "mime_type"}``
        (``[]`` when it has none), within the timeout (raises :class:`McpToolError`)."""

        async def op(client: Any) -> list[dict[str, Any]]:
            if _no_resources(client):
                return []
            return [resource_snapshot(r) for r in (await client.list_resources()).resources]

        result: list[dict[str, Any]] = await self._bounded("resources/list", op)
        return result

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """The contents of resource ``uri``: ``[{"uri", "mime_type", "text"}]`` or, for binary
        contents, ``{"uri", "mime_type", "blob_bytes"}`` (the size; the bytes are not passed on),
        within the timeout. Raises :class:`McpToolError` (the server's error included)."""
        self.calls += 1

        async def op(client: Any) -> list[dict[str, Any]]:
            return resource_value(await client.read_resource(uri))

        result: list[dict[str, Any]] = await self._bounded(f"resources/read {uri}", op)
        return result


def resource_snapshot(resource: Any) -> dict[str, Any]:
    """A listed ``mcp_types.Resource`` as JSON (``uri``, ``name``, ``description``, and
    ``mime_type`` if it has one: an instance-wide snapshot goes to ``config.toml``, which has
    no null)."""
    out = {
        "uri": str(resource.uri),
        "name": str(getattr(resource, "name", "") or ""),
        "description": (getattr(resource, "description", None) or "").strip()[:500],
    }
    mime_type = getattr(resource, "mime_type", None)
    return out if mime_type is None else out | {"mime_type": str(mime_type)}


def resource_value(result: Any) -> list[dict[str, Any]]:
    """A ``ReadResourceResult`` as JSON: one entry per content (text, or a blob's size)."""
    out: list[dict[str, Any]] = []
    for item in result.contents or []:
        entry: dict[str, Any] = {"uri": str(item.uri), "mime_type": getattr(item, "mime_type", None)}
        text = getattr(item, "text", None)
        if isinstance(text, str):
            entry["text"] = text
        else:
            entry["blob_bytes"] = len(str(getattr(item, "blob", "") or "")) * 3 // 4
        out.append(entry)
    return out


def _no_nulls(value: Any) -> Any:
    """``value`` without its ``null`` members (dict entries and list items)."""
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value if v is not None]
    return value


def snapshot(tool: Any) -> dict[str, Any]:
    """A listed ``mcp_types.Tool`` as stored in the config snapshot (JSON-safe, and without
    ``null``s — ``"default": null`` of an optional argument, as the Python SDK writes it: an
    instance-wide snapshot goes to ``config.toml``, which has no null)."""
    schema = _no_nulls(json.loads(json.dumps(tool.input_schema or {"type": "object", "properties": {}}, default=str)))
    return {"name": tool.name, "description": (tool.description or "").strip()[:1000], "input_schema": schema}


async def discover(ctx: Any, cfg: ServerConfig, secrets: Mapping[str, str], errlog: Path | None = None) -> dict[str, Any]:
    """List ``cfg``'s tools, and its resources if it has any, over a connection of its own,
    opened and closed within the server's timeout or :data:`DISCOVER_TIMEOUT`, whichever is
    longer (a cold start of a server can take seconds): ``{"tools": [snapshot],
    "resources": [resource_snapshot] | None}`` (``None``: the server lists no resources — the
    SDK's servers announce the capability even without any).
    Raises :class:`McpToolError`."""
    errlog = errlog or Path(ctx.data_dir) / "logs" / f"{cfg.name}.stderr.log"
    limit = max(cfg.timeout, DISCOVER_TIMEOUT)
    resources: list[dict[str, Any]] | None = None
    try:
        with trio.fail_after(limit):
            async with open_client(cfg, secrets, errlog) as client:
                listed = await client.list_tools()
                if not _no_resources(client):
                    resources = [resource_snapshot(r) for r in (await client.list_resources()).resources] or None
    except trio.TooSlowError:
        raise McpToolError(f"MCP server {cfg.name!r} did not list its tools within {limit:g} s") from None
    except Exception as exc:
        raise McpToolError(f"MCP server {cfg.name!r}: {_describe(exc)}") from None
    return {"tools": [snapshot(t) for t in listed.tools], "resources": resources}

"""The MCP protocol side: a low-level ``mcp`` SDK server whose handlers answer per caller.

This module imports the ``mcp`` SDK (~0.7 s), so :mod:`.runtime` imports it on the first
``/mcp`` request only. The SDK's ``MCPServer`` lists one fixed tool set to everyone; the
low-level ``mcp.server.lowlevel.Server`` (same SDK, ``mcp`` 2.3) lets ``tools/list`` answer
what the calling token may use, so it is the one used here.

The caller reaches the handlers through the ASGI scope the daemon's route built
(``scope["elowen.caller"]``, a :class:`Caller`); the SDK hands handlers the HTTP request as
``ctx.request`` (a Starlette ``Request``) on both protocol eras it serves (2025-11-25
``initialize`` handshake and 2026-07-28 ``server/discover``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
import mcp_types as types
import trio
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from elowen_sdk import Principal

from .daemon_api import DaemonApi, RestError
from .tools import Call, ToolSpec, find, tools_for

__all__ = ["SCOPE_KEY", "Caller", "build_manager"]

SCOPE_KEY = "elowen.caller"
RESOURCE_TASK = "elowen://tasks/{id}"
RESOURCE_PROJECT = "elowen://projects/{id}"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who an MCP request comes from: the daemon-resolved principal, the ``Authorization``
    header it came with (forwarded to the REST calls) and its audiences (see :mod:`.tools`)."""

    principal: Principal
    authorization: str
    audiences: frozenset[str]


@dataclass(frozen=True, slots=True)
class Limits:
    """Seconds: ``ask`` and ``brain_chat`` time limits."""

    ask_timeout: float
    turn_timeout: float


def _caller(ctx: Any) -> Caller:
    request = getattr(ctx, "request", None)
    caller = getattr(request, "scope", {}).get(SCOPE_KEY) if request is not None else None
    if not isinstance(caller, Caller):  # only the daemon's /mcp route reaches this server
        raise RestError(401, "unauthorized", "no caller on this MCP request")
    return caller


def _text(value: Any) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False, default=str))]


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, description=spec.description, input_schema=dict(spec.schema))


def _failure(status: int, code: str, message: str) -> types.CallToolResult:
    err = {"error": {"status": status, "code": code, "message": message}}
    return types.CallToolResult(content=_text(err), structured_content=err, is_error=True)


def build_server(api: DaemonApi, limits: Callable[[], Limits]) -> Server[Any]:
    """The low-level server: tools from :mod:`.tools`, resources ``elowen://tasks/{id}`` and
    ``elowen://projects/{id}`` (the JSON of ``GET /tasks/{id}`` / ``GET /projects/{id}``)."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(s) for s in tools_for(_caller(ctx).audiences)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = _caller(ctx)
        spec = find(params.name, caller.audiences)
        if spec is None:
            return _failure(404, "unknown_tool", f"no tool {params.name!r} for this token")
        args = dict(params.arguments or {})
        try:
            jsonschema.validate(args, spec.schema, cls=jsonschema.Draft202012Validator)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
            return _failure(422, "validation_error", f"{where}: {exc.message}")
        lim = limits()
        try:
            result = await spec.run(Call(api, caller.authorization, caller.principal, args, lim.ask_timeout, lim.turn_timeout))
        except RestError as exc:
            return _failure(exc.status, exc.code, exc.message)
        structured = result if isinstance(result, dict) else {"result": result}
        return types.CallToolResult(content=_text(result), structured_content=structured)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        caller = _caller(ctx)
        out: list[types.Resource] = []
        try:
            if caller.principal.scope == "agent" and caller.principal.task_id is not None:
                task = await api.call(caller.authorization, "GET", f"/tasks/{caller.principal.task_id}")
                out.append(types.Resource(uri=f"elowen://tasks/{task['id']}", name=f"task {task['id']}: {task['title']}", mime_type="application/json"))
            elif "person" in caller.audiences:
                page = await api.call(caller.authorization, "GET", "/projects", query={"limit": 200})
                for p in page.get("items", []):
                    out.append(types.Resource(uri=f"elowen://projects/{p['id']}", name=f"project {p['id']}: {p['name']}", mime_type="application/json"))
        except RestError:
            pass  # nothing listable for this token now
        return types.ListResourcesResult(resources=out)

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        _caller(ctx)
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(uri_template=RESOURCE_TASK, name="task", description="A task record (JSON)", mime_type="application/json"),
                types.ResourceTemplate(uri_template=RESOURCE_PROJECT, name="project", description="A project record (JSON)", mime_type="application/json"),
            ]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        caller = _caller(ctx)
        uri = str(params.uri)
        kind, _, raw = uri.removeprefix("elowen://").partition("/")
        if kind not in ("tasks", "projects") or not raw.isdigit() or not uri.startswith("elowen://"):
            raise _mcp_error(f"unknown resource {uri}")
        try:
            record = await api.call(caller.authorization, "GET", f"/{kind}/{int(raw)}")
        except RestError as exc:
            raise _mcp_error(f"{uri}: {exc}") from None
        text = json.dumps(record, ensure_ascii=False, default=str)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)])

    return Server(
        "elowen",
        version="0.1.0",
        instructions="Elowen's tools. Agents: task_get, progress, ask, close act on your own task.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def _mcp_error(message: str) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(code=types.INVALID_PARAMS, message=message)


def build_manager(api: DaemonApi, limits: Callable[[], Limits]) -> StreamableHTTPSessionManager:
    """A stateless streamable HTTP session manager (no MCP session outlives its request, so
    nothing is kept per client and every request is authenticated on its own)."""
    return StreamableHTTPSessionManager(build_server(api, limits), stateless=True)


async def run_manager(manager: StreamableHTTPSessionManager, started: Callable[[Any], None]) -> None:
    """Run ``manager`` (its task group) and a nursery for per-request tasks until cancelled;
    ``started(nursery)`` once both are open."""
    async with manager.run(), trio.open_nursery() as nursery:
        started(nursery)
        await trio.sleep_forever()

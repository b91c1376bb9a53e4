"""Plugin glue of ``mcp``: the routes ``/mcp`` (the MCP endpoint, streamable HTTP) and
``GET /mcp/status``; the server itself starts on the first ``/mcp`` request (:mod:`.runtime`).

``GET /mcp/status`` (any full token): ``{"sdk_loaded": bool, "started": bool, "requests": int,
"stateless": true}`` — whether the ``mcp`` SDK is imported in the daemon yet.
"""

from __future__ import annotations

from typing import Any

from elowen_sdk import HTTPError, Request, Response, Route, hookimpl

from .runtime import McpRuntime

__all__ = ["on_unload", "register_routes"]

_runtimes: dict[int, McpRuntime] = {}


def _runtime(ctx: Any) -> McpRuntime:
    rt = _runtimes.get(id(ctx))
    if rt is None or rt.ctx is not ctx:
        rt = _runtimes[id(ctx)] = McpRuntime(ctx)
    return rt


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    async def endpoint(req: Request) -> Response:
        return await _runtime(ctx).handle(req)

    def status(req: Request) -> dict[str, Any]:
        if req.principal.scope != "full":
            raise HTTPError(403, "agent_scope", "an agent token cannot read the MCP server's status")
        return _runtime(ctx).status()

    for method in ("POST", "GET", "DELETE"):
        register(Route(method, "/mcp", endpoint, summary="The MCP endpoint (streamable HTTP, stateless; bearer token as for REST)"))
    register(Route("GET", "/mcp/status", status, summary="Whether the MCP server has started"))


@hookimpl
async def on_unload(ctx: Any) -> None:
    """The session manager and request tasks end with the plugin's nursery; close the HTTP
    client to the daemon."""
    rt = _runtimes.pop(id(ctx), None)
    if rt is not None:
        await rt.aclose()

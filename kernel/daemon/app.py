"""The quart-trio application: configuration, error handlers and every route group."""

from __future__ import annotations

from typing import Any

import trio
from quart_trio import QuartTrio

from .api import IdConverter, RouteSpec
from .errors import error_response, read_body, register_error_handlers
from .openapi import build_openapi
from .origin import check_request
from .plugin_routes import mount as mount_plugin_routes
from .routes import audit, events, health, plugins, projects, tasks, users
from .state import EXTENSION, DaemonState

__all__ = ["MAX_BODY", "create_app"]

#: Largest accepted request body (bytes); larger ones are answered 413.
MAX_BODY = 1024 * 1024

_GROUPS = (health, users, projects, tasks, plugins, audit, events)


class _App(QuartTrio):
    """QuartTrio whose ``RESPONSE_TIMEOUT`` bounds the handler too (Quart's own only bounds
    sending the response): a handler still running after it, a plugin route's included, is
    cancelled and answered ``504 timeout``. A streamed body (SSE) is exempt: its handler has
    returned by then."""

    async def full_dispatch_request(self, request_context: Any = None) -> Any:
        timeout = self.config["RESPONSE_TIMEOUT"]
        if timeout is None:
            return await super().full_dispatch_request(request_context)
        with trio.move_on_after(float(timeout)):
            return await super().full_dispatch_request(request_context)
        return error_response(504, "timeout", f"the request was not answered within {float(timeout):g} s (ELOWEN_RESPONSE_TIMEOUT); it was cancelled")


def create_app(state: DaemonState, *, max_body: int = MAX_BODY, response_timeout: float = 60.0) -> QuartTrio:
    """The daemon's app over ``state`` (its OpenAPI document is stored in ``state.openapi``).

    ``max_body``: bytes per request body (413 above). ``response_timeout``: seconds a
    handler may take (then ``504 timeout``; SSE streams are exempt).
    """
    app = _App("elowen.daemon")
    app.config.update(MAX_CONTENT_LENGTH=max_body, BODY_TIMEOUT=30, RESPONSE_TIMEOUT=response_timeout)
    app.url_map.converters["id"] = IdConverter
    app.extensions[EXTENSION] = state

    async def count_in(*_: object) -> None:
        state.inflight += 1

    async def count_out(*_: object) -> None:
        state.inflight -= 1

    # Shutdown waits until no request is in flight (server.serve); count from the first byte
    # of the body on, then read the body before anything can answer.
    app.before_request(count_in)
    app.teardown_request(count_out)
    app.before_request(read_body)

    async def guard() -> Any:
        # Host, Origin and JSON-only writes, before any handler (and the login throttle) runs
        from quart import request

        body = await request.get_data(cache=True)
        refused = check_request(state.host_policy, request.method, request.headers, body)
        if refused is not None:
            return error_response(refused.status, refused.code, refused.message)
        return None

    async def guard_websocket() -> Any:
        from quart import websocket

        refused = check_request(state.host_policy, "GET", websocket.headers, None, websocket=True)
        if refused is not None:  # the handshake is answered with this instead of 101
            return error_response(refused.status, refused.code, refused.message)
        return None

    app.before_request(guard)
    app.before_websocket(guard_websocket)
    register_error_handlers(app)
    specs: list[RouteSpec] = []
    for group in _GROUPS:
        specs.extend(group.api.register(app))
    state.openapi = build_openapi(specs)
    state.plugin_router = mount_plugin_routes(app)  # last: the daemon's own routes win over plugin routes
    return app

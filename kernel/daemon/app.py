"""The quart-trio application: configuration, error handlers and every route group."""

from __future__ import annotations

from quart_trio import QuartTrio

from .api import IdConverter, RouteSpec
from .errors import read_body, register_error_handlers
from .openapi import build_openapi
from .plugin_routes import mount as mount_plugin_routes
from .routes import audit, events, health, plugins, projects, tasks, users
from .state import EXTENSION, DaemonState

__all__ = ["MAX_BODY", "create_app"]

#: Largest accepted request body (bytes); larger ones are answered 413.
MAX_BODY = 1024 * 1024

_GROUPS = (health, users, projects, tasks, plugins, audit, events)


def create_app(state: DaemonState, *, max_body: int = MAX_BODY, response_timeout: float = 60.0) -> QuartTrio:
    """The daemon's app over ``state`` (its OpenAPI document is stored in ``state.openapi``).

    ``max_body``: bytes per request body (413 above). ``response_timeout``: seconds a
    response may take (SSE streams are exempt).
    """
    app = QuartTrio("elowen.daemon")
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
    register_error_handlers(app)
    specs: list[RouteSpec] = []
    for group in _GROUPS:
        specs.extend(group.api.register(app))
    state.openapi = build_openapi(specs)
    state.plugin_router = mount_plugin_routes(app)  # last: the daemon's own routes win over plugin routes
    return app

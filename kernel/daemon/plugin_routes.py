"""Serving the HTTP and WebSocket routes that plugins contribute (``register_routes``).

Plugin routes are looked up per request in the kernel's contributions, so they appear and
disappear with the plugin (hot reload, no restart). Mounting: a builtin plugin's route is
served at its ``path`` (``/sessions``); a third-party plugin's under
``/plugins/<plugin name><path>``. The daemon's own routes win over plugin routes.

A third-party plugin's **sync** HTTP handler runs in a worker thread (its ``ctx`` calls are
run on the event loop for it), so a handler that blocks cannot hold the daemon; the response
timeout (``ELOWEN_RESPONSE_TIMEOUT``) abandons it with a 504. A builtin's sync handler runs on
the event loop (trusted code; some feed trio channels, which are not thread-safe).

Every request is authenticated with the bearer token (unless the route is ``anonymous``) and
handed to the plugin as an :class:`elowen_sdk.Request` with an :class:`elowen_sdk.Principal`;
the handler decides what that principal may do.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio
from quart import Quart, request, websocket
from quart import Response as QuartResponse

from elowen_sdk import HTTPError, Principal, Request, Response, Route, WebSocketRoute

from .auth import authenticate
from .errors import error_response
from .state import current

log = logging.getLogger(__name__)

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
_PARAM_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class Compiled:
    """One plugin route as served: its owner, the SDK route, the path regex and the mounted
    path (``/sessions/{id}``, or ``/plugins/<name>/…`` for a third-party plugin)."""

    plugin: str
    route: Route | WebSocketRoute
    pattern: re.Pattern[str]
    mount: str
    threaded: bool = False  # a third party's sync handler: run it in a worker thread


def _compile(plugin: str, route: Route | WebSocketRoute, builtin: bool) -> Compiled:
    mount = route.path if builtin else f"/plugins/{plugin}{route.path}"
    regex = "^" + _PARAM_RE.sub(lambda m: f"(?P<{m.group(1)}>[^/]+)", re.escape(mount).replace(r"\{", "{").replace(r"\}", "}")) + "$"
    return Compiled(plugin, route, re.compile(regex), mount, threaded=not builtin)


class PluginRouter:
    """Matches requests to plugin routes; the table is rebuilt when contributions change."""

    def __init__(self) -> None:
        self._snapshot: object = None
        self._table: list[Compiled] = []

    def table(self) -> list[Compiled]:
        kernel = current().kernel
        snap = kernel.contributions.all("route")
        if snap is not self._snapshot:
            table = []
            for owned in snap.values():
                try:
                    builtin = kernel.registry.get(owned.plugin).source.builtin
                except LookupError:
                    continue
                table.append(_compile(owned.plugin, owned.obj, builtin))
            self._table, self._snapshot = table, snap
        return self._table

    def snapshot(self) -> tuple[object, list[Compiled]]:
        """The contributions snapshot the table was built from, and the table (rebuilt first
        if the contributions changed)."""
        table = self.table()
        return self._snapshot, table

    def match(self, path: str, *, websocket: bool, method: str = "GET") -> tuple[Compiled, dict[str, str]] | int:
        """The route and its path parameters, or 404 / 405."""
        path_matched = False
        for entry in self.table():
            if isinstance(entry.route, WebSocketRoute) != websocket:
                continue
            m = entry.pattern.match(path)
            if m is None:
                continue
            path_matched = True
            if websocket or entry.route.method == method:
                return entry, m.groupdict()
        return 405 if path_matched else 404


_INT64 = (-(2**63), 2**63 - 1)


def unstorable(body: Any) -> str | None:
    """Why a parsed JSON body cannot reach a plugin, or ``None``: a string (or key) with an
    unpaired UTF-16 surrogate (valid JSON, ``"\\ud800"``, but no UTF-8 text: SQLite and every
    encoder refuse it), or an integer beyond SQLite's 64 bits. Plugins then never see values
    their store would fail on with a 500."""
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "the body holds text with an unpaired surrogate (\\ud800-\\udfff): not valid Unicode text"
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int):
            if not _INT64[0] <= value <= _INT64[1]:
                return "the body holds an integer beyond 64 bits"
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


def _principal(header: str | None) -> Principal:
    state = current()
    me = authenticate(state.kernel.store, header)
    projects = None if me.is_admin else state.access.projects(me.user_id)
    return Principal(user_id=me.user_id, name=me.name, role=me.role, scope=me.scope, task_id=me.task_id, project_ids=projects, token_id=me.token_id)


async def _call(handler: Any, arg: Any, *, threaded: bool = False) -> Any:
    # A builtin's sync handler runs on the event loop (some use trio channels, which are not
    # thread-safe); a third party's in a worker thread. The response timeout bounds both.
    if threaded and not inspect.iscoroutinefunction(handler):
        result = await trio.to_thread.run_sync(handler, arg, abandon_on_cancel=True)
    else:
        result = handler(arg)
    if inspect.isawaitable(result):
        result = await result
    return result


def mount(app: Quart) -> PluginRouter:
    """Add the catch-all plugin dispatch to ``app`` (after the daemon's own routes)."""
    router = PluginRouter()

    async def dispatch(path: str) -> QuartResponse:
        full = "/" + path
        found = router.match(full, websocket=False, method=request.method)
        if found == 404:
            return error_response(404, "not_found", f"no route {request.method} {full}")
        if found == 405:
            return error_response(405, "method_not_allowed", f"{request.method} is not allowed on {full}")
        entry, params = found  # type: ignore[misc]
        route: Route = entry.route  # type: ignore[assignment]
        principal = None if route.anonymous else _principal(request.headers.get("Authorization"))
        raw = await request.get_data()
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
                return error_response(400, "malformed_json", "the request body is not valid JSON (or is nested too deeply)")
            problem = unstorable(body)
            if problem:
                return error_response(422, "validation_error", problem)
        req = Request(
            method=request.method,
            path=full,
            params=params,
            query=dict(request.args.items()),
            json=body,
            principal=principal,
            headers={k.lower(): v for k, v in request.headers.items()},
        )  # type: ignore[arg-type]
        try:
            result = await _call(route.handler, req, threaded=entry.threaded)
        except HTTPError as exc:
            return error_response(exc.status, exc.code, exc.message)
        return _respond(result)

    async def ws_dispatch(path: str) -> None:
        full = "/" + path
        found = router.match(full, websocket=True)
        if isinstance(found, int):
            await websocket.close(1008)
            return
        entry, params = found
        route: WebSocketRoute = entry.route  # type: ignore[assignment]
        principal = None
        if not route.anonymous:
            header = websocket.headers.get("Authorization") or (f"Bearer {websocket.args['token']}" if "token" in websocket.args else None)
            try:
                principal = _principal(header)
            except Exception:
                await websocket.close(1008)
                return
        await _call(route.handler, _WebSocket(principal, params, dict(websocket.args.items())))

    app.add_url_rule("/<path:path>", endpoint="plugin_route", view_func=dispatch, methods=METHODS)
    app.add_websocket("/<path:path>", endpoint="plugin_websocket", view_func=ws_dispatch)
    return router


def _respond(result: Any) -> QuartResponse:
    if isinstance(result, Response):
        if result.stream is not None:
            resp = QuartResponse(_encode(result.stream), status=result.status, content_type=result.content_type)
            resp.timeout = None  # Quart would cut a long stream after RESPONSE_TIMEOUT
            return resp
        body, status = result.body, result.status
    else:
        body, status = result, 200
    return QuartResponse(json.dumps(body, ensure_ascii=False, default=str), status=status, mimetype="application/json")


async def _encode(stream: Any) -> Any:
    async for chunk in stream:
        yield chunk.encode("utf-8") if isinstance(chunk, str) else chunk


class _WebSocket:
    """What a :class:`WebSocketRoute` handler gets: the caller and the socket."""

    def __init__(self, principal: Principal | None, params: Mapping[str, str], query: Mapping[str, str]) -> None:
        self.principal = principal
        self.params = params
        self.query = query

    async def accept(self) -> None:
        await websocket.accept()

    async def send(self, data: str | bytes) -> None:
        await websocket.send(data)

    async def receive(self) -> str | bytes:
        return await websocket.receive()

    async def close(self, code: int = 1000) -> None:
        await websocket.close(code)

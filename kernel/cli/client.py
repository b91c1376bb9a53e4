"""The CLI's HTTP client: JSON requests and the SSE event stream over stdlib ``http.client``.

Why not httpx: importing it (it pulls trio/anyio here) more than doubles the CLI's start-up
time; the CLI makes one or two requests per run, so a connection per request is fine.

Wire format (the daemon's REST contract, ``docs/api.md``): JSON bodies, ``Authorization:
Bearer <token>``, errors ``{"error": {"code": str, "message": str}}``, lists
``{"items": [...], "next_cursor": str | None}``. Events follow the WHATWG HTML "Server-sent
events" format (``id:``/``event:``/``data:`` lines, ``:`` comments, a blank line ends an event).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from elowen_sdk import ElowenError

__all__ = [
    "NOT_ELOWEN",
    "PLUGIN_ROUTES",
    "ApiError",
    "Client",
    "Event",
    "Unreachable",
    "describe_error",
    "missing_route_hint",
    "parse_sse",
    "route_plugin",
]

USER_AGENT = "elowen-cli"
EVENTS_READ_TIMEOUT = 45.0  # seconds: three missed 15 s heartbeats mean the stream is dead

#: :attr:`ApiError.code` when the answer did not come from an Elowen daemon (no error shape).
NOT_ELOWEN = "not_elowen"

PLUGIN_ROUTES: dict[str, str] = {
    "/sessions": "agents",
    "/decisions": "agents",
    "/brain": "brain",
    "/missions": "overseer",
    "/escalations": "overseer",
    "/asks": "overseer",
    "/notifications": "notify",
    "/overseer": "overseer-parked",
    "/providers": "inference",
    "/cron": "cron",
}
"""Path prefix → the builtin plugin serving the routes under it (the daemon answers 404
``no route …`` for them while that plugin is not enabled). Third-party plugins serve theirs
under ``/plugins/<name>/…``."""


class ApiError(ElowenError):
    """The daemon answered with an error status.

    Attributes:
        status: the HTTP status (400, 401, 403, 404, 409, 413, 422, …).
        code: the error code from the body (``snake_case``), or ``http_<status>``.
        message: the human message from the body.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Unreachable(ElowenError):
    """Nothing answered at the daemon's address (refused, reset, timed out)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the Elowen daemon at {url}: {reason}")
        self.url = url
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: ``id`` (``None`` if the event had no ``id:`` line), ``type`` (the
    ``event:`` field, ``"message"`` when absent) and ``data`` (the ``data:`` lines joined by
    newlines, undecoded)."""

    id: str | None
    type: str
    data: str

    def json(self) -> Any:
        """``data`` decoded as JSON, or the raw string if it is not JSON."""
        try:
            return json.loads(self.data)
        except ValueError:
            return self.data


def parse_sse(lines: Iterator[bytes]) -> Iterator[Event]:
    """Turn an SSE byte-line stream into :class:`Event` objects (WHATWG HTML, "Server-sent
    events", event stream interpretation). Comments (``: heartbeat``) and ``retry:`` are skipped;
    an event with no ``data:`` line is not dispatched."""
    event_id: str | None = None
    event_type = ""
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield Event(event_id, event_type or "message", "\n".join(data))
            event_type, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            event_type = value
        elif field == "id" and "\0" not in value:
            event_id = value


class Client:
    """A small JSON client of the daemon.

    Args:
        base_url: ``http(s)://host:port`` without a trailing slash.
        token: a callable returning the bearer token (``None``: send no ``Authorization``); it is
            called per request so a token file written by a just-started daemon is picked up.
        timeout: socket timeout in seconds for ordinary requests.
        autostart: called once, the first time a connection is refused; returns whether it
            started the daemon (then the request is sent again). ``None``: never.
    """

    def __init__(
        self,
        base_url: str,
        token: Callable[[], str | None],
        *,
        timeout: float = 30.0,
        autostart: Callable[[], bool] | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        self.base_url = base_url
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._https else 80)
        self._token = token
        self._autostart = autostart
        self.timeout = timeout

    # ------------------------------------------------------------------ plumbing

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _headers(self, auth: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        token = self._token() if auth else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        headers.update(extra or {})
        return headers

    def _open(
        self, method: str, target: str, payload: bytes | None, extra: dict[str, str], *, auth: bool, timeout: float, autostart: bool = True
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request and return the connection with its response (headers read).

        A refused connection triggers the autostart callback once, then one more attempt; the
        request had not been delivered, so resending a POST is safe.
        """
        while True:
            conn = self._connection(timeout)
            try:
                conn.request(method, target, body=payload, headers=self._headers(auth, extra))
                return conn, conn.getresponse()
            except ConnectionRefusedError:
                conn.close()
                if autostart and self._autostart is not None:
                    starter, self._autostart = self._autostart, None
                    if starter():
                        continue
                raise Unreachable(self.base_url, "connection refused") from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise Unreachable(self.base_url, _reason(exc)) from None

    @staticmethod
    def url_path(path: str, query: dict[str, Any] | None = None) -> str:
        """``path`` plus the query string of the non-empty values of ``query``."""
        params = {k: v for k, v in (query or {}).items() if v not in (None, "", [], ())}
        return f"{path}?{urlencode(params, doseq=True)}" if params else path

    @staticmethod
    def segment(value: str | int) -> str:
        """``value`` quoted as one path segment (``/`` and ``..`` cannot escape it)."""
        return quote(str(value), safe="")

    @staticmethod
    def _error(status: int, body: bytes, url: str = "the daemon's address") -> ApiError:
        """The :class:`ApiError` of an error answer. A body without the API's error shape (an
        HTML page, plain text) is never shown: it is summarised as ``HTTP <status> from a
        non-Elowen server at <url>`` with code :data:`NOT_ELOWEN`. (Also called as
        ``Client._error(status, body)`` by other command modules.)"""
        try:
            err = json.loads(body)["error"]
            if not isinstance(err, dict) or not isinstance(err.get("message", ""), str):
                raise TypeError(err)
            return ApiError(status, str(err.get("code") or f"http_{status}"), str(err.get("message") or ""))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            return ApiError(status, NOT_ELOWEN, f"HTTP {status} from a non-Elowen server at {url}")

    # ------------------------------------------------------------------ requests

    def request(self, method: str, path: str, *, body: Any = None, query: dict[str, Any] | None = None, auth: bool = True, timeout: float | None = None) -> Any:
        """Send one request and return the decoded JSON body (``None`` for an empty body).
        ``auth=False`` sends no token and never autostarts; ``timeout`` overrides
        :attr:`timeout` (seconds).

        Raises:
            ApiError: the status is not 2xx.
            Unreachable: the connection failed or timed out.
        """
        payload = None if body is None else json.dumps(body).encode()
        extra = {"Content-Type": "application/json"} if payload is not None else {}
        conn, resp = self._open(method, self.url_path(path, query), payload, extra, auth=auth, timeout=timeout or self.timeout, autostart=auth)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(self.base_url, _reason(exc)) from None
        finally:
            conn.close()
        if not 200 <= resp.status < 300:
            raise self._error(resp.status, data, self.base_url)
        if not data.strip():
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise ApiError(resp.status, NOT_ELOWEN, f"HTTP {resp.status} with a non-JSON body from a non-Elowen server at {self.base_url}") from None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body={} if body is None else body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body=body)

    def delete(self, path: str, **query: Any) -> Any:
        return self.request("DELETE", path, query=query)

    def health(self, timeout: float = 1.0) -> dict[str, Any] | None:
        """``GET /health`` with a short timeout; ``None`` if nothing (healthy) answers."""
        try:
            result = self.request("GET", "/health", auth=False, timeout=timeout)
        except (Unreachable, ApiError):
            return None
        return result if isinstance(result, dict) else None

    def list_items(self, path: str, query: dict[str, Any] | None = None, *, follow: bool = True) -> tuple[list[dict[str, Any]], bool]:
        """The ``items`` of a list endpoint, following ``next_cursor`` while ``follow`` is true
        (otherwise only the first page). Returns ``(items, more)`` where ``more`` tells whether
        a cursor was left unfollowed.

        Raises:
            ApiError, Unreachable: as :meth:`request`.
        """
        params = dict(query or {})
        items: list[dict[str, Any]] = []
        while True:
            page = self.request("GET", path, query=params)
            if not isinstance(page, dict) or not isinstance(page.get("items", []), list):
                raise ApiError(200, "bad_response", f"GET {path} did not return a list object")
            items.extend(page.get("items") or [])
            cursor = page.get("next_cursor")
            if not cursor:
                return items, False
            if not follow:
                return items, True
            params["cursor"] = cursor

    def list_all(self, path: str, **query: Any) -> list[dict[str, Any]]:
        """Every item of a list endpoint (all pages)."""
        return self.list_items(path, query)[0]

    # ------------------------------------------------------------------ events

    def open_events(
        self, query: dict[str, Any], last_event_id: str | None, *, autostart: bool = True
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Open ``GET /events`` and return the connection and the streaming response
        (``autostart``: whether a refused connection may start the daemon).

        Raises:
            ApiError: the daemon refused the stream (401/403/422…).
            Unreachable: the connection failed.
        """
        extra = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_event_id:
            extra["Last-Event-ID"] = last_event_id
        conn, resp = self._open("GET", self.url_path("/events", query), None, extra, auth=True, timeout=EVENTS_READ_TIMEOUT, autostart=autostart)
        if resp.status != 200:
            body = resp.read()
            conn.close()
            raise self._error(resp.status, body, self.base_url)
        return conn, resp

    def follow_events(
        self,
        query: dict[str, Any],
        *,
        last_event_id: str | None = None,
        on_drop: Callable[[str, float], None] | None = None,
        max_backoff: float = 5.0,
    ) -> Iterator[Event]:
        """Yield events from ``GET /events`` forever, reconnecting with ``Last-Event-ID`` (the
        last id seen) whenever the stream drops or goes silent for :data:`EVENTS_READ_TIMEOUT`.

        ``on_drop(reason, delay)`` is called before each reconnection wait. The first connection
        must succeed (else :class:`Unreachable`); later failures are retried with a backoff from
        0.5 s up to ``max_backoff``. API errors (a revoked token…) always raise :class:`ApiError`.
        """
        first = True
        delay = 0.5
        while True:
            try:
                conn, resp = self.open_events(query, last_event_id, autostart=first)
            except Unreachable as exc:
                if first:
                    raise
                reason = exc.reason
            else:
                first = False
                delay = 0.5
                try:
                    for event in parse_sse(iter(resp.readline, b"")):
                        if event.id is not None:
                            last_event_id = event.id
                        yield event
                    reason = "the stream ended"
                except (OSError, http.client.HTTPException) as exc:
                    reason = _reason(exc)
                finally:
                    conn.close()
            if on_drop is not None:
                on_drop(reason, delay)
            time.sleep(delay)
            delay = min(delay * 2, max_backoff)


def route_plugin(path: str) -> str | None:
    """The plugin that serves ``path`` (``/sessions/3`` → ``agents``, ``/plugins/foo/x`` →
    ``foo``), or ``None`` for the daemon's own routes."""
    clean = path.split("?", 1)[0]
    for prefix, plugin in PLUGIN_ROUTES.items():
        if clean == prefix or clean.startswith(prefix + "/"):
            return plugin
    parts = clean.split("/")
    if len(parts) >= 4 and parts[1] == "plugins" and parts[2]:
        return parts[2]  # /plugins/<name>/<route>: a third-party plugin's route
    return None


def missing_route_hint(exc: ApiError) -> str | None:
    """For a 404 ``not_found`` whose message is the daemon's ``no route <METHOD> <path>``: a
    hint naming the plugin that serves the path and how to enable it; else ``None``."""
    if exc.status != 404 or exc.code != "not_found" or not exc.message.startswith("no route"):
        return None
    parts = exc.message.split(" ", 3)
    plugin = route_plugin(parts[3]) if len(parts) == 4 else None
    if plugin is None:
        return None
    return f"hint: {parts[3]} is served by the {plugin} plugin; if it is not enabled (`elowen plugin list`), enable it with `elowen plugin enable {plugin}`"


def describe_error(exc: ApiError) -> str:
    """The message to show for ``exc``, with the missing-plugin hint when there is one."""
    message = exc.message or exc.code
    hint = missing_route_hint(exc)
    return f"{message}\n{hint}" if hint else message


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(exc) or type(exc).__name__

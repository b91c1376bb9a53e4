"""Helpers every view uses: the login requirement and daemon calls with the session's token."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

from quart import Response, redirect, request

from elowen_sdk import ElowenError

from ..security import session_or_none
from ..sessions import WebSession
from ..state import web_state
from ..upstream import Reply

__all__ = ["LoggedOut", "api", "is_htmx", "login_required", "me"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class LoggedOut(ElowenError):
    """No session, or the daemon no longer accepts its token."""


def is_htmx() -> bool:
    """Whether this request was made by htmx (``HX-Request: true``)."""
    return request.headers.get("HX-Request") == "true"


def me() -> WebSession:
    """The request's session.

    Raises:
        LoggedOut: not logged in.
    """
    session = session_or_none()
    if session is None:
        raise LoggedOut()
    return session


def login_required(view: F) -> F:
    """Send visitors without a session to the login page (htmx: ``HX-Redirect``)."""

    @functools.wraps(view)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if session_or_none() is None:
            raise LoggedOut()
        return await view(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


async def api(method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None, timeout: float | None = None) -> Reply:
    """Call the daemon as the logged-in user (``timeout``: seconds, see
    :meth:`elowen.web.upstream.Upstream.call`).

    Raises:
        LoggedOut: no session, or the daemon answered 401 (token revoked): the session is dropped.
        DaemonDown: the daemon did not answer.
    """
    session = me()
    reply = await web_state().daemon.call(session.token, method, path, json=json, params=params, timeout=timeout)
    if reply.status == 401:
        web_state().sessions.drop(session.id)
        raise LoggedOut()
    return reply


def to_login() -> Response:
    """The answer to a request without a valid session."""
    if is_htmx() or request.path.startswith(("/partials/", "/events", "/chat/")) or request.method != "GET":
        resp = Response('{"error": {"code": "unauthorized", "message": "log in first"}}', status=401, mimetype="application/json")
        resp.headers["HX-Redirect"] = "/login"
        return resp
    return redirect("/login?" + urlencode({"next": request.full_path.rstrip("?")}))  # type: ignore[return-value]

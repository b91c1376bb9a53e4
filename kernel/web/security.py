"""Login checks, CSRF protection and security headers for every request.

* The session is looked up from the ``elowen_session`` cookie into ``g.session``.
* Every state-changing request (any method but GET, HEAD, OPTIONS) must come from this origin
  (``Origin``, when the browser sends it) and, except the login form, carry the session's CSRF
  token in the ``X-CSRF-Token`` header (htmx and our scripts add it from the
  ``<meta name="csrf-token">`` tag) or a ``csrf_token`` form field. Otherwise: 403.
* Responses get a strict Content-Security-Policy (no inline scripts), ``nosniff``,
  ``frame-ancestors 'none'`` and ``Cache-Control: no-store`` on pages.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from quart import Response, g, jsonify, request

from .sessions import COOKIE_NAME, WebSession
from .state import web_state

__all__ = ["CSRF_HEADER", "SAFE_METHODS", "check_request", "set_session_cookie", "secure_headers", "session_or_none"]

log = logging.getLogger(__name__)

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_OPEN_ENDPOINTS = frozenset({"auth.login"})

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def session_or_none() -> WebSession | None:
    """The logged-in session of this request, or ``None``."""
    return g.get("session")


def _same_origin() -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # older clients omit it on same-origin requests; the CSRF token decides
    parts = urlsplit(origin)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.scheme}://{request.host}"


async def _forbidden(code: str, message: str) -> Response:
    # Read the refused body: an unread one can wedge the kept-alive connection's next request.
    await request.get_data()
    resp = jsonify({"error": {"code": code, "message": message}})
    resp.status_code = 403
    return resp


async def check_request() -> Response | None:
    """``before_request``: attach the session; refuse cross-origin or CSRF-less writes."""
    g.session = web_state().sessions.get(request.cookies.get(COOKIE_NAME))
    if request.method in SAFE_METHODS or request.endpoint == "static":
        return None
    if not _same_origin():
        log.warning("refused %s %s from origin %s", request.method, request.path, request.headers.get("Origin"))
        return await _forbidden("bad_origin", "cross-origin request refused")
    if request.endpoint in _OPEN_ENDPOINTS:
        return None
    session: WebSession | None = g.session
    if session is None:
        await request.get_data()
        resp = jsonify({"error": {"code": "unauthorized", "message": "log in first"}})
        resp.status_code = 401
        resp.headers["HX-Redirect"] = "/login"
        return resp
    candidate = request.headers.get(CSRF_HEADER)
    if candidate is None and request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        candidate = (await request.form).get("csrf_token")
    if not session.csrf_ok(candidate):
        log.warning("refused %s %s: missing or wrong CSRF token", request.method, request.path)
        return await _forbidden("csrf_failed", "missing or wrong CSRF token; reload the page")
    return None


def set_session_cookie(resp: Response, session_id: str | None) -> None:
    """Set (or, with ``None``, clear) the session cookie: HttpOnly, SameSite=Strict, path /,
    Secure when served over HTTPS."""
    if session_id is None:
        resp.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="Strict")
        return
    resp.set_cookie(COOKIE_NAME, session_id, httponly=True, samesite="Strict", secure=request.scheme == "https", path="/")


async def secure_headers(resp: Response) -> Response:
    """``after_request``: security headers on every response."""
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "same-origin")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    if resp.mimetype == "text/html":
        resp.headers.setdefault("Cache-Control", "no-store")
    return resp

"""Login and logout.

Two ways in, one session:

* **token** (form field ``token``): a daemon token (``elowen user add`` prints one; the
  admin's is in ``$ELOWEN_HOME/admin.token``), checked with ``GET /users/me``;
* **name and password** (form fields ``via=password``, ``name``, ``password``): the BFF calls
  the daemon's ``POST /auth/login``, which answers a new token and the user record.

Either way the token is kept server-side (:mod:`elowen.web.sessions`); the browser gets a
session cookie only. Logout calls ``POST /auth/logout`` with the session's token: the daemon
revokes it only when ``POST /auth/login`` made it, so a token pasted into the form stays valid.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit

from quart import Blueprint, redirect, render_template, request

from elowen_sdk import ElowenError

from ..security import session_or_none, set_session_cookie
from ..sessions import COOKIE_NAME
from ..state import web_state
from ..upstream import DaemonDown, Reply

__all__ = ["bp", "safe_next"]

log = logging.getLogger(__name__)

bp = Blueprint("auth", __name__)

MAX_TOKEN = 200
#: Longest name and password the daemon accepts (``POST /auth/login``).
MAX_NAME = 100
MAX_PASSWORD = 1024

_DAEMON_DOWN = "The Elowen daemon is not answering. Start it with `elowen up`, then try again."
_SECONDS = re.compile(r"(\d+)\s*s\b")
#: C0 control characters: the daemon refuses them in a password (422).
_CONTROL = re.compile(r"[\x00-\x1f]")


class _Refused(ElowenError):
    """A login that failed: ``message`` for the page, ``status`` for the answer."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


MAX_NEXT = 2_000
"""Longest ``next`` path kept (characters); a longer one goes to ``/``."""


def safe_next(target: str | None) -> str:
    """A same-site path to go to after login: it starts with one ``/`` and has no scheme,
    host, backslash, whitespace or control character (browsers drop tabs and newlines from
    URLs, so ``/\t/evil.example`` would become ``//evil.example``; a newline would also break
    the ``Location`` header). ``/`` for anything else: no open redirect."""
    if not target or len(target) > MAX_NEXT or not target.startswith("/") or target.startswith("//"):
        return "/"
    if "\\" in target or any(ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in target):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith("//"):
        return "/"
    return target


async def _with_token(token: str) -> tuple[str, dict[str, Any]]:
    if not token:
        raise _Refused("Enter your Elowen token.", 400)
    if len(token) > MAX_TOKEN:
        raise _Refused("That token was not accepted.")
    try:
        reply = await web_state().daemon.call(token, "GET", "/users/me")
    except DaemonDown:
        raise _Refused(_DAEMON_DOWN, 503) from None
    if reply.status == 401:
        raise _Refused("That token was not accepted.")
    if not reply.ok or not isinstance(reply.body, dict):
        raise _Refused(f"The daemon refused the login: {reply.error_message()}")
    return token, reply.body


def _throttled(reply: Reply) -> str:
    found = _SECONDS.search(reply.error_message())
    wait = f"{found.group(1)} seconds" if found else "a minute"
    return f"Too many failed attempts for this name. Wait {wait}, then try again."


def _form_problem(name: str, password: str) -> str | None:
    """What is wrong with the filled-in form before asking the daemon (400), or ``None``."""
    if not name or not password:
        return "Enter your name and password."
    if len(name) > MAX_NAME:
        return f"That name is too long: names have at most {MAX_NAME} characters."
    if len(password) > MAX_PASSWORD:
        return f"That password is too long: passwords have at most {MAX_PASSWORD} characters."
    if _CONTROL.search(password):
        return "A password may not contain control characters (tabs, line breaks and the like)."
    return None


async def _with_password(name: str, password: str) -> tuple[str, dict[str, Any]]:
    problem = _form_problem(name, password)
    if problem is not None:
        raise _Refused(problem, 400)
    try:
        reply = await web_state().daemon.call(None, "POST", "/auth/login", json={"name": name, "password": password})
    except DaemonDown:
        raise _Refused(_DAEMON_DOWN, 503) from None
    if reply.status in (401, 422):  # 422: a name the daemon cannot have; same answer, no hint
        raise _Refused("Wrong name or password.")
    if reply.status == 429:
        raise _Refused(_throttled(reply), 429)
    body = reply.body
    if not reply.ok or not isinstance(body, dict) or not isinstance(body.get("token"), str) or not isinstance(body.get("user"), dict):
        raise _Refused(f"The daemon refused the login: {reply.error_message()}")
    return body["token"], body["user"]


@bp.route("/login", methods=["GET", "POST"])
async def login() -> object:
    """GET: the form. POST: ``token``, or ``via=password`` with ``name`` and ``password``;
    checked with the daemon, then a fresh session. Refusals show the form again with a message:
    400 for a missing or unusable field (empty, too long, control characters in the password),
    401 for a wrong name, password or token, 429 while the daemon throttles the name, 503 when
    the daemon is down."""
    if request.method == "GET":
        if session_or_none() is not None:
            return redirect("/")
        return await render_template("login.html", error=None, via="token", name="", next=safe_next(request.args.get("next")))
    form = await request.form
    target = safe_next(form.get("next"))
    via = "password" if form.get("via") == "password" else "token"
    name = (form.get("name") or "").strip()
    try:
        if via == "password":
            token, user = await _with_password(name, form.get("password") or "")
        else:
            token, user = await _with_token((form.get("token") or "").strip())
    except _Refused as refused:
        page = await render_template("login.html", error=refused.message, via=via, name=name[:MAX_NAME], next=target)
        return page, refused.status
    web_state().sessions.drop(request.cookies.get(COOKIE_NAME))
    session = web_state().sessions.create(token, user)
    log.info("web login (%s): user %s", via, user.get("name"))
    resp = redirect(target)
    set_session_cookie(resp, session.id)
    return resp


@bp.post("/logout")
async def logout() -> object:
    """End the session (the CSRF check applies: a foreign page cannot log you out) and ask the
    daemon to revoke its token (it does only for a token made by a password login)."""
    session = session_or_none()
    web_state().sessions.drop(request.cookies.get(COOKIE_NAME))
    if session is not None:
        try:
            reply = await web_state().daemon.call(session.token, "POST", "/auth/logout")
        except DaemonDown:
            log.warning("web logout: the daemon is not answering; user %s's login token stays valid", session.user.get("name"))
        else:
            if not reply.ok and reply.status != 401:  # 401: already revoked
                log.warning("web logout: the daemon refused to revoke the token: %s", reply.error_message())
    resp = redirect("/login")
    set_session_cookie(resp, None)
    if request.headers.get("HX-Request") == "true":
        resp.headers["HX-Redirect"] = "/login"
    return resp

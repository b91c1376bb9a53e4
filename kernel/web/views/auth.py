"""Login and logout.

The daemon has no passwords: a user logs in with a daemon token (``elowen user add``
prints one; the admin's is in ``$ELOWEN_HOME/admin.token``). The token is checked with
``GET /users/me`` and kept server-side; the browser gets a session cookie only.
"""

from __future__ import annotations

import logging

from quart import Blueprint, redirect, render_template, request

from ..security import session_or_none, set_session_cookie
from ..sessions import COOKIE_NAME
from ..state import web_state
from ..upstream import DaemonDown

__all__ = ["bp", "safe_next"]

log = logging.getLogger(__name__)

bp = Blueprint("auth", __name__)

MAX_TOKEN = 200


def safe_next(target: str | None) -> str:
    """A same-site path to go to after login (``/`` for anything else: no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


@bp.route("/login", methods=["GET", "POST"])
async def login() -> object:
    """GET: the form. POST ``token`` (form field): check it with the daemon, start a session."""
    if request.method == "GET":
        if session_or_none() is not None:
            return redirect("/")
        return await render_template("login.html", error=None, next=safe_next(request.args.get("next")))
    form = await request.form
    token = (form.get("token") or "").strip()
    target = safe_next(form.get("next"))
    error = None
    if not token or len(token) > MAX_TOKEN:
        error = "Enter your Elowen token."
    else:
        try:
            reply = await web_state().daemon.call(token, "GET", "/users/me")
        except DaemonDown:
            error = "The Elowen daemon is not answering. Start it with `elowen up`, then try again."
        else:
            if reply.status == 401:
                error = "That token was not accepted."
            elif not reply.ok or not isinstance(reply.body, dict):
                error = f"The daemon refused the login: {reply.error_message()}"
    if error is not None:
        return await render_template("login.html", error=error, next=target), 401
    web_state().sessions.drop(request.cookies.get(COOKIE_NAME))
    session = web_state().sessions.create(token, reply.body)
    log.info("web login: user %s", reply.body.get("name"))
    resp = redirect(target)
    set_session_cookie(resp, session.id)
    return resp


@bp.post("/logout")
async def logout() -> object:
    """End the session (the CSRF check applies: a foreign page cannot log you out)."""
    web_state().sessions.drop(request.cookies.get(COOKIE_NAME))
    resp = redirect("/login")
    set_session_cookie(resp, None)
    if request.headers.get("HX-Request") == "true":
        resp.headers["HX-Redirect"] = "/login"
    return resp

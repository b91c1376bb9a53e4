"""The web front end's quart-trio application."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from quart import Response, jsonify, render_template, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from elowen import __version__

from .config import WebConfig
from .security import check_request, secure_headers, session_or_none
from .sessions import SessionStore
from .state import EXTENSION, WebState
from .upstream import DaemonDown, Upstream
from .views import actions, auth, mcp, memories, notify, pages, panels, review, stream, terminal
from .views.common import LoggedOut, is_htmx, to_login

__all__ = ["create_app"]

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
#: Largest accepted request body (bytes).
MAX_BODY = 256 * 1024


#: What a panel or an action shows while the daemon does not answer (after "Not available:").
DAEMON_DOWN = "the Elowen daemon is not answering."


def create_app(config: WebConfig) -> QuartTrio:
    """The app for ``config``; the daemon client opens when serving starts and closes after."""
    app = QuartTrio("elowen.web", template_folder=str(HERE / "templates"), static_folder=str(HERE / "static"), static_url_path="/static")
    app.config.update(MAX_CONTENT_LENGTH=MAX_BODY, BODY_TIMEOUT=30, RESPONSE_TIMEOUT=60, SEND_FILE_MAX_AGE_DEFAULT=3600)
    state = WebState(config=config, sessions=SessionStore(config.session_idle))
    app.extensions[EXTENSION] = state

    @app.before_serving
    async def open_upstream() -> None:
        state.upstream = Upstream(config.daemon_url)

    @app.after_serving
    async def close_upstream() -> None:
        if state.upstream is not None:
            await state.upstream.aclose()

    app.add_template_filter(panels.waited, "waited")
    app.before_request(check_request)
    app.after_request(secure_headers)

    @app.context_processor
    def globals_() -> dict[str, object]:
        session = session_or_none()
        return {
            "session": session,
            "user": session.user if session else None,
            "csrf_token": session.csrf if session else "",
            "stream_window": config.stream_window,
        }

    @app.get("/health")
    async def health() -> Response:
        """``{"status": "ok", "pid", "version", "daemon": url, "sessions", "streams"}`` (no login)."""
        return jsonify(
            {"status": "ok", "pid": os.getpid(), "version": __version__, "daemon": config.daemon_url, "sessions": len(state.sessions), "streams": state.streams}
        )

    @app.errorhandler(LoggedOut)
    async def logged_out(_: LoggedOut) -> Response:
        return to_login()

    @app.errorhandler(DaemonDown)
    async def daemon_down(exc: DaemonDown) -> object:
        if is_htmx() or request.path.startswith("/partials/"):
            return await render_template("partials/unavailable.html", text=DAEMON_DOWN, reload=True), 200
        if request.method != "GET":
            return jsonify({"error": {"code": "daemon_down", "message": f"Not available: {DAEMON_DOWN}"}}), 502
        return await render_template("down.html", page=None, badge_count=None), 503

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> object:
        if request.method == "GET" and not is_htmx() and exc.code == 404:
            return await render_template("notfound.html", page=None), 404
        return jsonify({"error": {"code": (exc.name or "error").lower().replace(" ", "_"), "message": exc.description}}), exc.code

    for module in (auth, pages, panels, actions, stream, terminal, notify, review, mcp, memories):
        app.register_blueprint(module.bp)
    return app

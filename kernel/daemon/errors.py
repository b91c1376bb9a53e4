"""API errors and the handlers that turn every failure into the error shape.

Every error response is ``{"error": {"code": "<snake_case>", "message": "..."}}`` with status
400 (malformed), 401 (no or bad token), 403 (not allowed), 404, 409 (conflict or state), 413
(body too large) or 422 (validation). Anything unexpected is logged and answered 500 with the
same shape (``internal_error``), never with a traceback.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from quart import Quart, Response
from werkzeug.exceptions import HTTPException

from elowen_sdk import ElowenError

__all__ = [
    "ApiError",
    "read_body",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "Unauthorized",
    "Unprocessable",
    "error_response",
    "register_error_handlers",
]

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    411: "length_required",
    413: "too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    422: "validation_error",
    431: "headers_too_large",
    503: "unavailable",
}


class ApiError(ElowenError):
    """An error answered with :attr:`status` and ``{"error": {"code", "message"}}``."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status


class BadRequest(ApiError):
    status, code = 400, "bad_request"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"


class Conflict(ApiError):
    status, code = 409, "conflict"


class Unprocessable(ApiError):
    status, code = 422, "validation_error"


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    """A JSON error response in the API's shape."""
    body = json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)
    return Response(body, status=status, mimetype="application/json", headers=headers)


async def read_body() -> None:
    """Read the whole request body before anything answers (a ``before_request`` hook, which
    also runs for requests no route matches). A response sent while the body was still
    unread has left keep-alive connections stuck under hypercorn; reading it first (at most
    ``MAX_CONTENT_LENGTH``, else 413) avoids that. Handlers get it from the cache."""
    from quart import request

    await request.get_data(cache=True)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def disk_full_message(path: Any) -> str:
    """``the disk holding <path> is full (N MiB free): …`` for a 507 answer and the log."""
    import os
    import shutil

    folder = os.path.dirname(os.fspath(path)) or "."
    try:
        free = f"{shutil.disk_usage(folder).free / 2**20:.1f} MiB free"
    except OSError:
        free = "free space unknown"
    return f"the disk holding {folder} is full ({free}): nothing was changed; free some space and retry"


def register_error_handlers(app: Quart) -> None:
    """Register handlers for :class:`ApiError`, Quart/Werkzeug HTTP errors, kernel errors
    that map to client errors, and a last-resort handler for everything else."""
    from elowen.core.registry import PluginNotFound
    from elowen_sdk import ConfigError
    from elowen_sdk.services.executors import ExecError

    @app.errorhandler(ApiError)
    async def _api_error(exc: ApiError) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_response(exc.status, exc.code, exc.message, headers)

    @app.errorhandler(HTTPException)
    async def _http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        code = _HTTP_CODES.get(status) or _snake(type(exc).__name__)
        message = exc.description or exc.name
        if status == 413:
            message = "request body too large"
        response = error_response(status, code, message)
        if status == 413:
            response.headers["Connection"] = "close"  # the rest of the body is still on the wire
        if status == 405 and getattr(exc, "valid_methods", None):
            response.headers["Allow"] = ", ".join(exc.valid_methods)  # type: ignore[attr-defined]
        return response

    @app.errorhandler(ExecError)
    async def _exec_error(exc: ExecError) -> Response:
        return error_response(exc.status, exc.code, exc.message)

    @app.errorhandler(PluginNotFound)
    async def _plugin_not_found(exc: PluginNotFound) -> Response:
        return error_response(404, "not_found", str(exc))

    @app.errorhandler(ConfigError)
    async def _config_error(exc: ConfigError) -> Response:
        return error_response(422, "invalid_config", str(exc))

    import apsw

    @app.errorhandler(apsw.FullError)
    async def _disk_full(exc: apsw.FullError) -> Response:
        # 507 Insufficient Storage (RFC 4918 §11.5): nothing of the request was kept
        from elowen.hosting import release_reserve

        from .state import current

        kernel = current().kernel
        if release_reserve(kernel.home):
            log.warning("the disk is full: released the disk reserve so the log and /health keep working; free some space")
        return error_response(507, "disk_full", disk_full_message(kernel.store.path))

    @app.errorhandler(Exception)
    async def _unexpected(exc: Exception) -> Response:
        log.error("unhandled error", exc_info=exc)
        return error_response(500, "internal_error", "internal error; see the daemon log")

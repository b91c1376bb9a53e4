"""The webhook platform's hook implementations: the ``Platform`` the brain runs, and the
inbound route ``POST /plugins/webhook/inbound``.

Inbound body (JSON): ``{"user": "<sender id>", "text": "<message>", "secret": "<shared
secret>", "id"?: "<your message id>"}``. Answers ``202 {"accepted": true, "id"}`` at once —
the replies come later to the callback URL (see :mod:`.adapter`). Errors:

* ``403 not_configured`` — no secret or callback URL, a secret shorter than
  :data:`.checks.MIN_SECRET` characters, or a callback URL that is not http(s); the message
  says which.
* ``401 bad_secret`` — missing or wrong secret (compared in constant time). Logged at WARNING
  at most once a minute, with the number of such requests.
* ``413 too_long`` — ``text`` longer than :data:`.checks.MAX_TEXT` characters.
* ``422 validation_error`` — a bad ``user``, ``text`` or ``id``.
* ``409 not_running`` — the brain is not running this platform.
* ``409 queue_full`` — ``queue_size`` messages are accepted and not finished yet; the message
  says when to retry (plugin routes cannot set a ``Retry-After`` header).

The route is anonymous for Elowen (a platform has no Elowen token): the shared secret is the
authentication. The request carries it in the body because plugin routes see the JSON body,
not the headers.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from typing import Any

import trio

from elowen_sdk import HTTPError, Platform, Request, Response, Route, hookimpl

from .adapter import Inbound, QueueFull, WebhookAdapter
from .checks import MAX_TEXT, MAX_USER, RateLog, config_problem

__all__ = ["register_platforms", "register_routes"]

_adapters: dict[str, WebhookAdapter] = {}
"""Plugin name → the adapter the brain is running (set by the factory)."""


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison (hash first, so the length does not leak either)."""
    return hmac.compare_digest(hashlib.sha256(given.encode("utf-8")).digest(), hashlib.sha256(expected.encode("utf-8")).digest())


@hookimpl
def register_platforms(ctx: Any, register: Any) -> None:
    """``Platform("webhook", factory)``: the brain calls ``factory(gateway)``."""

    class _Adapter(WebhookAdapter):
        async def run(self) -> None:
            try:
                await super().run()
            finally:
                if _adapters.get(ctx.name) is self:
                    del _adapters[ctx.name]

    def factory(gateway: Any) -> WebhookAdapter:
        adapter = _Adapter(gateway, ctx.config, ctx.log)
        _adapters[ctx.name] = adapter
        return adapter

    register(Platform("webhook", factory))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    """``POST /inbound`` (mounted at ``/plugins/webhook/inbound``)."""
    bad_secrets = RateLog(60.0)

    async def inbound(request: Request) -> Response:  # async: it feeds a trio channel
        body = request.json if isinstance(request.json, dict) else {}
        problem = config_problem(ctx.config)
        if problem is not None:
            raise HTTPError(403, "not_configured", problem)
        given = body.get("secret")
        if not isinstance(given, str) or not _same(given, str(ctx.config.get("secret"))):
            count = bad_secrets.hit()
            if count is not None:
                ctx.log.warning("refused %d inbound message(s) with a missing or wrong secret (reported at most once a minute)", count)
            raise HTTPError(401, "bad_secret", "missing or wrong secret")
        user, text, mid = body.get("user"), body.get("text"), body.get("id")
        if not isinstance(user, str) or not user.strip() or len(user) > MAX_USER:
            raise HTTPError(422, "validation_error", f"user: a non-empty string of at most {MAX_USER} characters")
        if not isinstance(text, str) or not text.strip():
            raise HTTPError(422, "validation_error", f"text: a non-empty string of at most {MAX_TEXT} characters")
        if len(text) > MAX_TEXT:
            raise HTTPError(413, "too_long", f"text has {len(text)} characters; at most {MAX_TEXT} are accepted")
        if mid is not None and (not isinstance(mid, str) or len(mid) > 200):
            raise HTTPError(422, "validation_error", "id: a string of at most 200 characters")
        adapter = _adapters.get(ctx.name)
        if adapter is None:
            raise HTTPError(409, "not_running", "the brain is not running this platform (is the brain plugin enabled?)")
        message = Inbound(user.strip(), text, mid or uuid.uuid4().hex)
        try:
            adapter.submit(message)
        except QueueFull as exc:
            raise HTTPError(409, "queue_full", f"{exc} (Retry-After: {exc.retry_after})") from None
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise HTTPError(409, "not_running", "the platform is stopping") from None
        return Response({"accepted": True, "id": message.id}, status=202)

    register(Route("POST", "/inbound", inbound, summary="A chat message for the brain (webhook platform)", anonymous=True))

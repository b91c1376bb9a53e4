"""The WhatsApp Cloud API adapter the brain runs (``Platform("whatsapp", factory)``).

``run()`` serves the webhook (:mod:`.webhook`) on ``listen_host:listen_port`` (127.0.0.1 by
default: put Meta-facing HTTPS in front of it, e.g. a reverse proxy) and sends replies
through pywa's async client (``pywa_async.WhatsApp``) to the Graph API
(``POST /<version>/<phone number id>/messages``).

Each delivery is checked: the ``X-Hub-Signature-256`` HMAC with the app secret (pywa's
``utils.webhook_updates_validator``), then parsed; messages are queued and the webhook
answers 200 at once (Meta retries slow or failed deliveries). Replayed message ids are
dropped. A message from a number that is not linked gets no answer (counted), except
``link`` when ``pairing`` is on. Media the brain cannot read (images, audio, documents,
stickers, locations) get a one-line explanation; long replies are cut to WhatsApp's 4,096
characters per text message.

Secrets, each a file of mode 0600 in the plugin's data folder (or the configured path):
``access_token`` (Graph API bearer token), ``app_secret`` (webhook signature key),
``verify_token`` (handshake). ``phone_number_id`` is plain config.

State: ``not_configured`` (a secret or the phone number id missing, pywa not installed),
``connected`` (the webhook listens), ``error`` (the listener failed: the port is taken, say;
retried with back-off).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import trio

from elowen_sdk.platforms import RecentIds, SecretError, SenderQueues, StrangerGate, approval_command, chunk_text, read_secret

from .webhook import Delivery, WebhookApp, parse_delivery

__all__ = ["MAX_TEXT", "WhatsAppAdapter"]

MAX_TEXT = 4096
"""Characters of one WhatsApp text message body (Cloud API "Text messages")."""
UNSUPPORTED = "I can only read text messages here: {kind} messages are not passed to the assistant. Please write your request as text."
TOO_LONG = "That message is too long for me ({n} characters; at most {limit}). Please shorten it."
DENIED_AUDIT_EVERY = 60.0
"""Seconds between two audit rows of refused webhook requests of one reason: the first is
audited at once, later ones are counted into the next row (``count``), so anyone who can reach
the webhook cannot grow the audit table by one row per request (``refused`` counts them all)."""


class _Rewrite(httpx.AsyncBaseTransport):
    """Sends every request to ``base`` (scheme, host, port) keeping its path: pywa fixes its
    base URL to graph.facebook.com, this points it at a proxy or a test server."""

    def __init__(self, base: str) -> None:
        self.base = httpx.URL(base)
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme=self.base.scheme, host=self.base.host, port=self.base.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class WhatsAppAdapter:
    """One WhatsApp Business phone number (see the module docstring)."""

    def __init__(self, gateway: Any, ctx: Any) -> None:
        self.gateway = gateway
        self.ctx = ctx
        self.log: logging.Logger = ctx.log
        cfg: Mapping[str, Any] = ctx.config
        self.config = cfg
        self.phone_id = str(cfg.get("phone_number_id") or "")
        self.host = str(cfg.get("listen_host") or "127.0.0.1")
        self.port = int(cfg.get("listen_port", 4410))
        self.path = str(cfg.get("webhook_path") or "/webhook")
        self.graph_url = str(cfg.get("graph_url") or "https://graph.facebook.com")
        self.turn_timeout = float(cfg.get("turn_timeout", 900.0))
        self.max_text = int(cfg.get("max_text", 4000))
        self.gate = StrangerGate(pairing=bool(cfg.get("pairing", False)), max_pending=int(cfg.get("max_pending_codes", 20)))
        self.recent = RecentIds()
        self.state = "starting"
        self.configured = True
        self.detail: str | None = None
        self.refused = 0
        self.malformed = 0
        self.ignored = 0
        self.dropped = 0
        self.turns = 0
        self.sent = 0
        self._limiter = trio.CapacityLimiter(int(cfg.get("max_concurrent_turns", 50)))
        self._senders: SenderQueues[Delivery] = SenderQueues(self._handle_safely)
        """Per-sender queues: one sender's messages one at a time, in arrival order."""
        self._secrets: dict[str, str] = {}
        self._client: Any = None
        self._send: trio.MemorySendChannel[Delivery] | None = None
        self._denied: dict[str, tuple[float, int]] = {}  # reason → (when last audited, refused since)

    def _secret_path(self, key: str) -> Path:
        configured = str(self.config.get(f"{key}_file") or "")
        return Path(configured).expanduser() if configured else Path(self.ctx.data_dir) / key

    def _not_configured(self, why: str) -> None:
        self.configured, self.detail, self.state = False, why, "not_configured"

    def status(self) -> dict[str, Any]:
        """Counters: ``{state, detail, turns, sent, silenced, refused, malformed, ignored,
        duplicates, dropped}``."""
        return {
            "state": self.state,
            "detail": self.detail,
            "turns": self.turns,
            "sent": self.sent,
            "silenced": self.gate.silenced,
            "refused": self.refused,
            "malformed": self.malformed,
            "ignored": self.ignored,
            "duplicates": self.recent.duplicates,
            "dropped": self.dropped,
        }

    # -- run ---------------------------------------------------------------------------------

    async def run(self) -> None:
        if not self.phone_id:
            self._not_configured("set phone_number_id (the WhatsApp Business phone number id)")
            await trio.sleep_forever()
        try:
            self._secrets = {k: read_secret(self._secret_path(k)) for k in ("access_token", "app_secret", "verify_token")}
        except SecretError as exc:
            self._not_configured(str(exc))
            await trio.sleep_forever()
        try:
            from pywa_async import WhatsApp
        except ImportError:
            self._not_configured("pywa is not installed: pip install 'elowen[whatsapp]'")
            await trio.sleep_forever()
        session = httpx.AsyncClient(transport=_Rewrite(self.graph_url), timeout=float(self.config.get("send_timeout", 20.0)))
        self._client = WhatsApp(
            phone_id=self.phone_id,
            token=self._secrets["access_token"],
            session=session,
            server=None,
            verify_token=self._secrets["verify_token"],
            app_secret=self._secrets["app_secret"],
        )
        send, receive = trio.open_memory_channel[Delivery](int(self.config.get("queue_size", 200)))
        self._send = send
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._consume, receive, nursery)
                await self._serve()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await session.aclose()

    async def _serve(self) -> None:
        from hypercorn.config import Config
        from hypercorn.trio import serve

        backoff = 1.0
        while True:
            config = Config()
            config.bind = [f"{self.host}:{self.port}"]
            config.accesslog = None
            config.errorlog = self.log
            config.graceful_timeout = 1.0
            app = WebhookApp(self.path, self._on_delivery, self._on_challenge)
            started = time.monotonic()
            try:
                self.state, self.detail = "connected", f"webhook on http://{self.host}:{self.port}{self.path}"
                await serve(app, config, shutdown_trigger=trio.sleep_forever)  # type: ignore[arg-type]
                reason = "the webhook server stopped"
            except OSError as exc:
                reason = f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            self.state, self.detail = "error", reason
            self.log.warning("%s; retrying in %.0f s", reason, backoff)
            self._audit("whatsapp.webhook", "error", {"reason": reason})
            if time.monotonic() - started > 60:
                backoff = 1.0
            await trio.sleep(backoff)
            backoff = min(backoff * 2, 300.0)

    def _audit(self, action: str, outcome: str, details: dict[str, Any]) -> None:
        try:
            self.ctx.store.audit("plugin:whatsapp", action, self.gateway.platform, outcome, details)
        except Exception:
            self.log.exception("auditing %s failed", action)

    def _audit_denied(self, reason: str, detail: dict[str, Any]) -> None:
        """Audit a refused webhook request, at most once per :data:`DENIED_AUDIT_EVERY` per
        reason (``count``: how many were refused for it since the last row)."""
        now = time.monotonic()
        last, pending = self._denied.get(reason, (-DENIED_AUDIT_EVERY, 0))
        pending += 1
        if now - last < DENIED_AUDIT_EVERY:
            self._denied[reason] = (last, pending)
            return
        self._denied[reason] = (now, 0)
        self._audit("whatsapp.webhook", "denied", {"reason": reason, "count": pending, **detail})

    # -- webhook -----------------------------------------------------------------------------

    async def _on_challenge(self, verify_token: str | None, challenge: str | None) -> tuple[int, str]:
        if not challenge:
            return 400, "missing hub.challenge"
        text, status = await self._client.webhook_challenge_handler(verify_token, challenge)
        if status != 200:
            self._audit_denied("bad verify token", {})
            return 403, "forbidden"
        return 200, str(text)

    async def _on_delivery(self, body: bytes, signature: str | None) -> tuple[int, str]:
        from pywa import utils

        if not signature or not utils.webhook_updates_validator(self._secrets["app_secret"], body, signature):
            self.refused += 1
            self._audit_denied("missing signature" if not signature else "bad signature", {"bytes": len(body)})
            return 401, "bad signature"
        try:
            messages, ignored = parse_delivery(json.loads(body))
        except ValueError:
            self.malformed += 1
            return 400, "malformed delivery"
        self.ignored += ignored
        for message in messages:
            if self.recent.seen(message.message_id):
                continue
            try:
                assert self._send is not None
                self._send.send_nowait(message)
            except trio.WouldBlock:
                self.dropped += 1
                self.log.warning("inbound queue full, dropped a message (%d so far)", self.dropped)
        return 200, "ok"

    # -- messages ----------------------------------------------------------------------------

    async def _consume(self, receive: trio.MemoryReceiveChannel[Delivery], nursery: trio.Nursery) -> None:
        async for message in receive:
            if not self._senders.put(message.sender, message, nursery.start_soon):
                self.log.warning("sender %s has %d messages waiting; dropped message %s", message.sender, self._senders.limit, message.message_id)

    async def _handle_safely(self, message: Delivery) -> None:
        try:
            async with self._limiter:  # one turn at a time per sender: its queue (_senders) awaits each
                with trio.move_on_after(self.turn_timeout):
                    await self._handle(message)
        except Exception:
            self.log.exception("handling message %s failed", message.message_id)

    async def _handle(self, message: Delivery) -> None:
        if self.gateway.linked(message.sender) is None:
            if self.gate.may_pair(message.sender, message.text, direct=True):
                await self._reply(message.sender, await self.gateway.turn(message.sender, message.text))
            return
        self.gate.linked(message.sender)
        if message.kind != "text":
            await self._reply(message.sender, [UNSUPPORTED.format(kind=message.kind)])
            return
        if not message.text.strip():
            return
        if len(message.text) > self.max_text:
            await self._reply(message.sender, [TOO_LONG.format(n=len(message.text), limit=self.max_text)])
            return
        self.turns += 1
        try:
            replies = await self.gateway.turn(message.sender, approval_command(message.text))
        except ValueError as exc:
            replies = [f"Sorry, that did not work: {exc}."]
        await self._reply(message.sender, replies)

    async def _reply(self, to: str, replies: list[str]) -> None:
        for reply in replies:
            for chunk in chunk_text(reply, MAX_TEXT):
                with trio.fail_after(float(self.config.get("send_timeout", 20.0)) + 5):
                    await self._client.send_message(to=to, text=chunk)
                self.sent += 1

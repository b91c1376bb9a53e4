"""The webhook adapter: inbound messages are queued by the HTTP route, handled one sender at a
time through the brain's gateway, and every reply is POSTed to the callback URL.

Callback wire format (one POST per reply, ``Content-Type: application/json``)::

    {"platform": "webhook", "user": "<sender id>", "text": "<reply>", "reply_to": "<inbound id>"}

with the header ``X-Elowen-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with the
shared secret>`` so the receiver can check the POST came from this Elowen. A failed POST (an
error or a non-2xx answer) is logged and retried once after one second.

To write a Discord or Matrix adapter, keep the shape: ``run()`` connects to the platform and
loops over its incoming messages, each handled in its own task with ``await
gateway.turn(sender, text)``; the replies go back through the platform's send call.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import trio

__all__ = ["Inbound", "WebhookAdapter", "sign"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Inbound:
    """One inbound message: the sender's id, the text, and the id the callback echoes."""

    user: str
    text: str
    id: str


def sign(secret: str, body: bytes) -> str:
    """The ``X-Elowen-Signature`` value of ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class WebhookAdapter:
    """The adapter the brain runs for the ``webhook`` platform.

    Args:
        gateway: the brain's gateway (``await gateway.turn(user, text) -> list[str]``).
        config: the plugin's config (``secret``, ``callback_url``, ``timeout``, ``queue_size``).
        log: where to log (the plugin's logger).
    """

    def __init__(self, gateway: Any, config: Mapping[str, Any], log: logging.Logger = log) -> None:
        self.gateway = gateway
        self.platform = str(getattr(gateway, "platform", "webhook"))
        self.secret = str(config.get("secret", ""))
        self.callback_url = str(config.get("callback_url", ""))
        self.timeout = float(config.get("timeout", 10))
        self.log = log
        self._send, self._receive = trio.open_memory_channel[Inbound](int(config.get("queue_size", 100)))
        self._locks: dict[str, trio.Lock] = {}
        self.delivered = 0

    def submit(self, message: Inbound) -> None:
        """Queue an inbound message (called by the route; never waits).

        Raises:
            trio.WouldBlock: the queue is full.
            trio.ClosedResourceError: the adapter stopped.
        """
        self._send.send_nowait(message)

    async def run(self) -> None:
        """Handle queued messages until cancelled (the plugin or the brain is disabled)."""
        async with httpx.AsyncClient(timeout=self.timeout) as client, trio.open_nursery() as nursery:
            async for message in self._receive:
                nursery.start_soon(self._handle, client, message)

    def close(self) -> None:
        """Refuse further messages."""
        self._send.close()

    async def _handle(self, client: httpx.AsyncClient, message: Inbound) -> None:
        lock = self._locks.setdefault(message.user, trio.Lock())
        try:
            async with lock:  # one message of a sender at a time, in order
                try:
                    replies = await self.gateway.turn(message.user, message.text)
                except ValueError as exc:
                    replies = [f"Error: {exc}"]
                except RuntimeError as exc:  # the gateway closed: the platform is stopping
                    self.log.info("dropped a message of %s: %s", message.user, exc)
                    return
                for text in replies:
                    await self._deliver(client, message, text)
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(message.user, None)

    async def _deliver(self, client: httpx.AsyncClient, message: Inbound, text: str) -> None:
        body = json.dumps({"platform": self.platform, "user": message.user, "text": text, "reply_to": message.id},
                          ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "X-Elowen-Signature": sign(self.secret, body)}
        for attempt in (1, 2):
            try:
                resp = await client.post(self.callback_url, content=body, headers=headers)
                if resp.is_success:
                    self.delivered += 1
                    return
                problem = f"HTTP {resp.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            self.log.warning("callback to %s failed (attempt %d): %s", self.callback_url, attempt, problem)
            if attempt == 1:
                await trio.sleep(1.0)

"""The webhook endpoint Meta delivers to: a small ASGI app (served by hypercorn's trio worker
on its own port, because the signature covers the raw body and a header, which daemon plugin
routes do not see).

Wire rules, from Meta's WhatsApp Cloud API documentation ("Webhooks", "Set up webhooks",
Graph API v26.0):

* ``GET <path>?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C`` — the verification
  handshake: answer ``C`` (200) when ``T`` is the configured verify token, else 403.
* ``POST <path>`` — a delivery: a JSON body signed with ``X-Hub-Signature-256: sha256=<HMAC-SHA256
  of the raw body keyed with the app secret, hex>``. Answer 200 quickly; Meta retries
  deliveries that fail (so the same message id can arrive again).

Answers here: 200 ``ok``; 401 missing or bad signature (audited ``whatsapp.webhook``,
``denied``); 400 malformed JSON or not a ``whatsapp_business_account`` object; 413 body over
:data:`MAX_BODY`; 404/405 other paths and methods; 503 not configured.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

__all__ = ["MAX_BODY", "Delivery", "WebhookApp", "parse_delivery"]

MAX_BODY = 1024 * 1024
"""Bytes of one delivery accepted (Meta's batches stay far below)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One inbound WhatsApp message: ``message_id`` (``wamid.…``), ``sender`` (the ``wa_id``,
    digits), ``kind`` (``text``, ``image``, ``audio``, …) and ``text`` (``""`` unless
    ``kind == "text"``)."""

    message_id: str
    sender: str
    kind: str
    text: str


def parse_delivery(body: Any) -> tuple[list[Delivery], int]:
    """The messages of a webhook body and how many other items it carried (delivery
    statuses, other fields, unknown shapes: ignored and counted).

    Raises:
        ValueError: not a ``whatsapp_business_account`` object with an ``entry`` list.
    """
    if not isinstance(body, dict) or body.get("object") != "whatsapp_business_account" or not isinstance(body.get("entry"), list):
        raise ValueError("not a WhatsApp Business Account delivery")
    messages: list[Delivery] = []
    ignored = 0
    for entry in body["entry"]:
        for change in (entry or {}).get("changes") or [] if isinstance(entry, dict) else []:
            value = change.get("value") if isinstance(change, dict) else None
            if not isinstance(change, dict) or change.get("field") != "messages" or not isinstance(value, dict):
                ignored += 1
                continue
            ignored += len(value.get("statuses") or [])
            for msg in value.get("messages") or []:
                if not isinstance(msg, dict) or not isinstance(msg.get("id"), str) or not isinstance(msg.get("from"), str):
                    ignored += 1
                    continue
                kind = str(msg.get("type") or "unknown")
                text = ""
                if kind == "text":
                    text = str((msg.get("text") or {}).get("body") or "")
                elif kind == "button":
                    kind, text = "text", str((msg.get("button") or {}).get("text") or "")
                messages.append(Delivery(msg["id"][:200], msg["from"][:64], kind, text))
    return messages, ignored


Handler = Callable[[bytes, str | None], Awaitable[tuple[int, str]]]
Challenge = Callable[[str | None, str | None], Awaitable[tuple[int, str]]]


class WebhookApp:
    """The ASGI application: ``GET``/``POST`` on ``path``; ``on_delivery(raw_body,
    signature_header)`` and ``on_challenge(verify_token, challenge)`` give ``(status, text)``."""

    def __init__(self, path: str, on_delivery: Handler, on_challenge: Challenge) -> None:
        self.path = path
        self.on_delivery = on_delivery
        self.on_challenge = on_challenge

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] != self.path:
            await _answer(send, 404, "not found")
            return
        if scope["method"] == "GET":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if (query.get("hub.mode") or [""])[0] != "subscribe":
                await _answer(send, 400, "expected hub.mode=subscribe")
                return
            status, text = await self.on_challenge((query.get("hub.verify_token") or [None])[0], (query.get("hub.challenge") or [None])[0])
            await _answer(send, status, text)
            return
        if scope["method"] != "POST":
            await _answer(send, 405, "method not allowed")
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        try:
            if int(headers.get("content-length") or 0) > MAX_BODY:
                await _answer(send, 413, "body too large")
                return
        except ValueError:
            await _answer(send, 400, "bad content-length")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                await _answer(send, 413, "body too large")
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        status, text = await self.on_delivery(b"".join(chunks), headers.get("x-hub-signature-256"))
        await _answer(send, status, text)


async def _answer(send: Any, status: int, text: str) -> None:
    body = text.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})

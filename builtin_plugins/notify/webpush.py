"""Web push: the VAPID key of this instance and one push message to one subscription.

Protocols (IETF): the message is POSTed to the subscription's endpoint (RFC 8030 §5, headers
``TTL`` and ``Urgency``); its payload is encrypted for the browser's key with ``aes128gcm``
(RFC 8291, on RFC 8188 content coding) — done by pywebpush 2.x's ``WebPusher.encode`` —, and the
request carries ``Authorization: vapid t=<JWT>, k=<public key>`` (RFC 8292 §2–3, ES256 JWT with
``aud`` = the endpoint's origin, ``exp`` ≤ 24 h, ``sub`` = a contact URI) — made by py-vapid
1.9's ``Vapid02.sign``. The HTTP request itself goes through httpx, the project's client.

The key pair is generated on first use and kept in the plugin's data folder
(``$ELOWEN_HOME/plugins/notify/vapid_private.pem``, PKCS#8 PEM, mode 0600); the browser gets the
public key (``applicationServerKey``) from ``GET /notifications/push/key``. Replacing the file
invalidates every subscription (browsers must subscribe again).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02
from pywebpush import WebPusher

from elowen_sdk import ElowenError

__all__ = ["MAX_PAYLOAD", "PushError", "PushResult", "VapidKey", "check_endpoint", "encode_message", "send"]

log = logging.getLogger("elowen.plugin.notify.webpush")

MAX_PAYLOAD = 3000
"""Bytes of JSON payload kept before encryption (RFC 8291 §4 allows 3993 octets of plaintext
in the 4096-octet record; the rest is headroom)."""
KEY_FILE = "vapid_private.pem"


class PushError(ElowenError):
    """A subscription or a key that cannot be used."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class PushResult:
    """What one push request came to.

    Attributes:
        outcome: ``delivered`` (201/202), ``gone`` (404/410: drop the subscription),
            ``retry`` (429, 5xx, network error, timeout), ``failed`` (any other answer).
        status: the HTTP status, or ``None`` without an answer.
        detail: a short description for the delivery's ``last_error``.
    """

    outcome: str
    status: int | None
    detail: str


class VapidKey:
    """This instance's VAPID key pair (P-256), loaded from ``folder`` or generated there.

    Args:
        folder: the plugin's data folder.
        subject: the JWT ``sub`` claim (``mailto:…`` or ``https://…``, RFC 8292 §2.1).
    """

    def __init__(self, folder: Path, subject: str) -> None:
        path = folder / KEY_FILE
        if path.exists():
            self._vapid = Vapid02.from_pem(path.read_bytes())
            created = False
        else:
            folder.mkdir(parents=True, exist_ok=True)
            self._vapid = Vapid02()
            self._vapid.generate_keys()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(self._vapid.private_pem())
            created = True
        self.path = path
        self.subject = subject
        raw = self._vapid.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        self.public_key = _b64url(raw)
        """The public key as the browser's ``applicationServerKey``: base64url (no padding) of the
        65-octet uncompressed P-256 point."""
        if created:
            log.info("generated a VAPID key pair in %s", path)

    def headers(self, endpoint: str, *, ttl_s: int = 12 * 3600) -> dict[str, str]:
        """The ``Authorization`` header for a request to ``endpoint``: ``aud`` its origin,
        ``exp`` now + ``ttl_s`` (at most 24 h, RFC 8292 §2)."""
        parts = urlsplit(endpoint)
        claims = {"aud": f"{parts.scheme}://{parts.netloc}", "sub": self.subject, "exp": int(time.time()) + min(ttl_s, 24 * 3600 - 60)}
        signed: dict[str, str] = self._vapid.sign(claims)
        return {"Authorization": signed["Authorization"]}


def check_endpoint(endpoint: Any, p256dh: Any, auth: Any, *, allow_http: bool) -> None:
    """Validate a subscription as the browser's ``PushSubscription.toJSON()`` gives it.

    Raises:
        PushError: the endpoint is not an ``https://`` URL (``http://`` only with
            ``allow_http``), or the keys are not base64url of a 65-octet P-256 point and a
            16-octet secret (RFC 8291 §3.2).
    """
    if not isinstance(endpoint, str) or len(endpoint) > 2000:
        raise PushError("endpoint: a URL of at most 2000 characters")
    parts = urlsplit(endpoint)
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        raise PushError("endpoint: an https:// URL" + (" (or http://)" if allow_http else " (http:// is refused; see allow_insecure_endpoints)"))
    for name, value, size in (("keys.p256dh", p256dh, 65), ("keys.auth", auth, 16)):
        try:
            raw = base64.urlsafe_b64decode(str(value) + "=" * (-len(str(value)) % 4)) if isinstance(value, str) else b""
        except ValueError:
            raw = b""
        if len(raw) != size:
            raise PushError(f"{name}: base64url of {size} octets")


def encode_message(payload: dict[str, Any]) -> bytes:
    """The JSON of ``payload``, its ``body`` shortened so the whole fits :data:`MAX_PAYLOAD`."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    while len(data) > MAX_PAYLOAD and payload.get("body"):
        over = len(data) - MAX_PAYLOAD
        body = str(payload["body"])
        payload = {**payload, "body": body[: max(0, len(body) - over - 8)] + "…"}
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    return data


async def send(
    client: httpx.AsyncClient, key: VapidKey, subscription: dict[str, Any], payload: bytes, *, ttl: int, urgency: str, topic: str | None = None
) -> PushResult:
    """POST one encrypted message (see the module docstring) and classify the answer.

    Args:
        subscription: ``{"endpoint", "p256dh", "auth"}`` (a ``notify_push_subscriptions`` row).
        payload: the plaintext (JSON bytes, see :func:`encode_message`).
        ttl: seconds the push service keeps the message for an offline browser (RFC 8030 §5.2).
        urgency: RFC 8030 §5.3 value.
        topic: RFC 8030 §5.4 ``Topic`` (a newer message with the same topic replaces the older
            one while undelivered), or ``None``.
    """
    endpoint = subscription["endpoint"]
    pusher = WebPusher({"endpoint": endpoint, "keys": {"p256dh": subscription["p256dh"], "auth": subscription["auth"]}})
    body = pusher.encode(payload, content_encoding="aes128gcm")["body"]
    headers = {**key.headers(endpoint), "TTL": str(ttl), "Urgency": urgency, "Content-Encoding": "aes128gcm", "Content-Type": "application/octet-stream"}
    if topic:
        headers["Topic"] = topic
    try:
        resp = await client.post(endpoint, content=body, headers=headers)
    except httpx.HTTPError as exc:
        return PushResult("retry", None, f"{type(exc).__name__}: {exc}"[:300])
    status = resp.status_code
    detail = f"{status} {resp.text[:200]}".strip()
    if status in (200, 201, 202):
        return PushResult("delivered", status, detail)
    if status in (404, 410):
        return PushResult("gone", status, detail)
    if status == 429 or status >= 500:
        return PushResult("retry", status, detail)
    return PushResult("failed", status, detail)

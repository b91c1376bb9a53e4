"""A push service and a browser's push keys, scripted for the tests, on 127.0.0.1.

:class:`PushService` is a real HTTP server speaking the Web Push protocol's receiving side
(RFC 8030 §5: ``POST /push/<id>`` answered ``201 Created``); for every message it checks

* the VAPID authorisation (RFC 8292 §2–3): ``Authorization: vapid t=<JWT>, k=<key>``, a JWT
  signed ES256 by ``k`` (verified here with ``cryptography``, not with the sender's library),
  ``aud`` equal to the endpoint's origin, ``exp`` in the future and at most 24 h away, ``sub``
  a ``mailto:`` or ``https:`` URI, and ``k`` equal to the key the subscription was made with;
* ``TTL`` present (RFC 8030 §5.2), ``Content-Encoding: aes128gcm`` and an ``Urgency`` value of
  RFC 8030 §5.3;

and, playing the browser that holds the subscription's private key, **decrypts** the body
(RFC 8291 §3.4 key derivation, RFC 8188 record format) with code written from the RFCs.
A scripted ``status`` per subscription lets a test answer 410 (gone), 500 or 429.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["BrowserKeys", "PushService", "Received", "decrypt_aes128gcm"]


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


@dataclass
class BrowserKeys:
    """What a browser's PushManager keeps for one subscription: the P-256 key pair and the
    16-octet auth secret (RFC 8291 §2)."""

    private: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def public_raw(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)

    def subscription(self, endpoint: str) -> dict[str, Any]:
        """``PushSubscription.toJSON()``."""
        return {"endpoint": endpoint, "keys": {"p256dh": b64u(self.public_raw), "auth": b64u(self.auth)}}


def decrypt_aes128gcm(body: bytes, keys: BrowserKeys) -> bytes:
    """RFC 8291 §3.4 + RFC 8188 §2: decrypt a single-record ``aes128gcm`` Web Push message."""
    salt, rs, idlen = body[:16], int.from_bytes(body[16:20], "big"), body[20]
    as_public = body[21 : 21 + idlen]
    ciphertext = body[21 + idlen :]
    assert idlen == 65 and as_public[0] == 4, "keyid must be the sender's uncompressed P-256 key (RFC 8291 §4)"
    assert rs >= 18 and len(ciphertext) <= rs, "one record only (RFC 8291 §4)"
    peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), as_public)
    ecdh_secret = keys.private.exchange(ec.ECDH(), peer)
    prk_key = _hmac(keys.auth, ecdh_secret)
    key_info = b"WebPush: info\x00" + keys.public_raw + as_public
    ikm = _hmac(prk_key, key_info + b"\x01")
    prk = _hmac(salt, ikm)
    cek = _hmac(prk, b"Content-Encoding: aes128gcm\x00\x01")[:16]
    nonce = _hmac(prk, b"Content-Encoding: nonce\x00\x01")[:12]
    plain = AESGCM(cek).decrypt(nonce, ciphertext, None)
    stripped = plain.rstrip(b"\x00")
    assert stripped.endswith(b"\x02"), "the last record's padding delimiter is 0x02 (RFC 8188 §2)"
    return stripped[:-1]


def verify_vapid(header: str, audience: str) -> str:
    """Check an RFC 8292 ``Authorization`` header; returns the public key ``k``.

    Raises:
        AssertionError: naming what is wrong.
    """
    scheme, _, params = header.partition(" ")
    assert scheme.lower() == "vapid", f"scheme {scheme!r} is not vapid (RFC 8292 §3)"
    parts = dict(p.strip().split("=", 1) for p in params.split(","))
    token, key = parts["t"], parts["k"]
    head_b, claims_b, sig_b = token.split(".")
    head = json.loads(unb64u(head_b))
    assert head.get("alg") == "ES256", head
    claims = json.loads(unb64u(claims_b))
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(key))
    sig = unb64u(sig_b)
    assert len(sig) == 64, "JWS ES256 signature is r||s, 64 octets (RFC 7518 §3.4)"
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    try:
        public.verify(der, f"{head_b}.{claims_b}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise AssertionError("VAPID JWT signature does not verify") from None
    assert claims.get("aud") == audience, f"aud {claims.get('aud')!r} != {audience!r}"
    now = time.time()
    assert now < claims["exp"] <= now + 86400, f"exp {claims['exp']} not within 24 h (RFC 8292 §2)"
    assert str(claims.get("sub", "")).startswith(("mailto:", "https:")), claims.get("sub")
    return key


@dataclass
class Received:
    """One accepted push message."""

    sub_id: str
    headers: dict[str, str]
    plaintext: bytes

    @property
    def message(self) -> dict[str, Any]:
        return json.loads(self.plaintext)


class PushService:
    """The scripted push service (see the module docstring). Use as a context manager."""

    def __init__(self) -> None:
        self.keys: dict[str, BrowserKeys] = {}
        self.vapid_key: dict[str, str | None] = {}
        self.status: dict[str, int] = {}
        """Scripted answer per subscription id (default 201)."""
        self.received: list[Received] = []
        self.refused: list[str] = []
        """Why a request was refused (a check failed): each should never happen."""
        self.attempts: dict[str, int] = {}
        self.hold: dict[str, threading.Event] = {}
        """Subscriptions whose next accepted message is recorded and then answered only once the
        event is set (a sender killed meanwhile never learns it was accepted)."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def new_subscription(self, vapid_public_key: str | None = None) -> tuple[str, dict[str, Any]]:
        """A new browser subscription (``applicationServerKey`` = ``vapid_public_key``):
        ``(id, PushSubscription.toJSON())``."""
        sub_id = os.urandom(6).hex()
        self.keys[sub_id] = BrowserKeys()
        self.vapid_key[sub_id] = vapid_public_key
        return sub_id, self.keys[sub_id].subscription(f"{self.origin}/push/{sub_id}")

    def for_sub(self, sub_id: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.sub_id == sub_id]

    def __enter__(self) -> PushService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, text: str = "") -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                sub_id = self.path.rsplit("/", 1)[-1]
                with service._lock:
                    service.attempts[sub_id] = service.attempts.get(sub_id, 0) + 1
                keys = service.keys.get(sub_id)
                if not self.path.startswith("/push/") or keys is None:
                    return self._answer(404, "no such subscription")
                try:  # RFC 8292 §4.2: 401 for a bad token, 403 for a key other than the subscription's
                    key = verify_vapid(self.headers.get("Authorization", ""), service.origin)
                except Exception as exc:  # noqa: BLE001 - every failed check is reported
                    with service._lock:
                        service.refused.append(f"{type(exc).__name__}: {exc}")
                    return self._answer(401, str(exc))
                expected = service.vapid_key.get(sub_id)
                if expected is not None and key != expected:
                    with service._lock:
                        service.refused.append("k is not the applicationServerKey of the subscription")
                    return self._answer(403, "k is not the applicationServerKey of the subscription (RFC 8292 §3.2)")
                try:
                    assert self.headers.get("TTL", "").isdigit(), "TTL header missing (RFC 8030 §5.2)"
                    assert self.headers.get("Content-Encoding") == "aes128gcm", self.headers.get("Content-Encoding")
                    assert self.headers.get("Urgency", "normal") in ("very-low", "low", "normal", "high")
                    assert len(body) <= 4096, "a push message body is at most 4096 octets (RFC 8291 §4)"
                    plaintext = decrypt_aes128gcm(body, keys)
                except Exception as exc:  # noqa: BLE001 - every failed check is reported
                    with service._lock:
                        service.refused.append(f"{type(exc).__name__}: {exc}")
                    return self._answer(400, str(exc))
                scripted = service.status.get(sub_id, 201)
                if scripted != 201:
                    return self._answer(scripted, "scripted")
                with service._lock:
                    service.received.append(Received(sub_id, dict(self.headers.items()), plaintext))
                    gate = service.hold.pop(sub_id, None)
                if gate is not None:
                    gate.wait(60)
                self.send_response(201)
                self.send_header("Location", f"{service.origin}/message/{len(service.received)}")
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler

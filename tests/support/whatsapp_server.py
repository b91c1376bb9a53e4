"""A scripted WhatsApp Cloud API for tests: the Graph API's send-message route on 127.0.0.1 and a
webhook sender that signs deliveries the way Meta does.

Wire shapes from Meta's WhatsApp Cloud API documentation (Graph API v26.0):

* ``POST /v<N>/<phone number id>/messages`` with ``Authorization: Bearer <token>`` and a JSON
  body ``{"messaging_product": "whatsapp", "to": "<wa_id>", "type": "text", "text": {"body":
  "..."}}`` answers ``{"messaging_product": "whatsapp", "contacts": [{"input", "wa_id"}],
  "messages": [{"id": "wamid.…"}]}``; a wrong token answers 401 with a Graph error object.
* A webhook delivery is a POST of ``{"object": "whatsapp_business_account", "entry": [{"id",
  "changes": [{"field": "messages", "value": {"messaging_product", "metadata", "contacts",
  "messages": [...]}}]}]}`` with ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body,
  keyed with the app secret>``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

__all__ = ["GraphServer", "Sent", "delivery", "sign", "text_message"]

_ids = itertools.count(1)


@dataclass
class Sent:
    """One message the bot sent: ``phone_id``, ``to``, ``body``, ``version`` (``v26.0``)."""

    phone_id: str
    to: str
    body: str
    version: str


class GraphServer:
    """The scripted Graph API (a daemon thread); ``sent`` records every message, in order."""

    def __init__(self, *, token: str) -> None:
        self.token = token
        self.sent: list[Sent] = []
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                server.requests += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.strip("/").split("/")
                if self.headers.get("Authorization") != f"Bearer {server.token}":
                    self._json(401, {"error": {"message": "Invalid OAuth access token.", "type": "OAuthException", "code": 190}})
                    return
                if len(parts) != 3 or parts[2] != "messages":
                    self._json(404, {"error": {"message": "Unknown path", "type": "GraphMethodException", "code": 100}})
                    return
                data = json.loads(body)
                server.sent.append(Sent(parts[1], str(data.get("to")), str((data.get("text") or {}).get("body")), parts[0]))
                self._json(
                    200,
                    {
                        "messaging_product": "whatsapp",
                        "contacts": [{"input": data.get("to"), "wa_id": data.get("to")}],
                        "messages": [{"id": f"wamid.out{next(_ids)}"}],
                    },
                )

            def _json(self, status: int, payload: Any) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="graph-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> GraphServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)

    def to(self, wa_id: str) -> list[str]:
        """Bodies sent to ``wa_id``, in order."""
        return [s.body for s in list(self.sent) if s.to == wa_id]


def text_message(sender: str, text: str, *, message_id: str | None = None, kind: str = "text") -> dict[str, Any]:
    """One inbound message object (``type`` ``text``, or a media ``kind`` such as ``image``)."""
    msg: dict[str, Any] = {"from": sender, "id": message_id or f"wamid.in{next(_ids)}", "timestamp": "1764547200", "type": kind}
    if kind == "text":
        msg["text"] = {"body": text}
    else:
        msg[kind] = {"id": "media-1", "mime_type": "image/jpeg", "sha256": "00"}
    return msg


def delivery(*messages: dict[str, Any], statuses: int = 0, phone_id: str = "1234567890") -> dict[str, Any]:
    """A webhook body carrying ``messages`` (and ``statuses`` delivery-status items)."""
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_id},
        "contacts": [{"profile": {"name": "Ada"}, "wa_id": m["from"]} for m in messages],
        "messages": list(messages),
    }
    if statuses:
        value["statuses"] = [{"id": f"wamid.s{i}", "status": "delivered", "timestamp": "1764547200", "recipient_id": "1"} for i in range(statuses)]
    return {"object": "whatsapp_business_account", "entry": [{"id": "WABA1", "changes": [{"field": "messages", "value": value}]}]}


def sign(body: bytes, app_secret: str) -> str:
    """The ``X-Hub-Signature-256`` header value Meta sends for ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def post(url: str, payload: Any, *, app_secret: str | None, signature: str | None = None, raw: bytes | None = None) -> httpx.Response:
    """Deliver ``payload`` (or ``raw`` bytes) to the webhook at ``url``, signed with
    ``app_secret`` unless ``signature`` is given (``app_secret=None``: unsigned)."""
    body = raw if raw is not None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    elif app_secret is not None:
        headers["X-Hub-Signature-256"] = sign(body, app_secret)
    return httpx.post(url, content=body, headers=headers, timeout=10)

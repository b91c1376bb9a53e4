"""An OpenAI-compatible embeddings server for tests: real HTTP on 127.0.0.1, ``POST
/v1/embeddings`` in the wire format of the OpenAI API reference ("Create embeddings"):
request ``{"model", "input": str | [str]}``, answer ``{"object": "list", "data": [{"object":
"embedding", "index", "embedding"}], "model", "usage"}``.

The vectors are a deterministic bag of hashed words (dimension 64, or 32 for a model whose
name ends in ``-small``), so texts sharing words are close. Every request is recorded;
``hold`` (a threading.Event that is clear) makes requests wait until it is set.

It stands in for an embedding model in the fast tests only (the wire format is real, the
vectors are not meaningful beyond shared words); the real offline model is tested in
``test_local_model.py`` and ``test_local_onnx.py`` (the slow set).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["EmbedServer", "bag_vector"]


def bag_vector(text: str, dim: int = 64) -> list[float]:
    """The server's vector of ``text`` (L2-normalised)."""
    v = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        v[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dim] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


class EmbedServer:
    """``with EmbedServer() as s: s.url`` (ends in ``/v1``); ``s.requests`` the request bodies."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.status = 200
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                server.hold.wait(30)
                if self.path != "/v1/embeddings" or server.status != 200:
                    self._send(server.status if server.status != 200 else 404, {"error": {"message": "nope", "type": "invalid_request_error"}})
                    return
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                dim = 32 if str(body.get("model", "")).endswith("-small") else 64
                data = [{"object": "embedding", "index": i, "embedding": bag_vector(t, dim)} for i, t in enumerate(inputs)]
                data.reverse()  # the index, not the order, says which input a vector belongs to
                self._send(200, {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1}})

            def _send(self, status: int, doc: Any) -> None:
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:  # a client that gave up (the timeout tests)
                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        self._httpd = Quiet(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def inputs(self) -> list[str]:
        """Every text sent for embedding, in order."""
        out: list[str] = []
        for r in self.requests:
            out.extend(r["input"] if isinstance(r["input"], list) else [r["input"]])
        return out

    def __enter__(self) -> EmbedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hold.set()
        self._httpd.shutdown()
        self._httpd.server_close()

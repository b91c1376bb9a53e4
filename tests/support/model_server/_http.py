"""The HTTP side: a ThreadingHTTPServer in a daemon thread that records and answers requests."""

from __future__ import annotations

import gzip
import json
import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._gemini import count_tokens, gemini_method
from ._parse import parse_request
from ._render import STREAMERS, Event, error_body, full_body, new_id, tokens
from ._script import DefaultScript
from ._types import ParsedRequest, Script

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("model server: " + format, *args)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            raw = bytes(data)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            return gzip.decompress(raw)
        if encoding == "deflate":
            return zlib.decompress(raw)
        if encoding not in ("", "identity"):
            raise ValueError(f"unsupported request Content-Encoding {encoding!r}")
        return raw

    def _handle(self) -> None:
        owner = self.server.owner
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        if not isinstance(body, dict):
            body = {"_json": body}
        request = parse_request(self.command, self.path, dict(self.headers.items()), body)
        owner._record(request)
        if request.api == "other":
            if self.command == "POST" and request.path.endswith("/messages/count_tokens"):
                self._send_json(200, {"input_tokens": tokens(body)})
            elif self.command == "POST" and (gemini_method(request.path) or ("", ""))[1] == "countTokens":
                self._send_json(200, count_tokens(body))
            else:
                self._send_json(404, error_body("chat", 404, f"no route {request.path}"))
            return
        try:
            reply = owner.script(request)
            # Rendered up front, so a failure is a clean 500 and not a truncated stream.
            if reply.status >= 400:
                status = reply.status
                payload: Any = error_body(request.api, status, reply.error_message)
            elif request.stream:
                status, payload = 200, list(STREAMERS[request.api](request, reply))
            else:
                status, payload = 200, full_body(request, reply)
        except Exception as exc:  # a broken script must show up as a failing request, not a hang
            log.exception("model server script failed")
            self._send_json(500, error_body(request.api, 500, f"script failed: {exc!r}"))
            return
        if reply.delay > 0:
            time.sleep(reply.delay)
        if isinstance(payload, list):
            self._send_stream(payload)
        else:
            self._send_json(status, payload)

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", new_id("req_"))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, events: Sequence[Event]) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", new_id("req_"))
            self.end_headers()
            for name, payload in events:
                data = payload if isinstance(payload, str) else json.dumps(payload)
                frame = ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (the user interrupted the agent): normal, not an error.
            log.debug("model server: client went away mid-stream")
            self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("model server: error while serving %s", client_address)


class ModelServer:
    """A scripted model server on 127.0.0.1, serving from a background thread.

    ``url`` is ``http://127.0.0.1:PORT`` (no trailing slash, no ``/v1``). ``script`` may be
    replaced at any time. ``requests`` is a snapshot list of every :class:`ParsedRequest`
    received, in arrival order. Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, script: Script | None = None, *, host: str = "127.0.0.1") -> None:
        self.script: Script = script or DefaultScript()
        self._host = host
        self._requests: list[ParsedRequest] = []
        self._cond = threading.Condition()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL; raises ``RuntimeError`` before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("model server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[ParsedRequest]:
        """Every request received so far (a copy)."""
        with self._cond:
            return list(self._requests)

    def start(self) -> ModelServer:
        """Bind a free port and start serving in a daemon thread. Returns ``self``."""
        httpd = _HTTPServer((self._host, 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="elowen-test-model-server",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (in-flight streams are abandoned)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, request: ParsedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[ParsedRequest], Any], timeout: float = 60.0) -> ParsedRequest:
        """Block until a recorded request satisfies ``predicate``; return the first that does.

        Raises ``TimeoutError`` after ``timeout`` seconds (blocking: from trio code call it via
        ``trio.to_thread.run_sync``).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for request in self._requests:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no matching request within {timeout} s; got {[(r.api, r.path, r.prompt[:40]) for r in self._requests]}")
                self._cond.wait(remaining)

"""Fixtures for the inference relay tests: the scripted model server on 127.0.0.1, a real
SQLite store with the plugin schema, and a relay factory over an in-memory settings document."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from elowen.core.store import Store
from elowen_builtins.inference import SCHEMA_PATH, Relay
from tests.support.model_server import ModelServer, ParsedRequest, Reply, Script
from tests.support.model_server._http import _Handler


class HeaderServer(ModelServer):
    """The scripted model server plus extra response headers chosen per status, e.g.
    ``{429: {"retry-after": "1"}}``. The shared server has no way to set response headers;
    this swaps in a handler subclass that adds them (test-only use of its private handler),
    and widens the listen backlog for concurrency tests."""

    def __init__(self, script: Script | None = None, *, extra_headers: Mapping[int, Mapping[str, str]] | None = None) -> None:
        super().__init__(script)
        self.extra_headers = dict(extra_headers or {})

    def start(self) -> HeaderServer:
        super().start()
        extra = self.extra_headers

        class Handler(_Handler):
            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus
                # the client's delayed ACK adds ~40 ms to every answer on a reused connection.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send_json(self, status: int, payload: Any) -> None:
                try:
                    super()._send_json(status, payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    self.close_connection = True

            def send_response(self, code: int, message: str | None = None) -> None:
                super().send_response(code, message)
                for key, value in extra.get(code, {}).items():
                    self.send_header(key, value)

        assert self._httpd is not None
        self._httpd.RequestHandlerClass = Handler
        # socketserver listens with a backlog of 5: a burst of concurrent connects overflows it
        # and the kernel retransmits the dropped SYN a second later. Widen it.
        self._httpd.socket.listen(64)
        return self


class ReplySequence:
    """A script answering with ``replies`` in order (the last one repeats)."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.calls = 0

    def __call__(self, request: ParsedRequest) -> Reply:
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return reply


@pytest.fixture
def server() -> Iterator[HeaderServer]:
    with HeaderServer() as srv:
        yield srv


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    st = Store(tmp_path / "elowen.db")
    st.apply_plugin_schema("inference", SCHEMA_PATH.read_text(encoding="utf-8"), 1)
    try:
        yield st
    finally:
        st.close()


def provider_table(server: ModelServer, kind: str, **extra: Any) -> dict[str, Any]:
    """Settings of a provider pointed at the model server (fast retries for tests)."""
    base = server.url + "/v1" if kind == "openai" else server.url
    return {"kind": kind, "base_url": base, "timeout": 5.0, "max_retries": 2, "backoff": 0.01, **extra}


RelayFactory = Callable[..., Any]


@pytest.fixture
async def make_relay(store: Store) -> AsyncIterator[RelayFactory]:
    """``async with make_relay({"name": table, ...}, default_model="") as relay``."""
    relays: list[Relay] = []

    @asynccontextmanager
    async def factory(providers: Mapping[str, Any], **kwargs: Any) -> AsyncIterator[Relay]:
        doc = {"inference": {"providers": dict(providers)}}
        relay = Relay(lambda: doc, store, **kwargs)
        relays.append(relay)
        try:
            yield relay
        finally:
            await relay.aclose()

    yield factory
    for relay in relays:
        await relay.aclose()

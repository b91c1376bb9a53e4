"""Retries, backoff, retry-after, timeouts and connection failures, on real HTTP."""

from __future__ import annotations

import functools
import socket

import pytest
import trio

from elowen_builtins.inference import (
    BadResponse,
    ChatRequest,
    Message,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeout,
)
from elowen_builtins.inference.transport import RetryPolicy, retry_after
from tests.support.model_server import Reply

from .conftest import HeaderServer, ReplySequence, provider_table

HI = [Message("user", "hi")]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("status", [429, 503])
async def test_retry_then_success(server: HeaderServer, make_relay, kind: str, status: int) -> None:
    server.script = ReplySequence(Reply(status=status, error_message="busy"), Reply(status=status, error_message="busy"), Reply(text="finally"))
    async with make_relay({"p": provider_table(server, kind, max_retries=2)}) as relay:
        result = await relay.chat(ChatRequest("p/m", HI))
    assert result.text == "finally"
    assert len(server.requests) == 3


async def test_retries_exhausted_raise_the_last_status(server: HeaderServer, make_relay) -> None:
    server.script = lambda r: Reply(status=502, error_message="bad gateway upstream")
    async with make_relay({"p": provider_table(server, "openai", max_retries=2)}) as relay:
        with pytest.raises(ProviderHTTPError) as info:
            await relay.chat(ChatRequest("p/m", HI))
    assert info.value.status == 502 and "bad gateway upstream" in str(info.value)
    assert len(server.requests) == 3  # one attempt + max_retries


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_no_retry_on_other_4xx(server: HeaderServer, make_relay, kind: str, status: int) -> None:
    server.script = lambda r: Reply(status=status, error_message="your request is wrong")
    async with make_relay({"p": provider_table(server, kind, max_retries=3)}) as relay:
        with pytest.raises(ProviderHTTPError) as info:
            await relay.chat(ChatRequest("p/m", HI))
    assert info.value.status == status and "your request is wrong" in str(info.value)
    assert len(server.requests) == 1


async def test_retry_after_header_is_honoured(make_relay) -> None:
    with HeaderServer(extra_headers={429: {"retry-after": "1"}}) as server:
        server.script = ReplySequence(Reply(status=429, error_message="slow down"), Reply(text="ok"))
        async with make_relay({"p": provider_table(server, "anthropic", backoff=0.001)}) as relay:
            result = await relay.chat(ChatRequest("p/m", HI))
        first, second = server.requests
    assert result.text == "ok"
    assert second.received_at - first.received_at >= 0.95  # not the 1 ms backoff


async def test_retry_after_beyond_the_budget_is_not_waited_for(make_relay) -> None:
    with HeaderServer(extra_headers={429: {"retry-after": "30"}}) as server:
        server.script = ReplySequence(Reply(status=429, error_message="quota"), Reply(text="ok"))
        async with make_relay({"p": provider_table(server, "openai", max_retry_time=2)}) as relay:
            started = trio.current_time()
            with pytest.raises(ProviderHTTPError) as info:
                await relay.chat(ChatRequest("p/m", HI))
    assert info.value.status == 429 and trio.current_time() - started < 1.0
    assert len(server.requests) == 1


async def test_stream_retries_before_the_first_byte(server: HeaderServer, make_relay) -> None:
    server.script = ReplySequence(Reply(status=500, error_message="oops"), Reply(text="streamed after retry"))
    async with make_relay({"p": provider_table(server, "openai")}) as relay:
        result = await relay.chat(ChatRequest("p/m", HI, stream=True))
    assert result.text == "streamed after retry" and len(server.requests) == 2


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_timeout_raises_provider_timeout(server: HeaderServer, make_relay, kind: str, stream: bool) -> None:
    server.script = lambda r: Reply(text="too late", delay=1.5)
    async with make_relay({"p": provider_table(server, kind, timeout=0.3, max_retries=2)}) as relay:
        started = trio.current_time()
        with pytest.raises(ProviderTimeout):
            await relay.chat(ChatRequest("p/m", HI, stream=stream))
    assert trio.current_time() - started < 1.2  # the read timeout, not the delay; no retry
    assert len(server.requests) == 1


async def test_connection_refused_is_retried_then_raised(make_relay) -> None:
    with socket.socket() as sock:  # a port that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    table = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "max_retries": 2, "backoff": 0.05}
    async with make_relay({"p": table}) as relay:
        started = trio.current_time()
        with pytest.raises(ProviderConnectionError):
            await relay.chat(ChatRequest("p/m", HI))
    assert trio.current_time() - started >= 0.05 * 0.5 + 0.1 * 0.5  # two jittered waits happened


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=10, backoff=0.5)
    for attempt, full in [(0, 0.5), (1, 1.0), (2, 2.0), (6, 8.0)]:
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(full / 2 <= d <= full for d in delays)
        assert len(set(delays)) > 100  # jittered


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_stream_cut_midway_is_a_bad_response_not_a_retry(make_relay, kind: str) -> None:
    """A raw HTTP server on 127.0.0.1 that starts an SSE answer and hangs up halfway."""
    first = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "partial"}}]}\n\n'
        if kind == "openai"
        else b'event: message_start\ndata: {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 3}}}\n\n'
    )
    hits = 0

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal hits
        hits += 1
        await stream.receive_some(65536)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 100000\r\n\r\n"
        await stream.send_all(head + first)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        base = f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else "")
        async with make_relay({"p": {"kind": kind, "base_url": base, "backoff": 0.01}}) as relay:
            with pytest.raises(BadResponse, match="broke off|ended before"):
                await relay.chat(ChatRequest("p/m", HI, stream=True))
        nursery.cancel_scope.cancel()
    assert hits == 1

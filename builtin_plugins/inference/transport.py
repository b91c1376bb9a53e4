"""HTTP for the relay: one ``httpx.AsyncClient`` per provider, retries with backoff, SSE.

Retry policy (both protocols):

* retried: connection failures (connect error or timeout, a server that closed the connection
  before answering) and HTTP 408, 429, 500, 502, 503, 504 (and Anthropic's 529 "overloaded");
* never retried: any other 4xx, a read timeout (a slow model answers no faster on a second
  try, and the first attempt may still be billed), or a stream that broke off midway;
* delay: ``backoff · 2^attempt`` seconds, capped at 8 s, with "equal jitter" (half fixed, half
  random); a ``retry-after`` header (seconds or HTTP date, RFC 9110 §10.2.3) or OpenAI's
  ``retry-after-ms`` replaces it;
* bounded: at most ``max_retries`` extra attempts, and no retry whose wait would end more than
  ``max_retry_time`` seconds after the first attempt started.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from .errors import ContextTooLong, ProviderConnectionError, ProviderHTTPError, ProviderTimeout

__all__ = ["RETRY_STATUSES", "RetryPolicy", "error_detail", "iter_sse", "open_response", "retry_after"]

log = logging.getLogger("elowen.plugin.inference")

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
MAX_BACKOFF = 8.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_retries`` extra attempts; first delay ``backoff`` s; total wait bound
    ``max_retry_time`` s (measured from the first attempt)."""

    max_retries: int = 2
    backoff: float = 0.5
    max_retry_time: float = 60.0

    def delay(self, attempt: int) -> float:
        """The jittered delay before retry number ``attempt + 1`` (``attempt`` from 0), s."""
        full = min(MAX_BACKOFF, self.backoff * (2**attempt))
        return full / 2 + random.uniform(0, full / 2)


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The server's requested wait in seconds from ``retry-after-ms`` or ``retry-after``
    (delta-seconds or an HTTP date), or ``None`` when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms:
        with contextlib.suppress(ValueError):
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_detail(body: str) -> str:
    """The human message inside a provider's JSON error body (``error.message`` in both
    OpenAI and Anthropic shapes), else the body's start."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300]
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"][:300]
    if isinstance(err, str):
        return err[:300]
    return body[:300]


_OVERFLOW_MARKERS = (
    "context_length_exceeded",  # OpenAI error.code (Chat Completions and Responses APIs)
    "maximum context length",  # OpenAI and vLLM messages: "This model's maximum context length is N tokens…"
    "prompt is too long",  # Anthropic Messages API: "prompt is too long: N tokens > M maximum"
    "exceed_context_size_error",  # llama.cpp server's error type
    "exceeds the available context size",  # llama.cpp server's message
)


def context_overflow(status: int, body: str) -> bool:
    """Whether an error answer says the request does not fit the model's context window
    (markers of OpenAI, Anthropic, vLLM and llama.cpp server error bodies, as of 2026)."""
    if status not in (400, 413):
        return False
    lowered = body[:4000].lower()
    return any(marker in lowered for marker in _OVERFLOW_MARKERS)


async def open_response(
    client: httpx.AsyncClient,
    url: str,
    payload: Mapping[str, Any],
    *,
    policy: RetryPolicy,
    provider: str,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """POST ``payload`` as JSON and return the open (streaming) response with a 2xx status,
    retrying per :class:`RetryPolicy`. The caller must ``aclose()`` the response.

    Raises:
        ContextTooLong: the provider said the request does not fit the model's context.
        ProviderHTTPError: a non-retryable status, or the last retryable one.
        ProviderTimeout: a read/write/pool timeout.
        ProviderConnectionError: the last connection failure.
    """
    started = trio.current_time()
    attempt = 0
    while True:
        wait: float | None = None
        try:
            request = client.build_request("POST", url, json=payload, headers=headers)
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
            failure: Exception = ProviderConnectionError(f"{provider}: cannot reach {url}: {exc or type(exc).__name__}")
            failure.__cause__ = exc
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"{provider}: no answer from {url} within the timeout ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise ProviderConnectionError(f"{provider}: {url}: {exc or type(exc).__name__}") from exc
        else:
            if response.status_code < 400:
                return response
            try:
                body = (await response.aread()).decode("utf-8", "replace")
            except httpx.TimeoutException as exc:
                raise ProviderTimeout(f"{provider}: error body from {url} timed out") from exc
            except httpx.TransportError:
                body = ""
            finally:
                await response.aclose()
            if context_overflow(response.status_code, body):
                raise ContextTooLong(f"{provider}: the request does not fit the model's context: {error_detail(body)}")
            failure = ProviderHTTPError(response.status_code, body, provider=provider, detail=error_detail(body))
            if response.status_code not in RETRY_STATUSES:
                raise failure
            wait = retry_after(response.headers)
        if attempt >= policy.max_retries:
            raise failure
        delay = policy.delay(attempt) if wait is None else wait
        elapsed = trio.current_time() - started
        if elapsed + delay > policy.max_retry_time:
            log.info("%s: not retrying %s (would wait %.2f s; budget %.1f s)", provider, failure, delay, policy.max_retry_time)
            raise failure
        attempt += 1
        log.info("%s: %s; retry %d/%d in %.2f s", provider, failure, attempt, policy.max_retries, delay)
        await trio.sleep(delay)


async def iter_sse(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """Server-sent events of ``response`` as ``(event, data)`` pairs (``event`` is
    ``"message"`` when the stream names none; multi-line data joined with ``\\n``).
    Comments and ``id:``/``retry:`` fields are skipped (WHATWG HTML, "Server-sent events").

    Raises:
        ProviderTimeout: no data within the read timeout.
        BadResponse: the connection broke off midway (raised by the caller's parser).
    """
    event = ""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event or "message", "\n".join(data)

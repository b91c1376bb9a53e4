"""The provider interface and the HTTP provider base shared by the OpenAI and Anthropic
protocol classes."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any, Protocol

import httpx
import trio

from .config import ProviderConfig
from .errors import BadResponse, ProviderTimeout
from .transport import RetryPolicy, iter_sse, open_response
from .types import ChatRequest, ChatResult, Delta

__all__ = ["HTTPProvider", "Provider", "parse_arguments"]

DRAIN_TIMEOUT = 1.0  # seconds allowed for the bytes after a stream's end marker


class Provider(Protocol):
    """What the relay needs of a provider. ``complete`` and ``stream`` return results whose
    ``provider`` and ``latency_ms`` the relay fills in."""

    config: ProviderConfig

    async def complete(self, request: ChatRequest, model: str) -> ChatResult: ...

    def stream(self, request: ChatRequest, model: str) -> AsyncIterator[Delta | ChatResult]: ...

    async def aclose(self) -> None: ...


def parse_arguments(raw: Any, *, provider: str, tool: str) -> dict[str, Any]:
    """Tool-call arguments (a JSON object, or its text) as a dict; ``""`` is ``{}``.

    Raises:
        BadResponse: not a JSON object.
    """
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        raise BadResponse(f"{provider}: tool call {tool!r} has arguments that are not JSON: {str(raw)[:200]!r}") from None
    if not isinstance(value, dict):
        raise BadResponse(f"{provider}: tool call {tool!r} arguments are not a JSON object: {str(raw)[:200]!r}")
    return value


class HTTPProvider(ABC):
    """A provider behind an HTTP API: one ``httpx.AsyncClient`` (connection pool) per
    provider, timeouts from ``config.timeout``, retries per :class:`RetryPolicy`.

    Subclasses define :meth:`url`, :meth:`auth_headers`, :meth:`payload`, :meth:`parse` and
    :meth:`parse_stream`.

    Raises (at construction):
        ProviderConfigError: the API key's env var is unset or its file unreadable.
    """

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        headers = {**self.auth_headers(config.api_key()), **config.headers}
        self.policy = RetryPolicy(config.max_retries, config.backoff, config.max_retry_time)
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(config.timeout), headers=headers, follow_redirects=False)

    # -- protocol hooks ----------------------------------------------------------------------

    @abstractmethod
    def url(self) -> str:
        """The endpoint to POST to."""

    @abstractmethod
    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Headers sent with every request (credentials, protocol version)."""

    @abstractmethod
    def payload(self, request: ChatRequest, model: str, *, stream: bool) -> dict[str, Any]:
        """The JSON request body."""

    @abstractmethod
    def parse(self, data: Any, request: ChatRequest) -> ChatResult:
        """A non-streaming JSON answer as a result."""

    @abstractmethod
    def parse_stream(self, events: AsyncIterator[tuple[str, str]], request: ChatRequest) -> AsyncIterator[Delta | ChatResult]:
        """SSE ``(event, data)`` pairs as deltas, then one result."""

    # -- calls -------------------------------------------------------------------------------

    async def _open(self, request: ChatRequest, model: str, *, stream: bool) -> httpx.Response:
        payload = self.payload(request, model, stream=stream)
        return await open_response(self._client, self.url(), payload, policy=self.policy, provider=self.config.name)

    async def complete(self, request: ChatRequest, model: str) -> ChatResult:
        """One non-streaming call. Raises the :mod:`.errors` classes."""
        response = await self._open(request, model, stream=False)
        try:
            raw = await response.aread()
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"{self.config.name}: the answer timed out while arriving") from exc
        except httpx.TransportError as exc:
            raise BadResponse(f"{self.config.name}: the answer broke off: {exc}") from exc
        finally:
            await response.aclose()
        try:
            data = json.loads(raw)
        except ValueError:
            raise BadResponse(f"{self.config.name}: the answer is not JSON: {raw[:200]!r}") from None
        try:
            return self.parse(data, request)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BadResponse(f"{self.config.name}: unexpected answer shape ({exc!r}): {raw[:300]!r}") from None

    async def stream(self, request: ChatRequest, model: str) -> AsyncIterator[Delta | ChatResult]:
        """A streaming call: :class:`Delta` items, then one :class:`ChatResult`."""
        response = await self._open(request, model, stream=True)
        events = iter_sse(response)
        try:
            async with aclosing(self.parse_stream(events, request)) as items:
                async for item in items:
                    yield item
            # The parser stops at the protocol's end marker; read the stream's closing bytes
            # so the connection goes back to the pool instead of being reset.
            with trio.move_on_after(DRAIN_TIMEOUT):
                async for _ in events:
                    continue  # drain
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"{self.config.name}: the stream stalled past the timeout") from exc
        except httpx.TransportError as exc:
            raise BadResponse(f"{self.config.name}: the stream broke off: {exc}") from exc
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise BadResponse(f"{self.config.name}: unexpected stream event ({exc!r})") from None
        finally:
            await events.aclose()
            await response.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

"""The inference relay's exceptions: one hierarchy rooted at :class:`InferenceError`.

Messages never contain an API key: only provider names, URLs, HTTP statuses and (truncated)
response bodies.
"""

from __future__ import annotations

from elowen_sdk import ConfigError, ElowenError

__all__ = [
    "BadResponse",
    "InferenceError",
    "LocalModelUnavailable",
    "ContextTooLong",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderHTTPError",
    "ProviderTimeout",
    "UnknownProvider",
]


class InferenceError(ElowenError):
    """Base of every error raised by the relay."""


class UnknownProvider(InferenceError, LookupError):
    """A spec names a provider that is not configured (or a spec is malformed / missing)."""


class ProviderConfigError(InferenceError, ConfigError):
    """A provider's settings are invalid (unknown kind, bad URL, key env var not set…)."""


class ProviderHTTPError(InferenceError):
    """The provider answered with an HTTP error status (after any retries).

    Attributes:
        status: the HTTP status code.
        body: the response body as text, truncated to 2,000 characters.
        provider: the provider's name.
    """

    def __init__(self, status: int, body: str, *, provider: str = "", detail: str = "") -> None:
        self.status = status
        self.body = body[:2000]
        self.provider = provider
        where = f"{provider}: " if provider else ""
        super().__init__(f"{where}HTTP {status}: {detail or self.body[:300]}")


class ProviderTimeout(InferenceError, TimeoutError):
    """The provider did not answer within the provider's ``timeout`` (seconds, per read)."""


class ProviderConnectionError(InferenceError, ConnectionError):
    """The provider could not be reached (after any retries)."""


class BadResponse(InferenceError):
    """The provider's answer does not have the protocol's shape (or a stream broke off)."""


class ContextTooLong(InferenceError, ValueError):
    """The request does not fit the model's context window (the message gives both sizes)."""


class LocalModelUnavailable(InferenceError):
    """The embedded local model cannot run: llama-cpp-python or the model file is missing.
    The message says what to install."""

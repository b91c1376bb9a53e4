"""The relay's exceptions, one hierarchy rooted at :class:`InferenceError`: defined in
:mod:`elowen_sdk.errors` (consumers catch them without importing this plugin) and re-exported
here for the relay's own modules.

Messages never contain an API key: only provider names, URLs, HTTP statuses and (truncated)
response bodies.
"""

from __future__ import annotations

from elowen_sdk.errors import (
    BadResponse,
    ContextTooLong,
    InferenceError,
    LocalModelUnavailable,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeout,
    UnknownProvider,
)

__all__ = [
    "BadResponse",
    "ContextTooLong",
    "InferenceError",
    "LocalModelUnavailable",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderHTTPError",
    "ProviderTimeout",
    "UnknownProvider",
]

"""The ``inference`` builtin plugin: Elowen's LLM relay.

Other plugins reach it as ``ctx.service(elowen_sdk.services.InferenceService)``, with the chat
types and errors of :mod:`elowen_sdk.chat`; they never import this package. Its own API
(re-exported here, for the relay's tests and standalone use)::

    Relay(settings_getter, store, default_model="", settings_updater=None)
        await relay.chat(ChatRequest) -> ChatResult
        relay.stream(ChatRequest) -> ChatStream   # async iterator of Delta…, then ChatResult
        relay.providers() -> list[dict]
        relay.list_providers(include_builtin=False) / add_provider(name, kind, base_url, ...) / remove_provider(name)
    add_provider(settings, name, kind, base_url, api_key_env=None, ...)
    remove_provider(settings, name)
    list_providers(settings, include_builtin=False) -> list[dict]

See ``docs/inference.md``.
"""

from __future__ import annotations

from .config import BUILTIN_LOCAL, KINDS, ProviderConfig, add_provider, list_providers, remove_provider, split_spec
from .errors import (
    BadResponse,
    InferenceError,
    LocalModelUnavailable,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeout,
    UnknownProvider,
)
from .relay import ChatStream, Relay
from .types import ChatRequest, ChatResult, Delta, Message, ToolCall, ToolSpec, Usage
from .usage import SCHEMA_PATH, UsageLog

__all__ = [
    "BUILTIN_LOCAL",
    "KINDS",
    "SCHEMA_PATH",
    "BadResponse",
    "ChatRequest",
    "ChatResult",
    "ChatStream",
    "Delta",
    "InferenceError",
    "LocalModelUnavailable",
    "Message",
    "ProviderConfig",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderHTTPError",
    "ProviderTimeout",
    "Relay",
    "ToolCall",
    "ToolSpec",
    "UnknownProvider",
    "Usage",
    "UsageLog",
    "add_provider",
    "list_providers",
    "remove_provider",
    "split_spec",
]

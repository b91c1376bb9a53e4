"""The ``inference`` service: the LLM relay (offered by the builtin ``inference`` plugin).

A consumer declares ``service:inference`` and asks ``relay = ctx.service(InferenceService)``;
the request and result records (:class:`~elowen_sdk.chat.ChatRequest`, ``ChatResult``,
``Delta``, ``Message``…) and the errors (:class:`~elowen_sdk.errors.InferenceError` and its
subclasses) are in :mod:`elowen_sdk.chat`.

A *model spec* is ``"<provider>/<model>"`` (split at the first ``/``), or ``""`` for the relay's
default model. Provider names are those of ``[inference.providers.<name>]`` in
``config.toml``, plus ``local`` (the embedded model) when no provider has that name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from ..chat import ChatRequest, ChatResult, Delta
from ..contracts import service_contract

__all__ = ["ChatStream", "InferenceService"]


class ChatStream(Protocol):
    """A streaming call: an async iterator of :class:`~elowen_sdk.chat.Delta` items ending with
    the final :class:`~elowen_sdk.chat.ChatResult` (also kept as :attr:`result`), and an async
    context manager that closes the HTTP stream when left early. Iterate it once.

    Attributes:
        result: the final result once it arrived, else ``None``.
    """

    result: ChatResult | None

    def __aiter__(self) -> AsyncIterator[Delta | ChatResult]: ...

    async def aclose(self) -> None:
        """Stop the stream and release its connection (idempotent)."""
        ...

    async def __aenter__(self) -> ChatStream: ...

    async def __aexit__(self, *exc: object) -> None: ...


@service_contract("inference")
class InferenceService(Protocol):
    """The LLM relay (service ``"inference"``)."""

    async def chat(self, request: ChatRequest) -> ChatResult:
        """One call, the whole answer (with ``request.stream`` it streams on the wire and
        returns the assembled result). Token usage is recorded under ``request.purpose``.

        Raises:
            UnknownProvider, ProviderConfigError: the spec cannot be resolved.
            ProviderHTTPError, ProviderTimeout, ProviderConnectionError, BadResponse,
            ContextTooLong, LocalModelUnavailable: the call failed (after retries where they
            apply).
        """
        ...

    def stream(self, request: ChatRequest) -> ChatStream:
        """A streaming call. Resolution errors (``UnknownProvider``, ``ProviderConfigError``)
        are raised at once; call errors (as for :meth:`chat`) while iterating."""
        ...

    def providers(self) -> list[dict[str, Any]]:
        """Every provider the relay can use, sorted by name::

            {"name": str, "kind": "openai" | "anthropic" | "local" | None, "base_url": str,
             "source": "settings" | "builtin", "error": str | None}

        An invalid settings table is listed with its ``error`` (and ``kind`` ``None``).
        """
        ...

    def default_spec(self) -> str:
        """The spec a request with ``model_spec = ""`` uses.

        Raises:
            UnknownProvider: providers are configured but none is the default.
        """
        ...

    def readiness(self, spec: str = "") -> dict[str, Any]:
        """Whether a call with ``spec`` (``""``: the default) could be made now, judged without
        making one: ``{"spec": str, "ready": bool, "problem": str | None}``. Not ready: the
        spec does not resolve (no default model, unknown provider), the provider's settings
        are invalid or its key is missing, or the embedded model is not installed. A remote
        server that is down still counts as ready."""
        ...

    def list_providers(self, *, include_builtin: bool = False) -> list[dict[str, Any]]:
        """The configured providers for an admin, sorted by name::

            {"name", "kind", "base_url", "api_key_env", "api_key_file", "key_present": bool,
             "timeout": float (seconds), "max_retries": int, "error": str | None,
             "source": "settings" | "builtin"}

        The key itself is never included. With ``include_builtin``, the embedded model is
        listed as ``local`` (``source: "builtin"``) unless a provider has that name.
        """
        ...

    def add_provider(
        self,
        name: str,
        kind: str,
        base_url: str | None,
        api_key_env: str | None = None,
        *,
        api_key_file: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        """Add ``[inference.providers.<name>]`` to ``config.toml`` (validated, written
        atomically); returns the stored table. ``base_url`` may be ``None`` only for
        ``kind = "local"``; ``timeout`` is in seconds.

        Raises:
            ProviderConfigError: a bad name, kind, URL or env var name; the provider exists and
                ``replace`` is false; or both key sources are given.
        """
        ...

    def usage_since(self, since: str) -> dict[str, int]:
        """Token usage recorded by the relay since ``since`` (UTC ISO 8601, inclusive), every
        provider and purpose together: ``{"calls", "input_tokens", "output_tokens"}``."""
        ...

    def remove_provider(self, name: str) -> None:
        """Remove ``[inference.providers.<name>]`` from ``config.toml``.

        Raises:
            UnknownProvider: no such provider is configured.
        """
        ...

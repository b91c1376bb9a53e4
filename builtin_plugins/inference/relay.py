"""The relay: resolves ``<provider>/<model>`` specs against the providers in settings, calls
them, and records token usage.

Example::

    relay = Relay(lambda: kernel.settings.data, kernel.store)
    result = await relay.chat(ChatRequest("ollama/llama3.2", [Message("user", "Hi")]))
    async with relay.stream(ChatRequest("anthropic/claude-sonnet-4-5", msgs)) as stream:
        async for item in stream:          # Delta…, then the ChatResult
            ...
    await relay.aclose()
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing
from dataclasses import replace
from typing import Any

import trio

from . import config
from .anthropic import AnthropicProvider
from .base import Provider
from .config import BUILTIN_LOCAL, ProviderConfig, parse_provider, provider_tables, split_spec
from .errors import InferenceError, ProviderConfigError, UnknownProvider
from .local import DEFAULT_LOCAL_MODEL, LocalProvider, check_installed
from .openai import OpenAIProvider
from .types import ChatRequest, ChatResult, Delta, Usage
from .usage import UsageLog

__all__ = ["BUILTIN_LOCAL", "ChatStream", "PROVIDER_CLASSES", "Relay"]

log = logging.getLogger("elowen.plugin.inference")

"""The provider name that resolves to the embedded model when no provider of that name is
configured."""

PROVIDER_CLASSES: Mapping[str, Callable[[ProviderConfig], Provider]] = {
    "openai": OpenAIProvider,
    "anthropic": AnthropicProvider,
    "local": LocalProvider,
}


class ChatStream:
    """A streaming call: an async iterator of :class:`Delta` items ending with the final
    :class:`ChatResult` (also kept as :attr:`result`), and an async context manager that closes
    the HTTP stream when left early. Iterate it once."""

    def __init__(self, items: AsyncIterator[Delta | ChatResult]) -> None:
        self._items = items
        self.result: ChatResult | None = None

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> Delta | ChatResult:
        item = await self._items.__anext__()
        if isinstance(item, ChatResult):
            self.result = item
        return item

    async def aclose(self) -> None:
        """Stop the stream and release its connection (idempotent)."""
        await self._items.aclose()  # type: ignore[attr-defined]

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Relay:
    """The LLM relay (the ``"inference"`` service).

    Args:
        settings_getter: returns the current settings document (``Settings.data``); read on
            every call, so provider edits apply to the next call.
        store: the kernel store (usage rows go to ``inference_usage``), or ``None``.
        settings_updater: ``update(mutator)`` that changes ``config.toml`` (validated, atomic;
            the plugin context's ``update_settings``), used by :meth:`add_provider` and
            :meth:`remove_provider`; ``None``: they raise :class:`ProviderConfigError`.
        default_model: the spec used when a request's ``model_spec`` is ``""``. When this is
            ``""`` too: the configured ``kind = "local"`` provider (the one named ``local``
            first), else — only if no provider is configured at all — the embedded model
            ``local/smollm2``.
    """

    def __init__(
        self,
        settings_getter: Callable[[], Mapping[str, Any]],
        store: Any | None = None,
        *,
        default_model: str = "",
        settings_updater: Callable[[Callable[[dict[str, Any]], None]], Any] | None = None,
    ) -> None:
        self._settings = settings_getter
        self._update_settings = settings_updater
        self.usage = UsageLog(store)
        self.default_model = default_model
        self._cache: dict[str, tuple[ProviderConfig, Provider]] = {}
        self._retired: list[Provider] = []

    # -- providers ---------------------------------------------------------------------------

    def _tables(self) -> Mapping[str, Any]:
        return provider_tables(self._settings() or {})

    def providers(self) -> list[dict[str, Any]]:
        """Every provider the relay can use, sorted by name::

            {"name", "kind", "base_url", "source": "settings" | "builtin", "error": str | None}

        ``builtin`` is the embedded model, listed as ``local`` when no provider has that name.
        An invalid settings table is listed with its ``error``.
        """
        out: list[dict[str, Any]] = []
        tables = self._tables()
        for name, table in tables.items():
            row = {"name": name, "kind": None, "base_url": "", "source": "settings", "error": None}
            try:
                cfg = parse_provider(name, table)
                row.update(kind=cfg.kind, base_url=cfg.base_url)
            except InferenceError as exc:
                row["error"] = str(exc)
            out.append(row)
        if BUILTIN_LOCAL not in tables:
            out.append({"name": BUILTIN_LOCAL, "kind": "local", "base_url": "", "source": "builtin", "error": None})
        return sorted(out, key=lambda r: r["name"])

    def list_providers(self, *, include_builtin: bool = False) -> list[dict[str, Any]]:
        """The configured providers as an admin sees them (see :func:`.config.list_providers`:
        no key value, only whether it is present)."""
        return config.list_providers(_SettingsView(self), include_builtin=include_builtin)

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
        """Add ``[inference.providers.<name>]`` (see :func:`.config.add_provider`); returns the
        stored table.

        Raises:
            ProviderConfigError: invalid values, the provider exists and not ``replace``, or
                the relay cannot write settings.
        """
        return config.add_provider(
            _SettingsView(self),
            name,
            kind,
            base_url,
            api_key_env,
            api_key_file=api_key_file,
            timeout=timeout,
            max_retries=max_retries,
            replace=replace,
        )

    def remove_provider(self, name: str) -> None:
        """Remove ``[inference.providers.<name>]``.

        Raises:
            UnknownProvider: no such provider is configured.
            ProviderConfigError: the relay cannot write settings.
        """
        config.remove_provider(_SettingsView(self), name)

    def default_spec(self) -> str:
        """The spec a request with ``model_spec = ""`` uses.

        Raises:
            UnknownProvider: providers are configured but none is the default.
        """
        if self.default_model:
            return self.default_model
        tables = self._tables()
        local = sorted(n for n, t in tables.items() if isinstance(t, Mapping) and t.get("kind") == "local")
        if local:
            name = BUILTIN_LOCAL if BUILTIN_LOCAL in local else local[0]
            model = tables[name].get("default_model") or DEFAULT_LOCAL_MODEL
            return f"{name}/{model}"
        if not tables:
            return f"{BUILTIN_LOCAL}/{DEFAULT_LOCAL_MODEL}"
        raise UnknownProvider(
            f"no default model: set default_model in [plugins.inference.config] (e.g. '{sorted(tables)[0]}/<model>') or name a model in the request"
        )

    def readiness(self, spec: str = "") -> dict[str, Any]:
        """Whether a call with ``spec`` (``""``: :meth:`default_spec`) could be made now,
        judged without making one: ``{"spec": str, "ready": bool, "problem": str | None}``
        (``spec``: the resolved spec when it resolves, else the one given).

        Not ready (``problem`` says why): no default model, an unknown provider or no model
        named, invalid provider settings or a missing API key, or — for a ``local`` provider —
        llama-cpp-python or the model file missing. A remote server that is down still counts
        as ready: only a call can tell.
        """
        resolved = spec
        try:
            resolved = spec or self.default_spec()
            name, model = split_spec(resolved)
            cfg = self._config(name)
            if cfg.kind == "local":
                check_installed(cfg)
            else:
                cfg.api_key()
                if not (model or cfg.default_model):
                    raise UnknownProvider(f"spec {resolved!r} names no model: use '{name}/<model>'")
        except InferenceError as exc:
            return {"spec": resolved, "ready": False, "problem": str(exc)}
        return {"spec": resolved, "ready": True, "problem": None}

    def _config(self, name: str) -> ProviderConfig:
        tables = self._tables()
        if name in tables:
            return parse_provider(name, tables[name])
        if name == BUILTIN_LOCAL:
            return ProviderConfig(name=BUILTIN_LOCAL, kind="local")
        known = ", ".join(sorted(set(tables) | {BUILTIN_LOCAL}))
        raise UnknownProvider(f"unknown provider {name!r}; configured: {known}")

    def resolve(self, spec: str) -> tuple[Provider, str]:
        """``(provider, model)`` for a spec (``""``: :meth:`default_spec`).

        Raises:
            UnknownProvider: a malformed spec, an unknown provider, or no model named.
            ProviderConfigError: the provider's settings are invalid or its key is missing.
        """
        name, model = split_spec(spec or self.default_spec())
        cfg = self._config(name)
        model = model or cfg.default_model
        if not model and cfg.kind != "local":
            raise UnknownProvider(f"spec {spec!r} names no model: use '{name}/<model>'")
        cached = self._cache.get(name)
        if cached is not None and cached[0] == cfg:
            return cached[1], model
        provider = PROVIDER_CLASSES[cfg.kind](cfg)
        if cached is not None:
            self._retired.append(cached[1])  # may still serve an in-flight call
        self._cache[name] = (cfg, provider)
        return provider, model

    # -- calls -------------------------------------------------------------------------------

    def _finish(self, result: ChatResult, name: str, model: str, started: float) -> ChatResult:
        latency = int((trio.current_time() - started) * 1000)
        return replace(result, provider=name, model=result.model or model, latency_ms=latency)

    async def chat(self, request: ChatRequest) -> ChatResult:
        """One call, the whole answer. With ``request.stream`` it streams on the wire and
        returns the assembled result.

        Raises:
            UnknownProvider, ProviderConfigError: the spec cannot be resolved.
            ProviderHTTPError, ProviderTimeout, ProviderConnectionError, BadResponse,
            LocalModelUnavailable: the call failed (after retries where they apply).
        """
        if request.stream:
            async with self.stream(request) as stream:
                async for _ in stream:
                    continue  # drain: the result is kept on the stream
            if stream.result is None:  # the provider's parser always ends with a result
                raise InferenceError("stream ended without a result")
            return stream.result
        provider, model = self.resolve(request.model_spec)
        name = provider.config.name
        started = trio.current_time()
        result: ChatResult | None = None
        try:
            result = self._finish(await provider.complete(request, model), name, model, started)
            return result
        finally:
            self._record(name, model, result, started, request.purpose)

    def stream(self, request: ChatRequest) -> ChatStream:
        """A streaming call (see :class:`ChatStream`). Resolution errors are raised at once;
        call errors (as for :meth:`chat`) while iterating."""
        provider, model = self.resolve(request.model_spec)
        return ChatStream(self._stream_items(provider, model, request))

    async def _stream_items(self, provider: Provider, model: str, request: ChatRequest) -> AsyncIterator[Delta | ChatResult]:
        name = provider.config.name
        started = trio.current_time()
        result: ChatResult | None = None
        try:
            async with aclosing(provider.stream(request, model)) as items:  # type: ignore[type-var]
                async for item in items:
                    if isinstance(item, ChatResult):
                        item = result = self._finish(item, name, model, started)
                    yield item
        finally:
            self._record(name, model, result, started, request.purpose)

    def usage_since(self, since: str) -> dict[str, int]:
        """Token usage since ``since`` (UTC ISO 8601), all providers: ``{"calls",
        "input_tokens", "output_tokens"}`` (contract :class:`~elowen_sdk.services.InferenceService`)."""
        rows = self.usage.totals(since)
        return {key: sum(int(r[key] or 0) for r in rows) for key in ("calls", "input_tokens", "output_tokens")}

    def _record(self, name: str, model: str, result: ChatResult | None, started: float, purpose: str) -> None:
        latency = result.latency_ms if result else int((trio.current_time() - started) * 1000)
        self.usage.record(
            provider=name,
            model=model,
            usage=result.usage if result else Usage(),
            latency_ms=latency,
            ok=result is not None,
            purpose=purpose,
        )

    async def aclose(self) -> None:
        """Close every provider's connection pool."""
        providers = [p for _, p in self._cache.values()] + self._retired
        self._cache.clear()
        self._retired.clear()
        for provider in providers:
            await provider.aclose()


class _SettingsView:
    """``data`` and ``update(mutator)`` over a relay's settings callbacks (what the helpers of
    :mod:`.config` take)."""

    def __init__(self, relay: Relay) -> None:
        self._relay = relay

    @property
    def data(self) -> Mapping[str, Any]:
        return self._relay._settings() or {}

    def update(self, mutator: Callable[[dict[str, Any]], None]) -> Any:
        if self._relay._update_settings is None:
            raise ProviderConfigError("this relay cannot change settings (the inference plugin lacks settings.write)")
        return self._relay._update_settings(mutator)

"""Provider settings: ``[inference.providers.<name>]`` in ``config.toml``, model specs, keys,
and the add / list / remove helpers behind ``elowen provider …`` and the API.

Shape (one table per provider)::

    [inference.providers.openrouter]
    kind = "openai"                      # "openai" | "anthropic" | "local"
    base_url = "https://openrouter.ai/api/v1"
    api_key_env = "OPENROUTER_API_KEY"   # name of an environment variable holding the key
    # api_key_file = "~/.config/elowen/openrouter.key"   # or a file holding it
    timeout = 60                         # seconds per HTTP read / connect
    max_retries = 2                      # extra attempts on connect errors, 408, 429, 5xx
    backoff = 0.5                        # first retry delay, seconds (doubles each time)
    max_retry_time = 60                  # bound on the total time spent waiting to retry, s
    headers = { "HTTP-Referer" = "https://example.org" }

A key itself is never written to ``config.toml``: only the environment variable's name or the
key file's path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from .errors import ProviderConfigError, UnknownProvider

__all__ = [
    "BUILTIN_LOCAL",
    "KINDS",
    "ProviderConfig",
    "add_provider",
    "list_providers",
    "parse_provider",
    "provider_tables",
    "remove_provider",
    "split_spec",
]

Kind = Literal["openai", "anthropic", "local"]
KINDS: tuple[str, ...] = ("openai", "anthropic", "local")
BUILTIN_LOCAL = "local"
"""The name the embedded model answers to when no provider has taken it."""

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_KNOWN_KEYS = frozenset(
    {
        "kind",
        "base_url",
        "api_key_env",
        "api_key_file",
        "timeout",
        "max_retries",
        "backoff",
        "max_retry_time",
        "headers",
        "model_path",
        "n_ctx",
        "n_threads",
        "default_model",
    }
)
# Header names that carry credentials: refused in config, keys come from env vars or files.
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """One provider's validated settings (see the module docstring for the keys).

    ``model_path``/``n_ctx``/``n_threads`` are for ``kind = "local"`` only; ``default_model``
    is the model used when the relay's default spec is just this provider (local: a label).
    """

    name: str
    kind: Kind
    base_url: str = ""
    api_key_env: str | None = None
    api_key_file: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    backoff: float = 0.5
    max_retry_time: float = 60.0
    headers: Mapping[str, str] = field(default_factory=dict)
    model_path: str | None = None
    n_ctx: int = 2048
    n_threads: int | None = None
    default_model: str = ""

    def api_key(self) -> str | None:
        """The API key from ``api_key_env`` or ``api_key_file``; ``None`` when neither is set
        (local servers such as Ollama need none).

        Raises:
            ProviderConfigError: the environment variable is unset or empty, or the key file
                cannot be read or is empty.
        """
        if self.api_key_env:
            value = os.environ.get(self.api_key_env, "").strip()
            if not value:
                raise ProviderConfigError(f"provider {self.name!r}: environment variable {self.api_key_env} is not set")
            return value
        if self.api_key_file:
            path = Path(self.api_key_file).expanduser()
            try:
                value = path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ProviderConfigError(f"provider {self.name!r}: cannot read key file {path}: {exc.strerror}") from None
            if not value:
                raise ProviderConfigError(f"provider {self.name!r}: key file {path} is empty")
            return value
        return None


def split_spec(spec: str) -> tuple[str, str]:
    """``"openrouter/meta-llama/llama-3-8b"`` → ``("openrouter", "meta-llama/llama-3-8b")``:
    split at the first ``/``. A spec without ``/`` is a provider with an empty model.

    Raises:
        UnknownProvider: an empty spec or an empty provider part.
    """
    provider, _, model = spec.strip().partition("/")
    if not provider:
        raise UnknownProvider(f"bad model spec {spec!r}: expected '<provider>/<model>'")
    return provider, model


def _fail(name: str, msg: str) -> ProviderConfigError:
    return ProviderConfigError(f"inference.providers.{name}: {msg}")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ProviderConfigError(f"bad provider name {name!r}: use 1-63 of a-z 0-9 _ - (starting with a letter or digit)")


def _check_url(name: str, url: object) -> str:
    if not isinstance(url, str) or not url:
        raise _fail(name, "base_url is required (http:// or https:// URL)")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise _fail(name, f"base_url {url!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise _fail(name, f"base_url {url!r} must be an http:// or https:// URL with a host")
    if parsed.userinfo:
        raise _fail(name, "base_url must not contain credentials; use api_key_env or api_key_file")
    if parsed.query or parsed.fragment:
        raise _fail(name, f"base_url {url!r} must not have a query or fragment")
    return url.rstrip("/")


def _num(name: str, table: Mapping[str, Any], key: str, default: float, low: float, *, integer: bool = False) -> Any:
    value = table.get(key, default)
    ok_type = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, ok_type) or value < low:
        kind = "an integer" if integer else "a number"
        raise _fail(name, f"{key} must be {kind} ≥ {low}, got {value!r}")
    return value


def _check_env(name: str, var: object) -> str:
    if not isinstance(var, str) or not _ENV_RE.match(var):
        raise _fail(
            name,
            "api_key_env must be the NAME of an environment variable (letters, digits, _), not the key itself",
        )
    return var


def parse_provider(name: str, table: object) -> ProviderConfig:
    """Validate one ``[inference.providers.<name>]`` table.

    Raises:
        ProviderConfigError: naming the provider and the key that is wrong.
    """
    _check_name(name)
    if not isinstance(table, Mapping):
        raise _fail(name, "must be a table")
    unknown = set(table) - _KNOWN_KEYS
    if unknown:
        raise _fail(name, f"unknown keys {sorted(unknown)}; known: {', '.join(sorted(_KNOWN_KEYS))}")
    kind = table.get("kind")
    if kind not in KINDS:
        raise _fail(name, f"kind must be one of {list(KINDS)}, got {kind!r}")
    base_url = _check_url(name, table.get("base_url")) if kind != "local" else ""
    env = table.get("api_key_env")
    key_file = table.get("api_key_file")
    if env is not None:
        _check_env(name, env)
    if key_file is not None and (not isinstance(key_file, str) or not key_file):
        raise _fail(name, "api_key_file must be a path")
    if env is not None and key_file is not None:
        raise _fail(name, "set api_key_env or api_key_file, not both")
    headers = table.get("headers", {})
    if not isinstance(headers, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise _fail(name, "headers must be a table of strings")
    secret = sorted(k for k in headers if k.lower() in _SECRET_HEADERS)
    if secret:
        raise _fail(name, f"headers {secret} carry credentials; use api_key_env or api_key_file")
    model_path = table.get("model_path")
    if model_path is not None and (not isinstance(model_path, str) or not model_path):
        raise _fail(name, "model_path must be a path to a GGUF file")
    n_threads = table.get("n_threads")
    if n_threads is not None:
        n_threads = _num(name, table, "n_threads", 1, 1, integer=True)
    default_model = table.get("default_model", "")
    if not isinstance(default_model, str):
        raise _fail(name, "default_model must be a string")
    return ProviderConfig(
        name=name,
        kind=kind,
        base_url=base_url,
        api_key_env=env,
        api_key_file=key_file,
        timeout=float(_num(name, table, "timeout", 60.0, 0.001)),
        max_retries=int(_num(name, table, "max_retries", 2, 0, integer=True)),
        backoff=float(_num(name, table, "backoff", 0.5, 0)),
        max_retry_time=float(_num(name, table, "max_retry_time", 60.0, 0)),
        headers=dict(headers),
        model_path=model_path,
        n_ctx=int(_num(name, table, "n_ctx", 2048, 128, integer=True)),
        n_threads=n_threads,
        default_model=default_model,
    )


def provider_tables(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The raw ``[inference.providers]`` tables of a settings document (``{}`` if absent)."""
    inference = doc.get("inference")
    if not isinstance(inference, Mapping):
        return {}
    providers = inference.get("providers")
    return providers if isinstance(providers, Mapping) else {}


# ------------------------------------------------------------------ management helpers


def add_provider(
    settings: Any,
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
    """Add ``[inference.providers.<name>]`` through ``settings.update`` (it changes
    ``config.toml`` through the kernel: validated, atomic write, mode 0600).

    ``base_url`` may be ``None`` only for ``kind = "local"``. Returns the stored table.

    Raises:
        ProviderConfigError: a bad name, kind, URL or env var name; the provider exists and
            ``replace`` is false; or both key sources are given.
    """
    table: dict[str, Any] = {"kind": kind}
    if base_url:
        table["base_url"] = base_url.rstrip("/")
    if api_key_env:
        table["api_key_env"] = api_key_env
    if api_key_file:
        table["api_key_file"] = api_key_file
    if timeout is not None:
        table["timeout"] = timeout
    if max_retries is not None:
        table["max_retries"] = max_retries
    parse_provider(name, table)  # validate before touching the file

    def mutate(doc: dict[str, Any]) -> None:
        providers = doc.setdefault("inference", {}).setdefault("providers", {})
        if name in providers and not replace:
            raise ProviderConfigError(f"provider {name!r} already exists; remove it first")
        providers[name] = table

    settings.update(mutate)
    return table


def remove_provider(settings: Any, name: str) -> None:
    """Remove ``[inference.providers.<name>]`` through ``settings.update``.

    Raises:
        UnknownProvider: no such provider is configured.
    """

    def mutate(doc: dict[str, Any]) -> None:
        providers = (doc.get("inference") or {}).get("providers") or {}
        if name not in providers:
            raise UnknownProvider(f"no provider {name!r} is configured")
        del providers[name]
        if not providers:
            doc["inference"].pop("providers")
        if not doc["inference"]:
            doc.pop("inference")

    settings.update(mutate)


def list_providers(settings: Any, *, include_builtin: bool = False) -> list[dict[str, Any]]:
    """Every configured provider, sorted by name, as JSON-ready dicts::

        {"name", "kind", "base_url", "api_key_env", "api_key_file", "key_present": bool,
         "timeout", "max_retries", "error": None | str, "source": "settings" | "builtin"}

    ``settings`` is the kernel's Settings (its current snapshot is read; nothing is written).
    An invalid table is listed with its ``error`` instead of raising. The key's value is never
    included, only whether it is present. With ``include_builtin``, the embedded model is
    listed too as ``local`` (``source: "builtin"``) unless a provider already has that name —
    the relay always offers it (see ``Relay.providers``).
    """
    out: list[dict[str, Any]] = []
    tables = provider_tables(settings.data)
    if include_builtin and BUILTIN_LOCAL not in tables:
        out.append(
            {
                "name": BUILTIN_LOCAL,
                "kind": "local",
                "base_url": "",
                "api_key_env": None,
                "api_key_file": None,
                "key_present": False,
                "timeout": None,
                "max_retries": 0,
                "error": None,
                "source": "builtin",
            }
        )
    for name, table in sorted(tables.items()):
        raw = table if isinstance(table, Mapping) else {}
        row: dict[str, Any] = {
            "name": name,
            "kind": raw.get("kind"),
            "base_url": raw.get("base_url", ""),
            "api_key_env": raw.get("api_key_env"),
            "api_key_file": raw.get("api_key_file"),
            "key_present": False,
            "timeout": raw.get("timeout", 60.0),
            "max_retries": raw.get("max_retries", 2),
            "error": None,
            "source": "settings",
        }
        try:
            cfg = parse_provider(name, table)
        except ProviderConfigError as exc:
            row["error"] = str(exc)
        else:
            try:
                row["key_present"] = cfg.api_key() is not None
            except ProviderConfigError:
                row["key_present"] = False
        out.append(row)
    return sorted(out, key=lambda r: r["name"])

"""The exec grammar: which executor (provider) and model runs a task, built from the executors
the enabled plugins registered. Nothing here knows which providers exist: names, aliases and
model rules come from each provider object (:class:`elowen_sdk.providers.Provider` members, read
with defaults so an in-process executor such as the brain's ``elowen`` needs none of them).

The table of rules is in :mod:`elowen_sdk.services.executors`. This module is pure (no I/O):
:class:`Grammar` over :class:`Entry` records, and :func:`exec_settings` for the ``[execs]``
settings table.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from elowen_sdk.providers import MODEL_RE, Provider
from elowen_sdk.services.executors import ExecNotAllowed, ExecSettings, ExecSpecError, ExecutorInfo, ExecutorUnavailable, ResolvedExec, UnknownExecutor

__all__ = ["DEFAULT_ALLOWED", "DEFAULT_FALLBACK", "Entry", "Grammar", "entry_of", "exec_settings"]

DEFAULT_ALLOWED: tuple[str, ...] = ("*",)
"""Default of ``[execs] allowed``: every executor an enabled plugin provides."""
DEFAULT_FALLBACK = "sonnet"
"""Default of ``[execs] fallback`` (the spec of a task that names none): Claude Code's
``sonnet`` alias, as before the registry; it resolves only while that provider is enabled."""

_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$")


@dataclass(frozen=True, slots=True)
class Entry:
    """One executor as the grammar sees it (see :class:`~elowen_sdk.providers.Provider` for
    the meaning of the grammar fields). ``enabled=False``: its plugin was seen providing it
    and is disabled now, so its specs answer "unavailable" instead of "unknown"."""

    name: str
    plugin: str
    kind: str = "cli"
    enabled: bool = True
    display_name: str = ""
    aliases: Mapping[str, str] = field(default_factory=dict)
    models: tuple[str, ...] = ()
    default_model: str = ""
    slash_models: bool = False
    plain_models: bool = False
    requires_model: bool = False
    model_pattern: re.Pattern[str] = MODEL_RE
    model_hint: str = "a model name"

    def info(self) -> ExecutorInfo:
        """The record :meth:`~elowen_sdk.services.executors.ExecutorsService.executors` lists."""
        examples = [*self.aliases, *(f"{self.name}:{m}" for m in self.models)]
        if not self.requires_model:
            examples.insert(0, self.name)
        return ExecutorInfo(
            name=self.name,
            plugin=self.plugin,
            display_name=self.display_name or self.name,
            kind=self.kind,
            enabled=self.enabled,
            aliases=dict(self.aliases),
            models=self.models,
            default_model=self.default_model,
            slash_models=self.slash_models,
            plain_models=self.plain_models,
            model_hint=self.model_hint,
            examples=tuple(dict.fromkeys(examples)),
        )

    def to_json(self) -> dict[str, Any]:
        """What is remembered of a seen executor across restarts (no compiled pattern)."""
        return {
            "plugin": self.plugin,
            "kind": self.kind,
            "display_name": self.display_name,
            "aliases": dict(self.aliases),
            "slash_models": self.slash_models,
            "plain_models": self.plain_models,
        }

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> Entry:
        """A disabled entry from :meth:`to_json` data."""
        raw = data.get("aliases")
        aliases: Mapping[Any, Any] = raw if isinstance(raw, Mapping) else {}
        return cls(
            name=name,
            plugin=str(data.get("plugin") or ""),
            kind=str(data.get("kind") or "cli"),
            enabled=False,
            display_name=str(data.get("display_name") or ""),
            aliases=MappingProxyType({str(k): str(v) for k, v in aliases.items()}),
            slash_models=bool(data.get("slash_models")),
            plain_models=bool(data.get("plain_models")),
        )


def entry_of(name: str, plugin: str, provider: Any) -> Entry:
    """The entry of an enabled executor ``name`` whose object is ``provider``; every grammar
    member is optional (defaults: no aliases, the generic model rule)."""
    aliases = getattr(provider, "aliases", None)
    pattern = getattr(provider, "model_pattern", None)
    settings = getattr(provider, "settings", None)
    return Entry(
        name=name,
        plugin=plugin,
        kind="cli" if isinstance(provider, Provider) else "inproc",
        display_name=str(getattr(provider, "display_name", "") or name),
        aliases=MappingProxyType({str(k): str(v) for k, v in aliases.items()}) if isinstance(aliases, Mapping) else MappingProxyType({}),
        models=tuple(str(m) for m in getattr(provider, "models", ()) or ()),
        default_model=str(getattr(settings, "default_model", "") or ""),
        slash_models=bool(getattr(provider, "slash_models", False)),
        plain_models=bool(getattr(provider, "plain_models", False)),
        requires_model=bool(getattr(provider, "requires_model", False)),
        model_pattern=pattern if isinstance(pattern, re.Pattern) else MODEL_RE,
        model_hint=str(getattr(provider, "model_hint", "") or "a model name"),
    )


def exec_settings(table: Any) -> ExecSettings:
    """The ``[execs]`` settings from the settings table (a mapping or ``None``); wrong types
    fall back to the defaults."""
    execs = table if isinstance(table, Mapping) else {}
    fallback = execs.get("fallback")
    allowed = execs.get("allowed")
    plain = execs.get("plain")

    def strings(value: Any) -> tuple[str, ...] | None:
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
        return None

    patterns = strings(allowed)
    return ExecSettings(
        fallback=fallback if isinstance(fallback, str) and fallback.strip() else DEFAULT_FALLBACK,
        allowed=DEFAULT_ALLOWED if patterns is None else patterns,
        plain=strings(plain) or (),
    )


class Grammar:
    """The exec grammar over a set of entries (enabled ones, and remembered disabled ones).

    A name or alias is claimed by the first enabled entry (entries sorted by name); a disabled
    entry only answers for what no enabled one claims.
    """

    def __init__(self, entries: Iterable[Entry]) -> None:
        ordered = sorted(entries, key=lambda e: (not e.enabled, e.name))
        self.entries: dict[str, Entry] = {}
        self.aliases: dict[str, tuple[Entry, str]] = {}
        self.slash: Entry | None = None
        self.plain: Entry | None = None
        for e in ordered:
            self.entries.setdefault(e.name, e)
        for e in ordered:
            if self.entries.get(e.name) is not e:
                continue
            for alias, model in e.aliases.items():
                if alias not in self.entries and alias not in self.aliases:
                    self.aliases[alias] = (e, model)
            if e.slash_models and self.slash is None:
                self.slash = e
            if e.plain_models and self.plain is None:
                self.plain = e

    def available(self) -> list[str]:
        """Names and aliases that resolve now (enabled entries), sorted."""
        names = [n for n, e in self.entries.items() if e.enabled]
        names += [a for a, (e, _) in self.aliases.items() if e.enabled]
        return sorted(names)

    def _use(self, e: Entry, spec: str) -> Entry:
        if e.enabled:
            return e
        listed = ", ".join(self.available()) or "none"
        raise ExecutorUnavailable(
            f"exec {spec!r}: executor {e.name!r} is provided by plugin {e.plugin!r}, which is disabled "
            f"(enable it: elowen plugin enable {e.plugin}); available now: {listed}",
            plugin=e.plugin,
            available=self.available(),
        )

    def _model(self, spec: str, e: Entry, model: str) -> str:
        if ".." in model.split("/"):
            raise ExecSpecError(f"exec {spec!r}: model {model!r} contains a '..' path segment, which is not allowed", available=self.available())
        if not e.model_pattern.match(model):
            raise ExecSpecError(f"exec {spec!r}: {model!r} is not a model name {e.name} accepts (it takes {e.model_hint})", available=self.available())
        return model

    def resolve(self, spec: str | None, *, fallback: str = DEFAULT_FALLBACK, allow_plain: Collection[str] = ()) -> ResolvedExec:
        """Resolve ``spec`` (``None``: ``fallback``).

        Raises:
            ExecSpecError: empty or malformed, a bad model name, a plain string that is not
                allow-listed, or an invalid fallback; UnknownExecutor: no executor by that
                name; ExecutorUnavailable: its plugin is disabled.
        """
        if spec is None:
            try:
                return self.resolve(fallback, fallback=fallback, allow_plain=allow_plain)
            except ExecutorUnavailable as exc:
                raise ExecutorUnavailable(
                    f"the fallback executor ({fallback!r}, settings [execs] fallback) is unavailable: {exc}", plugin=exc.plugin, available=exc.available
                ) from None
            except ExecSpecError as exc:
                raise type(exc)(f"the fallback executor ({fallback!r}, settings [execs] fallback) is invalid: {exc}", available=exc.available) from None
        if not isinstance(spec, str):
            raise ExecSpecError(f"exec must be a string, got {type(spec).__name__}")
        text = spec.strip()
        if text.startswith("exec:"):
            text = text[5:].strip()
        if not text or any(c.isspace() for c in text):
            raise ExecSpecError(f"exec {spec!r} is empty or contains whitespace", available=self.available())
        if text in self.entries:
            e = self._use(self.entries[text], spec)
            if e.requires_model:
                raise ExecSpecError(f"exec {spec!r}: {e.name} needs {e.model_hint} ('{e.name}:<model>')", available=self.available())
            return ResolvedExec(e.name, "", text, e.plugin)
        if text in self.aliases:
            e, model = self.aliases[text]
            return ResolvedExec(self._use(e, spec).name, model, text, e.plugin)
        head, sep, rest = text.partition(":")
        if sep:
            named = self.entries.get(head)
            if named is None and head in self.aliases:
                e, model = self.aliases[head]
                raise ExecSpecError(
                    f"exec {spec!r}: {head!r} is an alias of {e.name}:{model} and takes no model; for another model write '{e.name}:<model>' ({e.model_hint})",
                    available=self.available(),
                )
            if named is None:
                raise UnknownExecutor(
                    f"exec {spec!r}: unknown executor {head!r} (available: {', '.join(self.available()) or 'none'})", available=self.available()
                )
            self._use(named, spec)
            return ResolvedExec(named.name, self._model(spec, named, rest), f"{named.name}:{rest}", named.plugin)
        if "/" in text:
            if self.slash is None:
                raise UnknownExecutor(
                    f"exec {spec!r}: no enabled executor takes bare '<provider>/<model>' specs; "
                    f"use '<executor>:{text}' (available: {', '.join(self.available()) or 'none'})",
                    available=self.available(),
                )
            if not all(_PART.match(p) for p in text.split("/")):
                raise ExecSpecError(f"exec {spec!r}: expected '<provider>/<model>'", available=self.available())
            e = self._use(self.slash, spec)
            return ResolvedExec(e.name, self._model(spec, e, text), f"{e.name}:{text}", e.plugin)
        if self.plain is not None and text in allow_plain and _PLAIN.match(text):
            e = self._use(self.plain, spec)
            return ResolvedExec(e.name, text, text, e.plugin)
        raise UnknownExecutor(
            f"exec {spec!r} is not a known spec: use <executor>, <executor>:<model> or an alias (available: {', '.join(self.available()) or 'none'})",
            available=self.available(),
        )

    def check_allowed(self, resolved: ResolvedExec, patterns: Collection[str], *, whose: str = "the daemon's") -> None:
        """Check the canonical spec against glob ``patterns`` (``fnmatch``, case-sensitive); a
        bare executor name (no model) is also allowed by its ``<name>:*`` patterns.

        Raises:
            ExecNotAllowed: no pattern matches; the message names the spec and the list.
        """
        candidates = [resolved.spec]
        if resolved.spec == resolved.provider:
            candidates.append(f"{resolved.spec}:")
        for pattern in patterns:
            if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
                return
        listed = ", ".join(patterns) or "(empty)"
        raise ExecNotAllowed(f"exec {resolved.spec!r} is not in {whose} allowed executors ({listed})")

"""Executor specs: which coding agent (provider) and model runs a task.

A task's ``exec`` is a spec string (an optional ``exec:`` prefix, as in task labels, is
accepted). Resolution rules (Elowen issue 3, "Executor specs"):

==============================  =============================================
spec                            resolves to (provider, model)
==============================  =============================================
``sonnet`` / ``opus``           ``claude`` with that model (Claude Code)
``claude`` / ``opencode`` /     that provider with no model: its ``default_model`` setting
``codex`` / ``kilo`` (bare)     is used (empty: the CLI's own default)
``claude:<model>``              ``claude``, ``<model>``
``opencode:<model>``            ``opencode``, ``<model>``
``codex:<model>``               ``codex``, ``<model>``
``kilo:<model>``                ``kilo``, ``<model>``
``<a>/<b>`` (bare, with ``/``)  ``opencode``, ``<a>/<b>``
``elowen:<provider>/<model>``   ``elowen`` (the embedded brain), ``<provider>/<model>``
no spec (``None``)              the configured fallback (default ``sonnet``)
a bare plain string             ``claude`` with that model, only when allow-listed
==============================  =============================================

Every resolved spec must then match the daemon's ``[execs] allowed`` glob patterns (settings)
and, for members, their personal ``allowed_execs``: :func:`check_allowed`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection
from dataclasses import dataclass

from elowen_sdk import ElowenError

__all__ = [
    "CLAUDE_ALIASES",
    "DEFAULT_ALLOWED",
    "DEFAULT_FALLBACK",
    "PROVIDERS",
    "ExecNotAllowed",
    "ExecSpecError",
    "ResolvedExec",
    "check_allowed",
    "resolve",
]

#: Bare names that mean Claude Code with that model.
CLAUDE_ALIASES = frozenset({"sonnet", "opus"})
#: Providers addressable as ``<provider>:<model>``.
PROVIDERS = frozenset({"claude", "opencode", "codex", "kilo"})
#: The daemon's default ``[execs] allowed`` patterns.
DEFAULT_ALLOWED = ("sonnet", "opus", "opencode:*", "codex:*", "kilo:*", "claude:*", "elowen:*")
DEFAULT_FALLBACK = "sonnet"

_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,199}$")
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$")


class ExecSpecError(ElowenError, ValueError):
    """The spec is not a valid executor spec (the API answers 422 ``invalid_exec``)."""


class ExecNotAllowed(ElowenError, PermissionError):
    """The spec is valid but not allowed (the API answers 403)."""


@dataclass(frozen=True, slots=True)
class ResolvedExec:
    """A resolved executor spec.

    Attributes:
        provider: ``claude``, ``opencode``, ``codex``, ``kilo`` or ``elowen``.
        model: the model as the provider names it (e.g. ``sonnet``, ``anthropic/claude-x``).
        spec: the canonical spec matched against allow-lists (``sonnet``, ``opencode:a/b``,
            ``elowen:ollama/llama3``…).
    """

    provider: str
    model: str
    spec: str


def _model(spec: str, provider: str, model: str) -> str:
    if not _MODEL.match(model):
        raise ExecSpecError(f"exec {spec!r}: {provider} needs a model name (letters, digits, ._:@+/-), got {model!r}")
    return model


def resolve(spec: str | None, *, fallback: str = DEFAULT_FALLBACK, allow_plain: Collection[str] = ()) -> ResolvedExec:
    """Resolve ``spec`` (``None``: ``fallback``) per the table in this module's docstring.

    Args:
        spec: the task's exec spec, or ``None``.
        fallback: the spec used when ``spec`` is ``None`` (settings ``[execs] fallback``).
        allow_plain: bare plain strings (no ``:``/``/``) accepted as Claude Code models.

    Raises:
        ExecSpecError: an empty or malformed spec, an unknown provider prefix, a plain string
            that is not allow-listed, or an invalid fallback.
    """
    if spec is None:
        try:
            return resolve(fallback, fallback=DEFAULT_FALLBACK, allow_plain=allow_plain)
        except ExecSpecError as exc:
            raise ExecSpecError(f"the configured fallback executor is invalid: {exc}") from None
    if not isinstance(spec, str):
        raise ExecSpecError(f"exec must be a string, got {type(spec).__name__}")
    text = spec.strip()
    if text.startswith("exec:"):
        text = text[5:].strip()
    if not text or any(c.isspace() for c in text):
        raise ExecSpecError(f"exec {spec!r} is empty or contains whitespace")
    if text in CLAUDE_ALIASES:
        return ResolvedExec("claude", text, text)
    if text in PROVIDERS:
        return ResolvedExec(text, "", text)  # the provider's default_model (or the CLI's own)
    head, sep, rest = text.partition(":")
    if sep:
        if head in PROVIDERS:
            return ResolvedExec(head, _model(spec, head, rest), f"{head}:{rest}")
        if head == "elowen":
            provider, slash, model = rest.partition("/")
            if not slash or not _PART.match(provider) or not _MODEL.match(model or "-"):
                raise ExecSpecError(f"exec {spec!r}: the embedded brain needs 'elowen:<provider>/<model>'")
            return ResolvedExec("elowen", rest, f"elowen:{rest}")
        known = ", ".join(sorted(PROVIDERS | {"elowen"}))
        raise ExecSpecError(f"exec {spec!r}: unknown executor {head!r} (known: {known})")
    if "/" in text:
        parts = text.split("/")
        if not all(_PART.match(p) for p in parts):
            raise ExecSpecError(f"exec {spec!r}: expected '<provider>/<model>' for OpenCode")
        return ResolvedExec("opencode", text, f"opencode:{text}")
    if text in allow_plain and _PLAIN.match(text):
        return ResolvedExec("claude", text, text)
    raise ExecSpecError(
        f"exec {spec!r} is not a known spec: use sonnet, opus, claude[:<model>], opencode[:<model>], "
        "codex:<model>, kilo:<model>, <provider>/<model> or elowen:<provider>/<model>"
    )


def check_allowed(resolved: ResolvedExec, patterns: Collection[str], *, whose: str = "the daemon's") -> None:
    """Check the canonical spec against glob ``patterns`` (``fnmatch``, case-sensitive).

    Raises:
        ExecNotAllowed: no pattern matches; the message names the spec and the list.
    """
    # a bare provider (no model) is allowed by its "<provider>:*" patterns too
    candidates = [resolved.spec, f"{resolved.spec}:"] if resolved.spec in PROVIDERS else [resolved.spec]
    for pattern in patterns:
        if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
            return
    listed = ", ".join(patterns) or "(empty)"
    raise ExecNotAllowed(f"exec {resolved.spec!r} is not in {whose} allowed executors ({listed})")

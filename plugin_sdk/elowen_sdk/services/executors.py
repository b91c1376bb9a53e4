"""Contract of the ``executors`` service: the open registry of executor providers and the exec
grammar that chooses one for a task.

Offered by the builtin ``agents`` plugin, which owns executor specs and the ``[execs]``
settings (``fallback``, ``allowed``, ``plain``). The daemon asks it to validate a task's
``exec`` before accepting it; the scheduler asks it which provider runs a task; the web's
Providers page and executor pickers list what it lists (``GET /executors``).

The grammar is built from the executor contributions of the enabled plugins
(``register_executors``; CLI providers subclass :class:`elowen_sdk.providers.Provider`):

==============================  ==================================================
spec                            resolves to (provider, model)
==============================  ==================================================
``<name>``                      that provider with no model (its ``default_model``)
``<name>:<model>``              that provider, ``<model>`` (checked against the
                                provider's ``model_pattern``)
``<alias>``                     the provider declaring the alias, its model
                                (Claude Code declares ``sonnet`` and ``opus``)
``<a>/<b>`` (bare)              the provider with ``slash_models`` (OpenCode)
a bare plain string             the provider with ``plain_models`` (Claude Code),
                                only when listed in ``[execs] plain``
no spec (``None``)              ``[execs] fallback``
==============================  ==================================================

An optional ``exec:`` prefix (as in task labels) is accepted. The resolved canonical spec must
then match ``[execs] allowed`` (glob patterns; default ``["*"]``: every enabled executor) and,
for members, their personal ``allowed_execs``.

Errors carry ``status`` and ``code`` for the HTTP answer:

* :class:`ExecSpecError` 422 ``invalid_exec`` — malformed spec, bad model name;
* :class:`UnknownExecutor` 422 ``unknown_executor`` — no enabled executor by that name;
* :class:`ExecutorUnavailable` 422 ``executor_unavailable`` — the executor's plugin is
  disabled;
* :class:`ExecutorsUnavailable` 409 ``executors_unavailable`` — raised by the daemon when the
  agents plugin itself is disabled (no spec resolves; tasks are kept and wait);
* :class:`ExecNotAllowed` 403 ``exec_not_allowed``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..contracts import service_contract
from ..errors import ElowenError

__all__ = [
    "ExecError",
    "ExecNotAllowed",
    "ExecSettings",
    "ExecSpecError",
    "ExecutorInfo",
    "ExecutorUnavailable",
    "ExecutorsService",
    "ExecutorsUnavailable",
    "ResolvedExec",
    "UnknownExecutor",
]


class ExecError(ElowenError):
    """Base of the exec-spec errors. ``status`` / ``code``: the HTTP answer; ``available``:
    the executor names (and aliases) that would resolve now."""

    status: int = 422
    code: str = "invalid_exec"

    def __init__(self, message: str, *, available: Collection[str] = (), status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.available: tuple[str, ...] = tuple(available)
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code


class ExecSpecError(ExecError, ValueError):
    """The spec is not a valid executor spec (422 ``invalid_exec``)."""


class UnknownExecutor(ExecSpecError):
    """The spec names no executor an enabled plugin provides (422 ``unknown_executor``)."""

    code = "unknown_executor"


class ExecutorUnavailable(ExecError, LookupError):
    """The executor is known but cannot run now: its provider plugin is disabled
    (422 ``executor_unavailable``), or the registry itself is (409 ``executors_unavailable``).
    ``plugin`` names the plugin to enable, when known."""

    code = "executor_unavailable"

    def __init__(self, message: str, *, plugin: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.plugin = plugin


class ExecutorsUnavailable(ExecutorUnavailable):
    """No ``executors`` registry runs: the agents plugin, which offers it, is disabled (409
    ``executors_unavailable``). The daemon keeps a task with a spec then (it waits, its record's
    ``exec_error`` says why); the spec is checked again once the registry is back."""

    status = 409
    code = "executors_unavailable"


class ExecNotAllowed(ExecError, PermissionError):
    """The spec is valid but not allowed by the daemon's or the user's list (403)."""

    status = 403
    code = "exec_not_allowed"


@dataclass(frozen=True, slots=True)
class ResolvedExec:
    """A resolved executor spec.

    Attributes:
        provider: the executor name (``claude``, ``opencode``, ``elowen``, a third party's…).
        model: the model as the provider names it (``""``: the provider's default model).
        spec: the canonical spec matched against allow-lists (``sonnet``, ``opencode:a/b``…).
        plugin: the plugin providing the executor (``""`` when not known).
    """

    provider: str
    model: str
    spec: str
    plugin: str = ""


@dataclass(frozen=True, slots=True)
class ExecSettings:
    """The ``[execs]`` settings as the agents side reads them (its single reader).

    Attributes:
        fallback: the spec of a task without one.
        allowed: glob patterns every resolved spec must match (``fnmatch``, case-sensitive).
        plain: bare names accepted as models of the ``plain_models`` provider.
    """

    fallback: str
    allowed: tuple[str, ...]
    plain: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ExecutorInfo:
    """One executor as :meth:`ExecutorsService.executors` lists it (JSON: :meth:`to_dict`).

    Attributes:
        name: the exec name; plugin: the plugin providing it; display_name: for people.
        kind: ``"cli"`` (a coding-agent CLI in tmux, an :class:`elowen_sdk.providers.Provider`)
            or ``"inproc"`` (runs in Elowen's process, e.g. the brain's ``elowen``).
        enabled: whether the plugin is enabled now (a disabled one is listed only when the
            registry has seen it since it started).
        aliases: bare spec → model; models: suggested models; default_model: the configured
            one (``""``: the CLI's own); slash_models / plain_models: see the grammar table.
        model_hint: what a model name looks like; examples: specs a picker may offer.
    """

    name: str
    plugin: str
    display_name: str
    kind: str
    enabled: bool
    aliases: Mapping[str, str] = field(default_factory=dict)
    models: tuple[str, ...] = ()
    default_model: str = ""
    slash_models: bool = False
    plain_models: bool = False
    model_hint: str = ""
    examples: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON object of every field."""
        return {
            "name": self.name,
            "plugin": self.plugin,
            "display_name": self.display_name,
            "kind": self.kind,
            "enabled": self.enabled,
            "aliases": dict(self.aliases),
            "models": list(self.models),
            "default_model": self.default_model,
            "slash_models": self.slash_models,
            "plain_models": self.plain_models,
            "model_hint": self.model_hint,
            "examples": list(self.examples),
        }


@service_contract("executors")
class ExecutorsService(Protocol):
    """The executor registry and exec grammar (service ``executors``, plugin ``agents``).
    Every method is synchronous and cheap (no I/O beyond reading settings)."""

    def resolve(self, spec: str | None) -> ResolvedExec:
        """Resolve ``spec`` (``None``: ``[execs] fallback``) to an enabled executor.

        Raises:
            ExecSpecError: malformed (422 ``invalid_exec``); UnknownExecutor: no such
                executor (422); ExecutorUnavailable: its plugin is disabled (422).
        """
        ...

    def check(self, spec: str | None, *, personal: Collection[str] | None = None, whose: str = "your") -> ResolvedExec:
        """:meth:`resolve`, then check the result against ``[execs] allowed`` and, when given,
        the ``personal`` allow-list (a member's ``allowed_execs``).

        Raises:
            everything :meth:`resolve` raises; ExecNotAllowed: a list does not allow it (403).
        """
        ...

    def allowed(self, resolved: ResolvedExec, patterns: Collection[str], *, whose: str = "the daemon's") -> None:
        """Check a resolved spec against glob ``patterns``.

        Raises:
            ExecNotAllowed: no pattern matches.
        """
        ...

    def executors(self) -> list[ExecutorInfo]:
        """Every executor of an enabled plugin, and those seen since start whose plugin is now
        disabled (``enabled=False``), sorted by name."""
        ...

    def provider(self, name: str) -> Any:
        """The provider object of executor ``name`` (a CLI provider is an
        :class:`elowen_sdk.providers.Provider`).

        Raises:
            ExecutorUnavailable: no enabled plugin provides ``name``.
        """
        ...

    def settings(self) -> ExecSettings:
        """The ``[execs]`` settings now (with defaults applied)."""
        ...

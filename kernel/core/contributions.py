"""What plugins contributed (tools, commands, skills, …), keyed by kind and name.

Names are unique per kind across plugins: the first plugin to register a name keeps it; a later
one is refused with a warning and an audit record (first-writer-wins). Every accepted
registration is written to the plugin's ledger so disabling the plugin removes exactly what it
added.

A service whose name has a contract (:func:`elowen_sdk.contracts.contract_for`) must satisfy it:
:meth:`Contributions.add` raises :class:`ServiceConformanceError`, naming the missing members,
for an object that does not. The contracts of the builtin services
(:mod:`elowen_sdk.services`) are imported here so that they are known.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import elowen_sdk.services  # noqa: F401  (registers the builtin contracts)
from elowen_sdk import ElowenError
from elowen_sdk.contracts import contract_for, missing_members

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$")
_SEGMENT_RE = re.compile(r"^(?:[A-Za-z0-9_.~-]+|\{[A-Za-z_][A-Za-z0-9_]*\})$")


def route_path_error(path: object) -> str | None:
    """Why ``path`` is not a valid plugin route path, or ``None`` if it is.

    A route path starts with ``/`` and is ``/``-separated segments, each either literal
    (letters, digits, ``_ . ~ -``) or one ``{name}`` parameter; ``/`` alone is allowed. No empty
    segment (``//``, a trailing ``/``), no ``.``/``..`` segment, at most 200 characters.
    A third-party plugin's routes are mounted under ``/plugins/<name>``, so a path without
    the leading ``/`` would land in another plugin's space (``"2/x"`` → ``/plugins/exp2/x``).
    """
    if not isinstance(path, str) or not path:
        return "a route path must be a non-empty string"
    if not path.startswith("/"):
        return f"route path {path!r} must start with '/'"
    if len(path) > 200:
        return f"route path {path[:40]!r}… is longer than 200 characters"
    if path == "/":
        return None
    for segment in path[1:].split("/"):
        if segment == "":
            return f"route path {path!r} has an empty segment ('//' or a trailing '/')"
        if segment in (".", ".."):
            return f"route path {path!r} may not contain '.' or '..' segments"
        if not _SEGMENT_RE.match(segment):
            return f"route path {path!r}: segment {segment!r} may hold only letters, digits, '_', '.', '~', '-' or be one {{name}} parameter"
    return None


class ServiceConformanceError(ElowenError, TypeError):
    """A service object lacks members its contract declares.

    Attributes:
        owner: the plugin registering it (``"kernel"`` for the host's own services).
        service: the service name.
        contract: the contract's qualified name.
        missing: the missing members, sorted.
    """

    def __init__(self, owner: str, service: str, contract: type, missing: list[str]) -> None:
        self.owner = owner
        self.service = service
        self.contract = f"{contract.__module__}.{contract.__qualname__}"
        self.missing = list(missing)
        super().__init__(
            f"service {service!r} registered by {owner!r} does not satisfy its contract {contract.__qualname__} ({self.contract}): missing {', '.join(missing)}"
        )


class ExecutorCheckError(ElowenError, ValueError):
    """An executor's provider cannot work (``Executor.check()`` failed, e.g. its
    ``patterns.toml`` is missing): the registration is refused and the plugin's enable fails.

    Attributes:
        owner: the plugin registering it.
        executor: the executor name.
    """

    def __init__(self, owner: str, executor: str, reason: str) -> None:
        self.owner = owner
        self.executor = executor
        super().__init__(f"executor {executor!r} registered by {owner!r} refused: {reason}")


def check_service(owner: str, service: str, obj: Any) -> None:
    """Check ``obj`` against the contract of ``service``, if it has one.

    Raises:
        ServiceConformanceError: members of the contract are missing on ``obj``.
    """
    contract = contract_for(service)
    if contract is None:
        return
    missing = missing_members(obj, contract)
    if missing:
        raise ServiceConformanceError(owner, service, contract, missing)


@dataclass(frozen=True, slots=True)
class Owned:
    """A contribution and the plugin that owns it."""

    plugin: str
    kind: str
    name: str
    obj: Any


def contribution_name(kind: str, obj: Any) -> str:
    """The unique name of a contribution (routes are named ``METHOD path``)."""
    if kind == "route":
        return f"{getattr(obj, 'method', 'WS')} {obj.path}"
    return str(obj.name)


class Contributions:
    """The live set of contributions. Readers take :meth:`all` snapshots (immutable).

    Args:
        audit: ``audit(actor, action, target="", outcome="ok", detail=None)``.
        on_host_service: called ``(name, available)`` after a service owned by ``"kernel"``
            (the host's own, e.g. the daemon's ``tasks``) is added or removed; the kernel
            announces it with the ``on_service`` hook. Plugins' services are announced by the
            registry, after the provider's ``on_load``.
    """

    def __init__(self, audit: Callable[..., None], on_host_service: Callable[[str, bool], None] | None = None) -> None:
        self._audit = audit
        self._on_host_service = on_host_service
        self._items: dict[str, dict[str, Owned]] = {}
        self._snapshots: dict[str, Mapping[str, Owned]] = {}

    def add(self, plugin: str, kind: str, obj: Any, ledger: list[tuple[str, str]], *, mount: str = "") -> bool:
        """Register ``obj`` of ``kind`` for ``plugin``; returns ``False`` if refused (invalid
        name or route path, or the name is taken). ``mount``: the prefix a route is served
        under (``/plugins/<name>`` for a third-party plugin): routes collide only when their
        method and mounted path are the same.

        Raises:
            ServiceConformanceError: ``obj`` is a service (an ``elowen_sdk.Service``) whose
                object lacks members of its contract (nothing is registered).
            ExecutorCheckError: ``obj`` is an executor whose ``check()`` failed (nothing is
                registered).
        """
        name = contribution_name(kind, obj)
        if kind != "route" and not _NAME_RE.match(name):
            log.warning("plugin %s: %s name %r is not valid; dropped", plugin, kind, name)
            self._audit(plugin, f"register.{kind}", name, "invalid")
            return False
        if kind == "route":
            error = route_path_error(getattr(obj, "path", None))
            if error is not None:
                log.warning("plugin %s: route %r refused: %s", plugin, name, error)
                self._audit(plugin, "register.route", name, "invalid", {"error": error})
                return False
            if mount:
                name = f"{getattr(obj, 'method', 'WS')} {mount}{obj.path}"
        if kind == "service":
            try:
                check_service(plugin, name, getattr(obj, "obj", obj))
            except ServiceConformanceError as exc:
                log.warning("plugin %s: %s", plugin, exc)
                self._audit(plugin, "register.service", name, "invalid", {"contract": exc.contract, "missing": exc.missing})
                raise
        if kind == "executor" and callable(getattr(obj, "check", None)):
            try:
                obj.check()
            except ElowenError as exc:
                log.warning("plugin %s: executor %r refused: %s", plugin, name, exc)
                self._audit(plugin, "register.executor", name, "invalid", {"error": str(exc)})
                raise ExecutorCheckError(plugin, name, str(exc)) from exc
        bucket = self._items.setdefault(kind, {})
        existing = bucket.get(name)
        if existing is not None:
            log.warning("plugin %s: %s %r is already registered by plugin %s; dropped (first writer wins)", plugin, kind, name, existing.plugin)
            self._audit(plugin, f"register.{kind}", name, "collision", {"owner": existing.plugin})
            return False
        bucket[name] = Owned(plugin, kind, name, obj)
        self._snapshots.pop(kind, None)
        ledger.append((kind, name))
        if kind == "service" and plugin == "kernel" and self._on_host_service is not None:
            self._on_host_service(name, True)
        return True

    def remove_ledger(self, plugin: str, ledger: list[tuple[str, str]]) -> int:
        """Remove every entry of ``ledger`` owned by ``plugin``; returns how many."""
        removed = 0
        for kind, name in ledger:
            bucket = self._items.get(kind, {})
            owned = bucket.get(name)
            if owned is not None and owned.plugin == plugin:
                if kind == "service" and plugin == "kernel" and self._on_host_service is not None:
                    self._on_host_service(name, False)
                del bucket[name]
                self._snapshots.pop(kind, None)
                removed += 1
        ledger.clear()
        return removed

    def all(self, kind: str) -> Mapping[str, Owned]:
        """An immutable snapshot of every contribution of ``kind`` (name → :class:`Owned`)."""
        snap = self._snapshots.get(kind)
        if snap is None:
            snap = MappingProxyType(dict(self._items.get(kind, {})))
            self._snapshots[kind] = snap
        return snap

    def get(self, kind: str, name: str) -> Owned:
        """The contribution ``name`` of ``kind``.

        Raises:
            LookupError: nothing of that kind and name is registered (by an enabled plugin).
        """
        try:
            return self._items[kind][name]
        except KeyError:
            raise LookupError(f"no {kind} named {name!r} (is the plugin that provides it enabled?)") from None

    def owned_by(self, plugin: str) -> list[Owned]:
        """Everything ``plugin`` contributed."""
        return [o for bucket in self._items.values() for o in bucket.values() if o.plugin == plugin]

"""What plugins contributed (tools, commands, skills, …), keyed by kind and name.

Names are unique per kind across plugins: the first plugin to register a name keeps it; a later
one is refused with a warning and an audit record (first-writer-wins). Every accepted
registration is written to the plugin's ledger so disabling the plugin removes exactly what it
added.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

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
            return (f"route path {path!r}: segment {segment!r} may hold only letters, digits, '_', '.', '~', '-' "
                    "or be one {name} parameter")
    return None


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
    """The live set of contributions. Readers take :meth:`all` snapshots (immutable)."""

    def __init__(self, audit: Callable[..., None]) -> None:
        self._audit = audit
        self._items: dict[str, dict[str, Owned]] = {}
        self._snapshots: dict[str, Mapping[str, Owned]] = {}

    def add(self, plugin: str, kind: str, obj: Any, ledger: list[tuple[str, str]]) -> bool:
        """Register ``obj`` of ``kind`` for ``plugin``; returns ``False`` if refused."""
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
        bucket = self._items.setdefault(kind, {})
        existing = bucket.get(name)
        if existing is not None:
            log.warning("plugin %s: %s %r is already registered by plugin %s; dropped (first writer wins)", plugin, kind, name, existing.plugin)
            self._audit(plugin, f"register.{kind}", name, "collision", {"owner": existing.plugin})
            return False
        bucket[name] = Owned(plugin, kind, name, obj)
        self._snapshots.pop(kind, None)
        ledger.append((kind, name))
        return True

    def remove_ledger(self, plugin: str, ledger: list[tuple[str, str]]) -> int:
        """Remove every entry of ``ledger`` owned by ``plugin``; returns how many."""
        removed = 0
        for kind, name in ledger:
            bucket = self._items.get(kind, {})
            owned = bucket.get(name)
            if owned is not None and owned.plugin == plugin:
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

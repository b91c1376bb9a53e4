"""Plugin discovery: where plugins come from and what is known of each, without importing it.

Discovery reads the entry-point group ``elowen.plugins`` and each plugin's
``elowen-plugin.toml`` **without importing the plugin** (the manifest is found by walking the
entry module's package folders from the top-level package's import spec, which imports nothing).

Uninstall: a rediscovery that no longer finds a plugin's entry point drops its record if it is
not enabled (the name then answers :class:`PluginNotInstalled`); an enabled one keeps running
(its code is loaded) with ``installed`` false until it is disabled, and cannot be enabled
again. A later re-install is discovered afresh (manifest re-read without importing); if the
old code is still loaded and the version differs it is flagged ``restart_required``.

:class:`Catalog` holds the records and their states; :class:`~elowen.core.reconciler.Registry`
builds on it to enable and disable plugins.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import importlib_metadata

from elowen_sdk import MANIFEST_NAME, ElowenError, Manifest, ManifestError, load_manifest

if TYPE_CHECKING:
    from .context import Context
    from .kernel import Kernel

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "elowen.plugins"
BUILTIN_DISTRIBUTION = "elowen"
STATES = ("discovered", "enabled", "disabled", "error", "needs-approval")


class PluginNotFound(ElowenError, LookupError):
    """No plugin of that name was discovered."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(f"no plugin named {name!r}; known: {', '.join(sorted(known)) or '(none)'}")


class PluginNotInstalled(PluginNotFound):
    """The plugin was known but its distribution is no longer installed (its entry point is
    gone since the last rediscovery). The daemon answers it with 409 ``not_installed``."""

    def __init__(self, name: str, distribution: str | None) -> None:
        ElowenError.__init__(
            self,
            f"plugin {name!r} is not installed (its distribution {distribution or '(unknown)'} was uninstalled); install it again with `elowen plugin install`",
        )
        self.name = name
        self.distribution = distribution


@dataclass(frozen=True, slots=True)
class _Gone:
    """What is remembered of a plugin dropped because its entry point disappeared."""

    distribution: str | None
    dist_version: str | None
    module_loaded: bool


@dataclass(slots=True)
class PluginSource:
    """Where a plugin comes from: an entry point, or (tests, the SDK harness) a module given
    directly.

    Attributes:
        name: the entry point's name (must equal the manifest's ``name``).
        entry: the entry module (``package.module``).
        loader: imports and returns the entry module (an entry point's ``load``).
        distribution: the distribution that ships it, ``None`` if unknown.
        dist_version: that distribution's version.
        manifest_path: where its ``elowen-plugin.toml`` is, if found.
        manifest: a manifest given directly (overrides ``manifest_path``).
    """

    name: str
    entry: str
    loader: Callable[[], Any]
    distribution: str | None = None
    dist_version: str | None = None
    manifest_path: Path | None = None
    manifest: Manifest | None = None

    @property
    def builtin(self) -> bool:
        return self.distribution == BUILTIN_DISTRIBUTION


@dataclass(slots=True)
class PluginRecord:
    """The registry's view of one plugin.

    ``error`` is a one-line reason for ``error`` / ``needs-approval``, ``traceback`` the
    traceback of a failed import or enable (kept for ``elowen plugin info``)."""

    source: PluginSource
    manifest: Manifest | None = None
    state: str = "discovered"
    error: str | None = None
    traceback: str | None = None
    module: Any = None
    ctx: Context | None = None
    restart_required: bool = False
    installed: bool = True
    missing: tuple[str, ...] = ()
    applied_key: str = ""
    error_key: str = ""
    enabled_ms: float = 0.0
    waiting: bool = False
    """In ``error`` only because a service it requires is not offered (or a dependency cycle):
    re-examined at every reconcile, so it is enabled as soon as its provider is."""
    history: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.source.name

    def to_dict(self, granted: Iterable[str] = ()) -> dict[str, Any]:
        """JSON form for ``elowen plugin list/info`` and the API."""
        m = self.manifest
        out: dict[str, Any] = {
            "name": self.name,
            "version": m.version if m else (self.source.dist_version or ""),
            "state": self.state,
            "source": self.source.distribution or "",
            "builtin": self.source.builtin,
            "entry": self.source.entry,
            "description": m.description if m else "",
            "capabilities": {
                "required": list(m.required) if m else [],
                "optional": list(m.optional) if m else [],
                "granted": sorted(granted),
                "missing": list(self.missing),
            },
            "error": self.error,
            "traceback": self.traceback,
            "restart_required": self.restart_required,
            "installed": self.installed,
            "warnings": self.warnings(),
        }
        return out

    def warnings(self) -> list[str]:
        """One sentence per problem a user should know before it bites (manifest checks, and
        an enabled plugin whose distribution was uninstalled)."""
        out = list(self.manifest.warnings()) if self.manifest else []
        if not self.installed:
            out.append("its distribution was uninstalled: it keeps running until disabled, and cannot be enabled again")
        return out


def find_manifest(entry: str) -> Path | None:
    """Locate the ``elowen-plugin.toml`` of the package holding module ``entry`` without
    importing anything: the top-level package's spec gives its folder; sub-packages are folders
    below it. The deepest folder holding a manifest wins."""
    parts = entry.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        folders = [Path(base)]
        for part in parts[1:]:
            folders.append(folders[-1] / part)
        for folder in reversed(folders):
            candidate = folder / MANIFEST_NAME
            if candidate.is_file():
                return candidate
    return None


def entry_point_sources(group: str = ENTRY_POINT_GROUP) -> list[PluginSource]:
    """Every entry point of ``group`` as a :class:`PluginSource` (reads metadata only)."""
    sources = []
    for ep in importlib_metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        sources.append(
            PluginSource(
                name=ep.name,
                entry=ep.module,
                loader=ep.load,
                distribution=dist.metadata["Name"] if dist is not None else None,
                dist_version=dist.version if dist is not None else None,
                manifest_path=find_manifest(ep.module),
            )
        )
    return sources


class Catalog:
    """The records of every discovered plugin and their states.

    Reading (:meth:`get`, :meth:`list`, :meth:`granted`) is safe from anywhere; changes are
    made by the reconciler task only (:class:`~elowen.core.reconciler.Registry`).
    """

    def __init__(self, kernel: Kernel, *, discover_entry_points: bool = True) -> None:
        self._kernel = kernel
        self._discover_entry_points = discover_entry_points
        self._extra: list[PluginSource] = []
        self._records: dict[str, PluginRecord] = {}
        self._gone: dict[str, _Gone] = {}
        self.generation = 0

    # ------------------------------------------------------------------ reading

    @property
    def records(self) -> dict[str, PluginRecord]:
        return dict(self._records)

    def get(self, name: str) -> PluginRecord:
        """The record of ``name``.

        Raises:
            PluginNotInstalled: it was dropped because its distribution was uninstalled.
            PluginNotFound: no plugin of that name was ever discovered.
        """
        rec = self._records.get(name)
        if rec is None:
            gone = self._gone.get(name)
            if gone is not None:
                raise PluginNotInstalled(name, gone.distribution)
            raise PluginNotFound(name, self._records)
        return rec

    def granted(self, rec: PluginRecord) -> frozenset[str]:
        """Capabilities the plugin holds: all it declares for builtins; for others what the
        user granted, limited to what the manifest declares."""
        if rec.manifest is None:
            return frozenset()
        declared = set(rec.manifest.capabilities)
        if rec.source.builtin:
            return frozenset(declared)
        entry = self._settings_entry(rec.name)
        return frozenset(c for c in entry.get("granted", ()) if c in declared)

    def list_plugins(self) -> list[dict[str, Any]]:
        """Every discovered plugin as a dict (sorted by name): ``elowen plugin list``."""
        return [self._records[n].to_dict(self.granted(self._records[n])) for n in sorted(self._records)]

    # ------------------------------------------------------------------ discovery

    def add_source(self, source: PluginSource) -> None:
        """Add a plugin source that is not an entry point (the SDK test harness uses this).
        Takes effect at the next discovery."""
        self._extra.append(source)

    def remove_source(self, name: str) -> None:
        """Forget a source given with :meth:`add_source` (the SDK harness's and the tests'
        counterpart of a ``pip uninstall``). Takes effect at the next discovery."""
        self._extra = [s for s in self._extra if s.name != name]

    def discover(self) -> list[str]:
        """(Re)discover plugins; returns the names of new ones (a re-installed plugin counts as
        new). Existing records keep their state; a plugin whose installed distribution changed
        while it is loaded is flagged ``restart_required`` (modules are never reloaded). A
        plugin whose entry point is gone is dropped, or — if enabled — marked not installed
        (see the module docstring)."""
        importlib.invalidate_caches()
        sources = (entry_point_sources() if self._discover_entry_points else []) + list(self._extra)
        seen: dict[str, PluginSource] = {}
        new = []
        for src in sources:
            if src.name in seen:
                first = seen[src.name]
                if (first.distribution, first.entry) != (src.distribution, src.entry):
                    log.warning(
                        "plugin name %r is provided by both %s (%s) and %s (%s); keeping the first",
                        src.name,
                        first.distribution,
                        first.entry,
                        src.distribution,
                        src.entry,
                    )
                    self._kernel.store.audit("kernel", "plugin.discover", src.name, "collision", {"kept": first.distribution, "dropped": src.distribution})
                continue
            seen[src.name] = src
            rec = self._records.get(src.name)
            if rec is None:
                rec = PluginRecord(source=src)
                gone = self._gone.pop(src.name, None)
                if gone is not None and gone.module_loaded and gone.dist_version != src.dist_version:
                    rec.restart_required = True
                    log.warning("plugin %s was re-installed as %s while its old code is loaded: restart required", src.name, src.dist_version)
                self._records[src.name] = rec
                new.append(src.name)
                self._read_manifest(rec)
                continue
            if not rec.installed:
                rec.installed = True
                self.generation += 1
                log.info("plugin %s is installed again (%s)", src.name, src.dist_version)
            if rec.source.dist_version != src.dist_version:
                if rec.module is not None:
                    rec.restart_required = True
                    log.warning("plugin %s was upgraded to %s while loaded: restart required", src.name, src.dist_version)
                else:
                    rec.source = src
                    self._read_manifest(rec)
        for name in [n for n in self._records if n not in seen]:
            self._uninstalled(self._records[name])
        return new

    def _uninstalled(self, rec: PluginRecord) -> None:
        """``rec``'s entry point is gone: drop it unless it is enabled (then mark it)."""
        k = self._kernel
        if rec.state == "enabled":
            if rec.installed:
                rec.installed = False
                self.generation += 1
                log.warning("plugin %s: its distribution %s was uninstalled while enabled; it keeps running until disabled", rec.name, rec.source.distribution)
                k.store.audit("kernel", "plugin.uninstalled", rec.name, "ok", {"distribution": rec.source.distribution or "", "state": "enabled"})
            return
        del self._records[rec.name]
        self._gone[rec.name] = _Gone(rec.source.distribution, rec.source.dist_version, rec.module is not None)
        self.generation += 1
        log.info("plugin %s: its distribution %s was uninstalled; dropped", rec.name, rec.source.distribution)
        k.store.audit("kernel", "plugin.removed", rec.name, "ok", {"distribution": rec.source.distribution or "", "from": rec.state})
        k.events.publish("plugin.removed", {"name": rec.name, "from": rec.state})

    def _read_manifest(self, rec: PluginRecord) -> None:
        src = rec.source
        try:
            if src.manifest is not None:
                manifest = src.manifest
            elif src.manifest_path is not None:
                manifest = load_manifest(src.manifest_path)
            else:
                raise ManifestError(f"no {MANIFEST_NAME} found in the package of {src.entry}")
            if manifest.name != src.name:
                raise ManifestError(f"manifest name {manifest.name!r} does not match entry point name {src.name!r}")
        except ManifestError as exc:
            rec.manifest = None
            self._set_state(rec, "error", str(exc))
            return
        rec.manifest = manifest
        if rec.state == "error" and rec.module is None:
            rec.state, rec.error = "discovered", None

    # ------------------------------------------------------------------ desired state

    def _settings_entry(self, name: str) -> dict[str, Any]:
        plugins = self._kernel.settings.data.get("plugins", {})
        entry = plugins.get(name, {}) if isinstance(plugins, dict) else {}
        return entry if isinstance(entry, dict) else {}

    # ------------------------------------------------------------------ states

    def _set_state(self, rec: PluginRecord, state: str, error: str | None = None, tb: str | None = None, *, waiting: bool = False) -> None:
        """Move ``rec`` to ``state``; ``error`` is a one-line reason, ``tb`` the traceback (kept
        for ``elowen plugin info`` and the audit, never printed by list commands); ``waiting``
        marks an ``error`` that only waits for a provider (see :attr:`PluginRecord.waiting`).
        A change of state bumps :attr:`generation`, is audited and published as
        ``plugin.<state>``."""
        old = rec.state
        rec.state = state
        keep = state in ("error", "needs-approval")
        rec.error = error if keep else None
        rec.traceback = tb if keep else None
        rec.waiting = waiting and state == "error"
        rec.history.append(state)
        if old != state:
            self.generation += 1
            k = self._kernel
            k.store.audit(
                "kernel",
                f"plugin.{state}",
                rec.name,
                "ok" if state != "error" else "error",
                {"from": old, "error": error or "", "traceback": (tb or "")[-4000:]},
            )
            k.events.publish(f"plugin.{state}", {"name": rec.name, "from": old, "error": error})

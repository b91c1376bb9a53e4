"""The plugin registry: discovery, lifecycle, and the one reconciler task.

Discovery reads the entry-point group ``elowen.plugins`` and each plugin's
``elowen-plugin.toml`` **without importing the plugin** (the manifest is found by walking the
entry module's package folders from the top-level package's import spec, which imports nothing).

States: ``discovered`` (found, never enabled or disabled by the user), ``enabled``,
``disabled``, ``error`` (import, manifest, config or ``on_load`` failure; traceback kept; the
kernel goes on), ``needs-approval`` (the plugin now requires capabilities the user has not
granted, e.g. after an upgrade).

Uninstall: a rediscovery that no longer finds a plugin's entry point drops its record if it is
not enabled (the name then answers :class:`PluginNotInstalled`); an enabled one keeps running
(its code is loaded) with ``installed`` false until it is disabled, and cannot be enabled
again. A later re-install is discovered afresh (manifest re-read without importing); if the
old code is still loaded and the version differs it is flagged ``restart_required``.

Contributions are checked against the manifest's ``[contributes]``: anything a plugin
registers that its manifest does not declare is refused (WARNING log, audit
``register.<kind>`` ``denied``), so ``declares:`` in ``elowen plugin info`` can be trusted.

Desired state lives in settings (``[plugins.<name>]`` ``enabled``, ``granted``, ``config``);
every change — API, CLI, or a hand edit of ``config.toml`` — is applied by :meth:`Registry.run`,
the single reconciler task:

* disable: stop new dispatches → drain in-flight async hook calls (bounded) → cancel the
  plugin's scope → ``on_unload`` → undo its ledger → unregister from pluggy;
* enable: import (cached in ``sys.modules``; never reloaded) → register with pluggy →
  schema → contributions → loops → ``on_load``.

Each transition bumps :attr:`Registry.generation`, writes an audit record and publishes a
``plugin.<state>`` event.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import logging
import math
import re
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import importlib_metadata
import trio
from elowen_sdk import MANIFEST_NAME, ConfigError, ElowenError, Loop, Manifest, ManifestError, load_manifest
from elowen_sdk.hookspecs import CONTRIBUTION_KINDS
from elowen_sdk.manifest import KIND_FIELDS

from .context import Context
from .contributions import contribution_name

if TYPE_CHECKING:
    from .kernel import Kernel

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "elowen.plugins"
BUILTIN_DISTRIBUTION = "elowen"
STATES = ("discovered", "enabled", "disabled", "error", "needs-approval")
DRAIN_TIMEOUT = 2.0
ON_LOAD_TIMEOUT = 10.0
_SCHEMA_VERSION_RE = re.compile(r"^--\s*(?:schema-)?version:\s*(\d+)", re.MULTILINE)  # the store's format: both spellings


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
            f"plugin {name!r} is not installed (its distribution {distribution or '(unknown)'} was uninstalled); "
            f"install it again with `elowen plugin install`",
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
    """The registry's view of one plugin."""

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


class Registry:
    """Owns every plugin's state. Only :meth:`run` (the reconciler task) changes it."""

    def __init__(self, kernel: Kernel, *, discover_entry_points: bool = True) -> None:
        self._kernel = kernel
        self._discover_entry_points = discover_entry_points
        self._extra: list[PluginSource] = []
        self._records: dict[str, PluginRecord] = {}
        self._gone: dict[str, _Gone] = {}
        self._enabled: dict[str, Context] = {}
        self._send, self._receive = trio.open_memory_channel[tuple[trio.Event, set[str]]](math.inf)
        self._nursery: trio.Nursery | None = None
        self.generation = 0
        self._explicit_retry: set[str] = set()
        self._last_new: list[str] = []
        self._pending_failures: dict[str, str] = {}
        self.ready = trio.Event()
        """Set once the first discovery and reconcile have finished (every plugin that should
        be enabled at start-up is enabled or in ``error``)."""
        self._go = trio.Event()

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

    def contexts(self) -> dict[str, Context]:
        """The contexts of the enabled plugins (name → context)."""
        return dict(self._enabled)

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

    def describe(self, name: str) -> dict[str, Any]:
        """Everything known about a plugin without importing it: record, manifest, and what
        it contributes now."""
        rec = self.get(name)
        out = rec.to_dict(self.granted(rec))
        out["manifest"] = rec.manifest.to_dict() if rec.manifest else None
        out["config"] = self._settings_entry(name).get("config", {})
        out["contributions"] = [
            {"kind": o.kind, "name": o.name} for o in self._kernel.contributions.owned_by(name)
        ]
        return out

    def list(self) -> list[dict[str, Any]]:
        """Every discovered plugin as a dict (sorted by name)."""
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
                        src.name, first.distribution, first.entry, src.distribution, src.entry,
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
                log.warning("plugin %s: its distribution %s was uninstalled while enabled; it keeps running until disabled",
                            rec.name, rec.source.distribution)
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

    def _desired(self, rec: PluginRecord) -> bool | None:
        enabled = self._settings_entry(rec.name).get("enabled")
        if enabled is None and rec.source.builtin:
            return True
        return enabled

    def _key(self, rec: PluginRecord) -> str:
        entry = self._settings_entry(rec.name)
        blob = json.dumps([entry.get("config", {}), sorted(self.granted(rec))], sort_keys=True, default=str)
        return hashlib.sha1(blob.encode()).hexdigest()

    # ------------------------------------------------------------------ requests

    def start_loading(self) -> None:
        """Let a registry run with ``wait_ready=False`` discover and enable plugins now."""
        self._go.set()

    async def enable(self, name: str) -> dict[str, Any]:
        """Enable ``name`` now (desired state written to settings) and return its record.

        The first enable of a third-party plugin grants its required capabilities; after that,
        newly required ones need :meth:`grant`. A plugin in ``error`` is retried.

        Raises:
            PluginNotInstalled: its distribution was uninstalled (nothing is changed).
            PluginNotFound: no such plugin.
        """
        rec = self.get(name)
        if not rec.installed:
            raise PluginNotInstalled(name, rec.source.distribution)

        def mutate(data: dict[str, Any]) -> None:
            entry = data.setdefault("plugins", {}).setdefault(name, {})
            entry["enabled"] = True
            if not rec.source.builtin and rec.manifest is not None and "granted" not in entry:
                entry["granted"] = sorted(rec.manifest.required)

        self._kernel.settings.update(mutate)
        await self.reconcile(retry={name})
        return self.describe(name)

    async def disable(self, name: str) -> dict[str, Any]:
        """Disable ``name`` now (desired state written to settings)."""
        self.get(name)
        self._kernel.settings.update(lambda d: d.setdefault("plugins", {}).setdefault(name, {}).__setitem__("enabled", False))
        await self.reconcile()
        return self.describe(name)

    async def configure(self, name: str, values: dict[str, Any]) -> dict[str, Any]:
        """Validate and store config ``values`` for ``name``; an enabled plugin is restarted
        with them. Raises :class:`~elowen_sdk.ConfigError`."""
        rec = self.get(name)
        if rec.manifest is None:
            raise ConfigError(f"plugin {name!r} has no valid manifest: {rec.error}")
        current = dict(self._settings_entry(name).get("config", {}))
        current.update(values)
        validated = rec.manifest.validate_config(current)
        stored = {k: validated[k] for k in current}

        def mutate(data: dict[str, Any]) -> None:
            data.setdefault("plugins", {}).setdefault(name, {})["config"] = stored

        self._kernel.settings.update(mutate)
        await self.reconcile(retry={name})
        return self.describe(name)

    async def grant(self, name: str, capability: str) -> dict[str, Any]:
        """Grant ``capability`` (declared by the manifest) to ``name``.

        Raises:
            ConfigError: the manifest does not declare that capability.
        """
        rec = self.get(name)
        if rec.manifest is None or capability not in rec.manifest.capabilities:
            declared = ", ".join(rec.manifest.capabilities) if rec.manifest else "(no manifest)"
            raise ConfigError(f"plugin {name!r} does not declare capability {capability!r}; it declares: {declared}")

        def mutate(data: dict[str, Any]) -> None:
            entry = data.setdefault("plugins", {}).setdefault(name, {})
            entry["granted"] = sorted(set(entry.get("granted", [])) | {capability})

        self._kernel.settings.update(mutate)
        self._kernel.store.audit("user", "plugin.grant", name, "ok", {"capability": capability})
        await self.reconcile(retry={name})
        return self.describe(name)

    async def rescan(self) -> list[str]:
        """Rediscover entry points (after ``pip install``) and reconcile; returns new names."""
        done = trio.Event()
        self._send.send_nowait((done, {"__rescan__"}))
        await done.wait()
        return list(self._last_new)

    async def reconcile(self, retry: set[str] | None = None) -> None:
        """Ask the reconciler to apply the desired state and wait until it has."""
        done = trio.Event()
        self._send.send_nowait((done, set(retry or ())))
        await done.wait()

    def reconcile_soon(self, *_: Any) -> None:
        """Ask the reconciler to run, without waiting (settings watcher, failure limit)."""
        self._send.send_nowait((trio.Event(), set()))

    def fail(self, name: str, reason: str) -> None:
        """Put an enabled plugin into ``error`` (e.g. too many hook failures); the reconciler
        disables it. It stays in ``error`` until enabled again."""
        rec = self._records.get(name)
        if rec is None or rec.state != "enabled":
            return
        rec.error = reason
        self._pending_failures[name] = reason
        self.reconcile_soon()

    # ------------------------------------------------------------------ the reconciler

    async def run(self, *, wait_ready: bool = True, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The reconciler task. Hosts every plugin's nursery; discovers and reconciles once,
        then applies each request in order (coalescing requests that arrive together).

        ``wait_ready``: report started only after the first reconcile. Otherwise report started
        at once and load plugins only once the host calls :meth:`start_loading` (a daemon
        first starts serving: importing plugins holds the trio thread); :attr:`ready` tells
        when they are loaded."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if not wait_ready:
                task_status.started()
                await self._go.wait()
            self._last_new = self.discover()
            await self._reconcile()
            self.ready.set()
            if wait_ready:
                task_status.started()
            try:
                while True:
                    batch = [await self._receive.receive()]
                    while True:
                        try:
                            batch.append(self._receive.receive_nowait())
                        except trio.WouldBlock:
                            break
                    retry: set[str] = set().union(*(r for _, r in batch))
                    if "__rescan__" in retry:
                        self._last_new = self.discover()
                    self._explicit_retry |= retry
                    try:
                        await self._reconcile()
                    except Exception:
                        log.exception("reconcile failed")
                    for done, _ in batch:
                        done.set()
            finally:
                with trio.CancelScope(shield=True):
                    for name in list(self._enabled):
                        with trio.move_on_after(DRAIN_TIMEOUT + 1):
                            await self._disable(self._records[name], "disabled", persist_state=False)
                nursery.cancel_scope.cancel()

    async def _reconcile(self) -> None:
        for name, reason in list(self._pending_failures.items()):
            rec = self._records[name]
            if rec.state == "enabled":
                await self._disable(rec, "error", reason=reason)
                rec.error_key = self._key(rec)
        self._pending_failures.clear()
        for name in sorted(self._records):
            await trio.sleep(0)  # let requests in between plugins (imports hold the thread)
            rec = self._records[name]
            desired = self._desired(rec)
            if rec.state == "enabled":
                if desired is not True:
                    await self._disable(rec, "disabled")
                elif self._key(rec) != rec.applied_key:
                    await self._disable(rec, "disabled", reason="config or grants changed")
                    await self._enable(rec)
                continue
            if desired is True:
                if rec.manifest is None:
                    if name in self._explicit_retry:
                        self._read_manifest(rec)
                    if rec.manifest is None:
                        continue
                if rec.state == "error" and name not in self._explicit_retry and rec.error_key == self._key(rec):
                    continue
                missing = tuple(c for c in rec.manifest.required if c not in self.granted(rec))
                rec.missing = missing
                if missing:
                    self._set_state(rec, "needs-approval", f"needs capabilities not granted: {', '.join(missing)}")
                    continue
                await self._enable(rec)
            elif desired is False and rec.state in ("discovered", "needs-approval", "error"):
                self._set_state(rec, "disabled")
        self._explicit_retry.clear()

    # ------------------------------------------------------------------ transitions

    def _set_state(self, rec: PluginRecord, state: str, error: str | None = None, tb: str | None = None) -> None:
        """Move ``rec`` to ``state``; ``error`` is a one-line reason, ``tb`` the traceback (kept
        for ``elowen plugin info`` and the audit, never printed by list commands)."""
        old = rec.state
        rec.state = state
        keep = state in ("error", "needs-approval")
        rec.error = error if keep else None
        rec.traceback = tb if keep else None
        rec.history.append(state)
        if old != state:
            self.generation += 1
            k = self._kernel
            k.store.audit("kernel", f"plugin.{state}", rec.name, "ok" if state != "error" else "error", {"from": old, "error": error or "", "traceback": (tb or "")[-4000:]})
            k.events.publish(f"plugin.{state}", {"name": rec.name, "from": old, "error": error})

    async def _enable(self, rec: PluginRecord) -> None:
        assert rec.manifest is not None and self._nursery is not None
        k = self._kernel
        t0 = time.perf_counter()
        key = self._key(rec)
        try:
            config = rec.manifest.validate_config(self._settings_entry(rec.name).get("config", {}))
        except ConfigError as exc:
            rec.error_key = key
            self._set_state(rec, "error", f"invalid config: {exc}")
            return
        if rec.module is None:
            try:
                # import in a worker thread: a slow import must not hold the trio thread (the
                # daemon serves requests meanwhile); the import lock keeps it safe
                rec.module = await trio.to_thread.run_sync(rec.source.loader)
            except BaseException as exc:  # an import can raise anything, SystemExit included
                if isinstance(exc, (KeyboardInterrupt, trio.Cancelled)):
                    raise
                rec.error_key = key
                self._set_state(rec, "error", f"import of {rec.source.entry} failed: {_summary(exc)}", traceback.format_exc())
                return
        ctx = Context(k, rec.name, config=config, capabilities=self.granted(rec))
        await self._nursery.start(ctx.host)
        registered = False
        try:
            k.pm.register(rec.module, name=rec.name)
            registered = True
            self._apply_schema(rec, ctx)
            for hook, kind in CONTRIBUTION_KINDS.items():
                await k.bus.call_plugin(rec.name, hook, ctx, register=self._registrar(rec.name, kind, ctx))
            lane = k.bus.open_lane(rec.name)
            ctx.start_soon(k.bus.run_lane, lane)
            for kind, name in list(ctx.ledger):
                if kind == "loop":
                    ctx.start_soon(_run_loop, ctx, k.contributions.get("loop", name).obj)
            await k.bus.call_plugin(rec.name, "on_load", ctx, timeout=ON_LOAD_TIMEOUT)
        except Exception as exc:
            tb = traceback.format_exc()
            ctx.cancel_scope.cancel()
            k.bus.close_lane(rec.name)
            k.contributions.remove_ledger(rec.name, ctx.ledger)
            if registered:
                k.pm.unregister(name=rec.name)
            rec.error_key = key
            self._set_state(rec, "error", f"enable failed: {_summary(exc)}", tb)
            return
        rec.ctx = ctx
        rec.applied_key = key
        rec.missing = ()
        self._enabled[rec.name] = ctx
        k.bus.rebuild(self._enabled)
        rec.enabled_ms = (time.perf_counter() - t0) * 1000
        self._set_state(rec, "enabled")

    async def _disable(self, rec: PluginRecord, state: str, *, reason: str | None = None, persist_state: bool = True) -> None:
        k = self._kernel
        ctx = rec.ctx
        if ctx is None:
            self._set_state(rec, state, reason)
            return
        self._enabled.pop(rec.name, None)
        k.bus.rebuild(self._enabled)  # stop new dispatches
        lane = k.bus.close_lane(rec.name)
        if lane is not None and not await k.bus.drain(lane, DRAIN_TIMEOUT):
            log.warning("plugin %s: in-flight hook calls did not finish in %ss; cancelling them", rec.name, DRAIN_TIMEOUT)
        ctx.cancel_scope.cancel()
        with trio.move_on_after(DRAIN_TIMEOUT):
            await ctx.stopped.wait()
        try:
            await k.bus.call_plugin(rec.name, "on_unload", ctx, timeout=ON_LOAD_TIMEOUT)
        except Exception:
            log.exception("plugin %s: on_unload failed", rec.name)
        k.contributions.remove_ledger(rec.name, ctx.ledger)
        if k.pm.get_plugin(rec.name) is not None:
            k.pm.unregister(name=rec.name)
        rec.ctx = None
        rec.applied_key = ""
        if persist_state:
            self._set_state(rec, state, reason)

    def _registrar(self, plugin: str, kind: str, ctx: Context) -> Callable[[Any], bool]:
        """The ``register`` callable handed to a contribution hook: refuses (returns ``False``,
        WARNING log, audit ``register.<kind>`` ``denied``) what the manifest's
        ``[contributes]`` does not declare, then adds it (first writer wins)."""
        contributions = self._kernel.contributions
        manifest = self._records[plugin].manifest

        def register(obj: Any) -> bool:
            try:
                name = contribution_name(kind, obj)
            except AttributeError:
                name = repr(obj)[:120]
            if manifest is None or not manifest.declares(kind, name):
                field_name = KIND_FIELDS.get(kind, kind)
                log.warning("plugin %s: %s %r is not declared in its manifest's [contributes] %s; refused",
                            plugin, kind, name, field_name)
                self._kernel.store.audit(plugin, f"register.{kind}", name, "denied", {"reason": f"not declared in [contributes] {field_name}"})
                return False
            return contributions.add(plugin, kind, obj, ctx.ledger)

        return register

    def _apply_schema(self, rec: PluginRecord, ctx: Context) -> None:
        path = rec.manifest.path.parent / "schema.sql" if rec.manifest and rec.manifest.path else None
        if path is None or not path.is_file():
            return
        ctx.require("store", "apply its schema.sql")
        sql = path.read_text(encoding="utf-8")
        m = _SCHEMA_VERSION_RE.search(sql)
        self._kernel.store.apply_plugin_schema(rec.name, sql, int(m.group(1)) if m else 1)


def _summary(exc: BaseException) -> str:
    """One line for a user: the exception type and message, with the innermost cause."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


async def _run_loop(ctx: Context, loop: Loop) -> None:
    """Call ``loop.fn`` every ``loop.interval`` seconds until the plugin's scope is cancelled."""
    if not loop.run_at_start:
        await trio.sleep(loop.interval)
    last_error = ""
    while True:
        try:
            result = loop.fn()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if error != last_error:  # the same failure every interval is logged once
                ctx.log.exception("loop %s failed (logged once until it changes)", loop.name)
            last_error = error
        else:
            if last_error:
                ctx.log.info("loop %s works again", loop.name)
            last_error = ""
        await trio.sleep(loop.interval)

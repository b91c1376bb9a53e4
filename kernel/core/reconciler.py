"""The plugin registry's reconciler: the one task that enables and disables plugins.

States: ``discovered`` (found, never enabled or disabled by the user), ``enabled``,
``disabled``, ``error`` (import, manifest, config or ``on_load`` failure, traceback kept; or a
required service that no plugin provides, or a dependency cycle — see :mod:`.ordering`; the
kernel goes on), ``needs-approval`` (the plugin now requires capabilities the user has not
granted, e.g. after an upgrade).

Contributions are checked against the manifest's ``[contributes]``: anything a plugin
registers that its manifest does not declare is refused (WARNING log, audit
``register.<kind>`` ``denied``), so ``declares:`` in ``elowen plugin info`` can be trusted. A
service that does not satisfy its contract fails the enable (state ``error``, naming the
missing members).

Desired state lives in settings (``[plugins.<name>]`` ``enabled``, ``granted``, ``config``);
every change — API, CLI, or a hand edit of ``config.toml`` — is applied by :meth:`Registry.run`,
the single reconciler task. Each reconcile orders the plugins that should run by the services
their manifests require and provide (providers first, ties by name), disables what should stop
(dependents first), then enables in order:

* disable: announce its services as going (``on_service(name, False)``, awaited) → stop new
  dispatches → drain in-flight async hook calls (bounded) → cancel the plugin's scope →
  ``on_unload`` → undo its ledger → unregister from pluggy;
* enable: import (cached in ``sys.modules``; never reloaded) → register with pluggy →
  schema → contributions → loops → ``on_load`` → announce its services
  (``on_service(name, True)``).

A plugin waiting for a provider (state ``error``, :attr:`~.discovery.PluginRecord.waiting`) is
looked at again at every reconcile and enabled as soon as its provider is. Each transition
bumps :attr:`Registry.generation`, writes an audit record and publishes a ``plugin.<state>``
event.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import re
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from elowen_sdk import ConfigError, ElowenError, Loop, Manifest
from elowen_sdk.hookspecs import CONTRIBUTION_KINDS
from elowen_sdk.manifest import KIND_FIELDS

from . import ordering
from .context import Context
from .contributions import ExecutorCheckError, ServiceConformanceError, contribution_name
from .discovery import Catalog, PluginNotInstalled, PluginRecord
from .quarantine import Quarantine

if TYPE_CHECKING:
    from .kernel import Kernel

log = logging.getLogger(__name__)

DRAIN_TIMEOUT = 2.0
ON_LOAD_TIMEOUT = 10.0
_SCHEMA_VERSION_RE = re.compile(r"^--\s*(?:schema-)?version:\s*(\d+)", re.MULTILINE)  # the store's format: both spellings


class PluginHasDependents(ElowenError):
    """Disabling the plugin was refused: enabled plugins require services only it offers.
    The daemon answers it with 409 ``has_dependents``.

    Attributes:
        name: the plugin asked to be disabled.
        dependents: the enabled plugins that would lose a required service, in the order a
            cascade would disable them.
    """

    def __init__(self, name: str, dependents: list[str]) -> None:
        self.name = name
        self.dependents = list(dependents)
        super().__init__(
            f"plugin {name!r} is required by enabled plugins: {', '.join(dependents)}; disable them first, "
            f"or disable with cascade (`elowen plugin disable {name} --cascade`) to disable them too"
        )


class Registry(Catalog):
    """Owns every plugin's state. Only :meth:`run` (the reconciler task) changes it."""

    def __init__(self, kernel: Kernel, *, discover_entry_points: bool = True) -> None:
        super().__init__(kernel, discover_entry_points=discover_entry_points)
        self._enabled: dict[str, Context] = {}
        self._send, self._receive = trio.open_memory_channel[tuple[trio.Event, set[str]]](math.inf)
        self._nursery: trio.Nursery | None = None
        self._explicit_retry: set[str] = set()
        self._last_new: list[str] = []
        self._pending_failures: dict[str, str] = {}
        self.quarantine = Quarantine(kernel.home, safe=getattr(kernel, "safe", False))
        """Plugins held off (auto-disabled; in safe mode also those that failed last time)."""
        self.ready = trio.Event()
        """Set once the first discovery and reconcile have finished (every plugin that should
        be enabled at start-up is enabled or in ``error``)."""
        self._go = trio.Event()

    # ------------------------------------------------------------------ reading

    def contexts(self) -> dict[str, Context]:
        """The contexts of the enabled plugins (name → context)."""
        return dict(self._enabled)

    def describe(self, name: str) -> dict[str, Any]:
        """Everything known about a plugin without importing it: record, manifest, and what
        it contributes now."""
        rec = self.get(name)
        out = rec.to_dict(self.granted(rec))
        out["manifest"] = rec.manifest.to_dict() if rec.manifest else None
        out["config"] = self._settings_entry(name).get("config", {})
        out["contributions"] = [{"kind": o.kind, "name": o.name} for o in self._kernel.contributions.owned_by(name)]
        return out

    def manifests(self) -> dict[str, Manifest]:
        """name → manifest of every plugin with a valid manifest."""
        return {n: r.manifest for n, r in self._records.items() if r.manifest is not None}

    def _state_of(self, name: str) -> str:
        rec = self._records.get(name)
        if rec is None:
            return "not installed"
        if rec.state == "error":
            return f"in error ({rec.error})" if rec.error else "in error"
        if rec.state == "enabled":
            return "enabled" if self._desired(rec) is True else "disabled"  # being disabled now
        return "disabled" if rec.state in ("disabled", "discovered") else rec.state

    def enabled_order(self) -> list[str]:
        """The enabled plugins, providers before consumers (disable in the reverse order)."""
        p = ordering.plan(self.manifests(), self._enabled, state_of=self._state_of)
        return [*p.order, *sorted(p.blocked)]

    def dependents(self, name: str) -> list[str]:
        """The enabled plugins that would lose a required service if ``name`` were disabled
        (directly or through another dependent), in the order to disable them."""
        if name not in self._enabled:
            return []
        others = [n for n in self._enabled if n != name]
        blocked = ordering.plan(self.manifests(), others, state_of=self._state_of).blocked
        return [n for n in reversed(self.enabled_order()) if n in blocked]

    def why_unavailable(self, service: str) -> str:
        """A sentence for :class:`~elowen_sdk.ServiceUnavailable`: who could offer ``service``."""
        offers = sorted(n for n, m in self.manifests().items() if ordering.provides(m, service))
        if not offers:
            return "no installed plugin provides it"
        return "; ".join(f"plugin {n!r} offers it but is {self._state_of(n)}" for n in offers)

    # ------------------------------------------------------------------ desired state

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

    async def disable(self, name: str, *, cascade: bool = False) -> dict[str, Any]:
        """Disable ``name`` now (desired state written to settings) and return its record.

        With ``cascade``, the enabled plugins that require its services (see
        :meth:`dependents`) are disabled too, first; the record's ``cascaded`` lists them in the
        order they were disabled (empty otherwise).

        Raises:
            PluginHasDependents: enabled plugins require it and ``cascade`` is false (nothing
                is changed).
            PluginNotFound: no such plugin.
        """
        self.get(name)
        dependents = self.dependents(name)
        if dependents and not cascade:
            self._kernel.store.audit("kernel", "plugin.disable", name, "denied", {"dependents": dependents})
            raise PluginHasDependents(name, dependents)

        def mutate(data: dict[str, Any]) -> None:
            plugins = data.setdefault("plugins", {})
            for n in (*dependents, name):
                plugins.setdefault(n, {})["enabled"] = False

        self._kernel.settings.update(mutate)
        await self.reconcile()
        out = self.describe(name)
        out["cascaded"] = dependents
        return out

    async def configure(self, name: str, values: dict[str, Any]) -> dict[str, Any]:
        """Validate and store config ``values`` for ``name``; an enabled plugin is restarted
        with them. Raises :class:`~elowen_sdk.ConfigError`."""
        rec = self.get(name)
        if rec.manifest is None:
            raise ConfigError(f"plugin {name!r} has no valid manifest: {rec.error}")
        manifest = rec.manifest

        def mutate(data: dict[str, Any]) -> None:
            # merged with the config as stored now, under the settings lock: two requests
            # setting different keys at once keep both
            entry = data.setdefault("plugins", {}).setdefault(name, {})
            current = dict(entry.get("config", {}))
            current.update(values)
            validated = manifest.validate_config(current)
            entry["config"] = {k: validated[k] for k in current}

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
        self.quarantine.mark(name, "auto-disabled", reason)  # persisted: a restart keeps it off
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
                    for name in reversed(self.enabled_order()):
                        with trio.move_on_after(DRAIN_TIMEOUT + 1):
                            await self._disable(self._records[name], "disabled", persist_state=False)
                nursery.cancel_scope.cancel()

    async def _reconcile(self) -> None:
        records = self._records
        failed = dict(self._pending_failures)
        self._pending_failures.clear()
        want: list[str] = []
        for name in sorted(records):
            rec = records[name]
            if self._desired(rec) is not True or name in failed:
                continue
            if name in self._explicit_retry:
                self.quarantine.clear(name)
            held = self.quarantine.held(name)
            if held is not None:
                if rec.state != "error" or rec.error != held:
                    self._set_state(rec, "error", held)
                continue
            if rec.state != "enabled":
                if rec.manifest is None:
                    if name in self._explicit_retry:
                        self._read_manifest(rec)
                    if rec.manifest is None:
                        continue
                if rec.state == "error" and not rec.waiting and name not in self._explicit_retry and rec.error_key == self._key(rec):
                    continue
                missing = tuple(c for c in rec.manifest.required if c not in self.granted(rec))
                rec.missing = missing
                if missing:
                    self._set_state(rec, "needs-approval", f"needs capabilities not granted: {', '.join(missing)}")
                    continue
            want.append(name)
        plan = ordering.plan(self.manifests(), want, state_of=self._state_of)
        for name in reversed(self.enabled_order()):  # dependents before their providers
            rec = records[name]
            if name in failed:
                await self._disable(rec, "error", reason=failed[name])
                rec.error_key = self._key(rec)
            elif self._desired(rec) is not True:
                await self._disable(rec, "disabled")
            elif name in plan.blocked:
                await self._disable(rec, "error", reason=plan.blocked[name], waiting=True)
            elif self._key(rec) != rec.applied_key:
                await self._disable(rec, "disabled", reason="config or grants changed")  # enabled again below
        for name in plan.order:
            await trio.sleep(0)  # let requests in between plugins (imports hold the thread)
            rec = records[name]
            if rec.state == "enabled":
                continue
            unmet = self._unmet(rec)
            if unmet:
                self._set_state(rec, "error", unmet, waiting=True)
                continue
            await self._enable(rec)
        await self._disable_unmet()
        for name, reason in plan.blocked.items():
            if records[name].state != "enabled":
                self._set_state(records[name], "error", reason, waiting=True)
        for name in sorted(records):
            rec = records[name]
            if self._desired(rec) is False and rec.state in ("discovered", "needs-approval", "error"):
                self._set_state(rec, "disabled")
        self._explicit_retry.clear()

    async def _disable_unmet(self) -> None:
        """Disable (state ``error``, waiting) every enabled plugin a required service of which
        is gone — its provider failed to come back, e.g. after a config change that put it in
        ``error`` — dependents first; each is enabled again when the service is back."""
        changed = True
        while changed:
            changed = False
            for name in reversed(self.enabled_order()):
                rec = self._records[name]
                unmet = self._unmet(rec) if rec.manifest is not None else None
                if unmet:
                    await self._disable(rec, "error", reason=unmet, waiting=True)
                    changed = True

    def _unmet(self, rec: PluginRecord) -> str | None:
        """Why ``rec`` cannot be enabled now: a required service that is not registered (its
        provider failed to start, or did not register what its manifest declares)."""
        assert rec.manifest is not None
        registered = self._kernel.contributions.all("service")
        for service in ordering.required_services(rec.manifest):
            if service not in ordering.HOST_SERVICES and service not in registered and not ordering.provides(rec.manifest, service):
                return f"waiting for service {service!r}: {self.why_unavailable(service)}"
        return None

    # ------------------------------------------------------------------ transitions

    async def _enable(self, rec: PluginRecord) -> None:
        assert rec.manifest is not None and self._nursery is not None
        t0 = time.perf_counter()
        key = self._key(rec)
        try:
            config = rec.manifest.validate_config(self._settings_entry(rec.name).get("config", {}))
        except ConfigError as exc:
            rec.error_key = key
            self._set_state(rec, "error", f"invalid config: {exc}")
            return
        self.quarantine.mark(rec.name, "loading", "it was being enabled")
        try:
            await self._enable_marked(rec, config, key, t0)
        finally:
            if rec.state == "error" and not rec.waiting:
                self.quarantine.mark(rec.name, "failed", rec.error or "enable failed")
            else:
                self.quarantine.clear(rec.name, kinds=("loading", "failed"))

    async def _enable_marked(self, rec: PluginRecord, config: Any, key: str, t0: float) -> None:
        assert rec.manifest is not None and self._nursery is not None
        k = self._kernel
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
            refused: list[ServiceConformanceError | ExecutorCheckError] = []
            for hook, kind in CONTRIBUTION_KINDS.items():
                await k.bus.call_plugin(rec.name, hook, ctx, register=self._registrar(rec.name, kind, ctx, refused))
            if refused:
                raise refused[0]
            lane = k.bus.open_lane(rec.name)
            ctx.start_soon(k.bus.run_lane, lane)
            for kind, name in list(ctx.ledger):
                if kind == "loop":
                    ctx.start_soon(_run_loop, ctx, k.contributions.get("loop", name).obj)
            # a third-party plugin's sync on_load runs in a worker thread: it cannot freeze the daemon
            await k.bus.call_plugin(rec.name, "on_load", ctx, timeout=ON_LOAD_TIMEOUT, threaded=not rec.source.builtin)
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
        k.bus.rebuild(self._enabled, threaded=self._third_party())
        rec.enabled_ms = (time.perf_counter() - t0) * 1000
        self._set_state(rec, "enabled")
        own = _services(ctx)
        for service in own:
            await k.bus.broadcast("on_service", name=service, available=True)
        # the services that were already there are announced to the newcomer alone
        for service in sorted(set(k.contributions.all("service")) - set(own)):
            await k.bus.broadcast_to(rec.name, "on_service", name=service, available=True)

    def _third_party(self) -> set[str]:
        """The enabled plugins that are not builtin (their sync observational hooks run in a
        worker thread, see :meth:`HookBus.rebuild`)."""
        return {name for name in self._enabled if not self.get(name).source.builtin}

    async def _disable(self, rec: PluginRecord, state: str, *, reason: str | None = None, persist_state: bool = True, waiting: bool = False) -> None:
        k = self._kernel
        ctx = rec.ctx
        if ctx is None:
            self._set_state(rec, state, reason, waiting=waiting)
            return
        for service in _services(ctx):  # consumers react while it still works
            await k.bus.broadcast("on_service", name=service, available=False)
        self._enabled.pop(rec.name, None)
        k.bus.rebuild(self._enabled, threaded=self._third_party())  # stop new dispatches
        lane = k.bus.close_lane(rec.name)
        if lane is not None and not await k.bus.drain(lane, DRAIN_TIMEOUT):
            log.warning("plugin %s: in-flight hook calls did not finish in %ss; cancelling them", rec.name, DRAIN_TIMEOUT)
        ctx.cancel_scope.cancel()
        with trio.move_on_after(DRAIN_TIMEOUT):
            await ctx.stopped.wait()
        try:
            await k.bus.call_plugin(rec.name, "on_unload", ctx, timeout=ON_LOAD_TIMEOUT, threaded=not rec.source.builtin)
        except Exception:
            log.exception("plugin %s: on_unload failed", rec.name)
        k.contributions.remove_ledger(rec.name, ctx.ledger)
        if k.pm.get_plugin(rec.name) is not None:
            k.pm.unregister(name=rec.name)
        rec.ctx = None
        rec.applied_key = ""
        if persist_state:
            self._set_state(rec, state, reason, waiting=waiting)

    def _registrar(self, plugin: str, kind: str, ctx: Context, refused: list[ServiceConformanceError | ExecutorCheckError]) -> Callable[[Any], bool]:
        """The ``register`` callable handed to a contribution hook: refuses (returns ``False``,
        WARNING log, audit ``register.<kind>`` ``denied``) what the manifest's
        ``[contributes]`` does not declare, then adds it (first writer wins). A service that
        does not satisfy its contract, or an executor whose ``check()`` fails (e.g. no
        ``patterns.toml``), is refused and recorded in ``refused`` (the enable then fails with it)."""
        contributions = self._kernel.contributions
        manifest = self._records[plugin].manifest

        def register(obj: Any) -> bool:
            try:
                name = contribution_name(kind, obj)
            except AttributeError:
                name = f"<{type(obj).__name__}>"
            if manifest is None or not manifest.declares(kind, name):
                field_name = KIND_FIELDS.get(kind, kind)
                log.warning("plugin %s: %s %r is not declared in its manifest's [contributes] %s; refused", plugin, kind, name, field_name)
                self._kernel.store.audit(plugin, f"register.{kind}", name, "denied", {"reason": f"not declared in [contributes] {field_name}"})
                return False
            try:
                mount = "" if self._records[plugin].source.builtin else f"/plugins/{plugin}"
                return contributions.add(plugin, kind, obj, ctx.ledger, mount=mount)
            except (ServiceConformanceError, ExecutorCheckError) as exc:
                refused.append(exc)
                return False

        return register

    def _apply_schema(self, rec: PluginRecord, ctx: Context) -> None:
        path = rec.manifest.path.parent / "schema.sql" if rec.manifest and rec.manifest.path else None
        if path is None or not path.is_file():
            return
        ctx.require("store", "apply its schema.sql")
        sql = path.read_text(encoding="utf-8")
        m = _SCHEMA_VERSION_RE.search(sql)
        self._kernel.store.apply_plugin_schema(rec.name, sql, int(m.group(1)) if m else 1)


def _services(ctx: Context) -> list[str]:
    """The services in ``ctx``'s ledger, by name."""
    return [name for kind, name in ctx.ledger if kind == "service"]


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

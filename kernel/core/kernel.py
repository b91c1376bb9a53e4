"""The kernel: wires the store, event bus, settings, hook bus and plugin registry together and
runs their tasks in one trio nursery.

Use :meth:`Kernel.open` in hosts and tests::

    async with Kernel.open(home) as kernel:
        await kernel.registry.enable("hello")
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pluggy
import trio

from elowen_sdk import Event, hookspecs
from elowen_sdk._markers import PROJECT_NAME

from . import paths
from .contributions import Contributions
from .discovery import PluginSource
from .events import EventBus
from .hooks import DEFAULT_TIMEOUT, MAX_FAILURES, HookBus
from .reconciler import Registry
from .settings import Settings
from .store import Store

log = logging.getLogger(__name__)


class Kernel:
    """The trio kernel.

    Args:
        home: ``ELOWEN_HOME`` (settings, plugin data); default :func:`paths.home`.
        db_path: the SQLite file; default ``ELOWEN_DB`` or ``home/elowen.db``.
        discover_entry_points: read the ``elowen.plugins`` entry points (tests may turn it off
            and add sources directly).
        sources: extra :class:`PluginSource` objects (the SDK test harness).
        hook_timeout: seconds per async observational / mutating implementation.
        max_hook_failures: hook failures within a minute that put a plugin in ``error``
            (auto-disable, persisted with the reason; 0: never; settings ``[kernel]
            max_hook_failures`` when not given, else :data:`~elowen.core.hooks.MAX_FAILURES`).
        safe: safe mode (:mod:`elowen.core.quarantine`): plugins that failed, or were loading
            when the process died, last time stay off.

    Raises:
        elowen_sdk.ConfigError: ``config.toml`` is invalid.
    """

    def __init__(
        self,
        home: Path | None = None,
        *,
        db_path: Path | None = None,
        discover_entry_points: bool = True,
        sources: list[PluginSource] | None = None,
        hook_timeout: float | None = None,
        max_hook_failures: int | None = None,
        safe: bool = False,
    ) -> None:
        self.home = Path(home) if home is not None else paths.home()
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.settings = Settings(self.home)
        self.settings.load()
        kernel_settings = self.settings.get("kernel", default={}) or {}
        daemon_settings = self.settings.get("daemon", default={}) or {}
        self.store = Store(Path(db_path) if db_path is not None else self._default_db())
        self.events = EventBus(self.store, retention=int(daemon_settings.get("event_retention", 100_000)))
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.contributions = Contributions(self.store.audit, on_host_service=self._on_host_service)
        self.safe = safe
        self.registry = Registry(self, discover_entry_points=discover_entry_points)
        for src in sources or ():
            self.registry.add_source(src)
        if max_hook_failures is None:
            max_hook_failures = int(kernel_settings.get("max_hook_failures", MAX_FAILURES))
        self.bus = HookBus(
            self.pm,
            audit=self.store.audit,
            timeout=hook_timeout if hook_timeout is not None else float(kernel_settings.get("hook_timeout", DEFAULT_TIMEOUT)),
            max_failures=max_hook_failures,
            on_failure_limit=self.registry.fail,
        )
        self.events.add_listener(self._on_event)
        self._cancel: trio.CancelScope | None = None

    def _default_db(self) -> Path:
        env = os.environ.get("ELOWEN_DB")
        return Path(env) if env else self.home / "elowen.db"

    def _on_event(self, event: Event) -> None:
        self.bus.emit("on_event", event=event)

    def _on_host_service(self, name: str, available: bool) -> None:
        # a service the host itself registers (the daemon's ``tasks``) is announced at once
        self.bus.emit("on_service", name=name, available=available)

    async def run(self, *, watch_settings: bool = True, wait_plugins: bool = True, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the kernel's tasks until cancelled: the audit writer, the reconciler (which
        discovers and enables plugins — before this reports started when ``wait_plugins``;
        otherwise once the host calls ``registry.start_loading()``, and ``registry.ready`` is
        set when done) and the settings watcher."""
        try:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                await nursery.start(self.store.run_audit_writer)
                await nursery.start(functools.partial(self.registry.run, wait_ready=wait_plugins))
                if watch_settings:
                    await nursery.start(self._watch_settings)
                task_status.started()
        finally:
            self.settings.stop()
            self.store.flush_audit()

    async def _watch_settings(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        def changed(_data: dict[str, Any]) -> None:
            log.info("config.toml changed on disk; reconciling plugins")
            self.registry.reconcile_soon()

        await self.settings.watch(changed, task_status=task_status)

    def stop(self) -> None:
        """Ask :meth:`run` to finish (plugins are disabled in order, the audit is flushed)."""
        self.settings.stop()
        if self._cancel is not None:
            self._cancel.cancel()

    def close(self) -> None:
        """Flush and close the store. Call after :meth:`run` returned."""
        self.store.flush_audit()
        self.store.close()

    @classmethod
    @asynccontextmanager
    async def open(cls, home: Path | None = None, *, watch_settings: bool = True, wait_plugins: bool = True, **kwargs: Any) -> AsyncIterator[Kernel]:
        """Create a kernel, run it in a nursery, yield it (once plugins are reconciled, unless
        ``wait_plugins`` is false), and shut it down (plugins disabled, audit flushed, store
        closed) on exit."""
        kernel = cls(home, **kwargs)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(functools.partial(kernel.run, watch_settings=watch_settings, wait_plugins=wait_plugins))
                try:
                    yield kernel
                finally:
                    kernel.stop()
        finally:
            kernel.close()

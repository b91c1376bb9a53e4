"""The kernel's implementation of :class:`elowen_sdk.PluginContext`.

One :class:`Context` per enabled plugin. It carries the plugin's validated config, logger,
path guard, its held capabilities, its own nursery (cancelled when the plugin is disabled) and
the ownership ledger of what it contributed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import trio
from elowen_sdk import CapabilityError, parse_capability

from .pathguard import PathGuard

if TYPE_CHECKING:
    from .kernel import Kernel

log = logging.getLogger(__name__)


def _expand_root(arg: str, *, data_dir: Path, home: Path) -> list[Path]:
    """Expand a capability's root argument (``$PLUGIN_DATA/x``, ``$ELOWEN_HOME``, ``~``)."""
    if arg.startswith("$PLUGIN_DATA"):
        return [data_dir / arg[len("$PLUGIN_DATA") :].lstrip("/")]
    if arg.startswith("$ELOWEN_HOME"):
        return [home / arg[len("$ELOWEN_HOME") :].lstrip("/")]
    if arg == "$PROJECTS":
        return []  # project roots are added per call by the hosts that know the user
    return [Path(os.path.expanduser(arg))]


class Context:
    """A plugin's handle on the kernel (implements :class:`elowen_sdk.PluginContext`)."""

    def __init__(self, kernel: Kernel, name: str, *, config: Mapping[str, Any], capabilities: frozenset[str]) -> None:
        self._kernel = kernel
        self.name = name
        self.config: Mapping[str, Any] = MappingProxyType(dict(config))
        self.log = logging.getLogger(f"elowen.plugin.{name}")
        self.capabilities = capabilities
        self.data_dir = kernel.home / "plugins" / name
        self.ledger: list[tuple[str, str]] = []
        self.cancel_scope = trio.CancelScope()
        self.stopped = trio.Event()
        self._nursery: trio.Nursery | None = None
        read_roots = [self.data_dir]
        write_roots = [self.data_dir]
        for cap in capabilities:
            cname, arg = parse_capability(cap)
            if cname in ("fs.read", "fs.write") and arg:
                roots = _expand_root(arg, data_dir=self.data_dir, home=kernel.home)
                read_roots.extend(roots)
                if cname == "fs.write":
                    write_roots.extend(roots)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.guard = PathGuard(read_roots, write_roots)

    # -------------------------------------------------------------- capabilities

    @property
    def generation(self) -> int:
        return self._kernel.registry.generation

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def require(self, capability: str, action: str = "") -> None:
        if capability not in self.capabilities:
            self._kernel.store.audit(self.name, "capability", capability, "denied", {"action": action})
            raise CapabilityError(self.name, capability, action)

    # -------------------------------------------------------------- kernel services

    @property
    def settings(self) -> Mapping[str, Any]:
        """The kernel's settings (``config.toml``) as last loaded; read-only by contract (change
        settings through the API or the CLI, so every change is validated and reconciled)."""
        return MappingProxyType(self._kernel.settings.data)

    def update_settings(self, mutator: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Change ``config.toml`` through the kernel (validated, atomic, reconciled); needs
        ``settings.write``. Returns the new settings."""
        self.require("settings.write", "change settings")
        return self._kernel.settings.update(mutator)

    def contributions(self, kind: str) -> Mapping[str, Any]:
        """An immutable snapshot of every enabled plugin's contributions of ``kind``
        (``tool``, ``command``, ``executor``, …): name → record with ``plugin``, ``name``,
        ``obj``. Take a new snapshot when :attr:`generation` changes."""
        return self._kernel.contributions.all(kind)

    def has_impls(self, hook: str) -> bool:
        """Whether any enabled plugin implements ``hook`` (skip building costly arguments)."""
        return self._kernel.bus.has_impls(hook)

    @property
    def store(self) -> Any:
        self.require("store", "use the store")
        return self._kernel.store

    def publish(self, type: str, data: Mapping[str, Any], project_id: int | None = None) -> int:
        self.require("events.publish", f"publish {type}")
        return self._kernel.events.publish(type, data, project_id).id

    def service(self, name: str) -> Any:
        self.require(f"service:{name}", f"use service {name}")
        return self._kernel.contributions.get("service", name).obj.obj

    def emit(self, hook: str, **kwargs: Any) -> None:
        self._kernel.bus.emit(hook, **kwargs)

    async def mutate(self, hook: str, **kwargs: Any) -> Any:
        return await self._kernel.bus.mutate(hook, **kwargs)

    # -------------------------------------------------------------- background work

    def start_soon(self, fn: Callable[..., Any], *args: Any, name: str | None = None) -> None:
        if self._nursery is None:
            raise RuntimeError(f"plugin {self.name!r} is not running (start background work in on_load)")
        self._nursery.start_soon(self._guarded, fn, args, name=name or getattr(fn, "__qualname__", None))

    async def _guarded(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            await fn(*args)
        except Exception:
            self.log.exception("background task %s failed", getattr(fn, "__qualname__", fn))
            self._kernel.store.audit(self.name, "task", getattr(fn, "__qualname__", ""), "error")

    async def host(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the plugin's nursery until its cancel scope is cancelled (by the registry)."""
        try:
            with self.cancel_scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    task_status.started()
                    await trio.sleep_forever()
        finally:
            self._nursery = None
            self.stopped.set()

    def __repr__(self) -> str:
        return f"<Context {self.name}>"

"""The kernel's implementation of :class:`elowen_sdk.PluginContext`.

One :class:`Context` per enabled plugin. It carries the plugin's validated config, logger,
path guard, its held capabilities, its own nursery (cancelled when the plugin is disabled) and
the ownership ledger of what it contributed.

A third-party plugin's synchronous ``on_load`` runs in a worker thread (so it cannot freeze
the daemon); the context's methods called from such a thread run on the trio thread
(``trio.from_thread``), so ``ctx.start_soon``, ``ctx.publish``, ``ctx.service`` and
``ctx.store`` work there as they do in the trio thread.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, overload

import trio

from elowen_sdk import CapabilityError, ServiceUnavailable, parse_capability
from elowen_sdk.contracts import contract_name

from .pathguard import PathGuard

if TYPE_CHECKING:
    from .kernel import Kernel

log = logging.getLogger(__name__)

_S = TypeVar("_S")


class _TrioThreadProxy:
    """Forwards calls to ``target``; a call made from another thread runs on the trio thread."""

    __slots__ = ("_target", "_owner")

    def __init__(self, target: Any, owner: Context) -> None:
        self._target = target
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value
        owner = self._owner

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            return owner._on_trio(value, *args, **kwargs)

        return call


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
        self._trio_thread = threading.get_ident()
        try:
            self._token: trio.lowlevel.TrioToken | None = trio.lowlevel.current_trio_token()
        except RuntimeError:
            self._token = None
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

    def _on_trio(self, fn: Callable[..., _S], *args: Any, **kwargs: Any) -> _S:
        """``fn(*args, **kwargs)``, on the trio thread (at once when already there)."""
        if threading.get_ident() == self._trio_thread or self._token is None:
            return fn(*args, **kwargs)
        return trio.from_thread.run_sync(functools.partial(fn, *args, **kwargs), trio_token=self._token)

    # -------------------------------------------------------------- capabilities

    @property
    def generation(self) -> int:
        return self._kernel.registry.generation

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def _declares(self, capability: str) -> bool:
        """Whether this plugin's manifest declares ``capability`` (required or optional)."""
        try:
            manifest = self._kernel.registry.manifests().get(self.name)
        except Exception:  # a bare context (tests) has no registry entry: say "declare it"
            return False
        return manifest is not None and capability in (*manifest.required, *manifest.optional)

    def require(self, capability: str, action: str = "") -> None:
        if capability not in self.capabilities:
            self._kernel.store.audit(self.name, "capability", capability, "denied", {"action": action})
            raise CapabilityError(self.name, capability, action, declared=self._declares(capability))

    def path_guard(
        self, read_roots: Iterable[str | os.PathLike[str]], write_roots: Iterable[str | os.PathLike[str]] = (), *, base: str | os.PathLike[str] | None = None
    ) -> PathGuard:
        return PathGuard(read_roots, write_roots, base=base)

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
        return self._on_trio(self._kernel.settings.update, mutator)

    def contributions(self, kind: str) -> Mapping[str, Any]:
        """An immutable snapshot of every enabled plugin's contributions of ``kind``
        (``tool``, ``command``, ``executor``, …): name → record with ``plugin``, ``name``,
        ``obj``. Take a new snapshot when :attr:`generation` changes."""
        return self._on_trio(self._kernel.contributions.all, kind)

    def has_impls(self, hook: str) -> bool:
        """Whether any enabled plugin implements ``hook`` (skip building costly arguments)."""
        return self._kernel.bus.has_impls(hook)

    @property
    def store(self) -> Any:
        self.require("store", "use the store")
        if threading.get_ident() != self._trio_thread:
            return _TrioThreadProxy(self._kernel.store, self)
        return self._kernel.store

    def publish(self, type: str, data: Mapping[str, Any], project_id: int | None = None) -> int:
        self.require("events.publish", f"publish {type}")
        return self._on_trio(self._kernel.events.publish, type, data, project_id).id

    @overload
    def service(self, contract: Callable[..., _S], /) -> _S: ...

    @overload
    def service(self, contract: str, /) -> Any: ...

    def service(self, contract: Any, /) -> Any:
        """The service named ``contract`` (a name, or a contract class whose name is taken with
        :func:`~elowen_sdk.contracts.contract_name`); see :meth:`elowen_sdk.PluginContext.service`.

        Raises:
            CapabilityError: ``service:<name>`` is not held (audited ``denied``).
            ServiceUnavailable: nothing offers it now.
            TypeError: ``contract`` is neither a string nor a service contract.
        """
        name = contract if isinstance(contract, str) else contract_name(contract)
        self.require(f"service:{name}", f"use service {name}")
        owned = self._on_trio(self._kernel.contributions.all, "service").get(name)
        if owned is None:
            raise ServiceUnavailable(name, self._kernel.registry.why_unavailable(name))
        return owned.obj.obj

    def emit(self, hook: str, **kwargs: Any) -> None:
        self._on_trio(self._kernel.bus.emit, hook, **kwargs)

    async def mutate(self, hook: str, **kwargs: Any) -> Any:
        return await self._kernel.bus.mutate(hook, **kwargs)

    # -------------------------------------------------------------- background work

    def start_soon(self, fn: Callable[..., Any], *args: Any, name: str | None = None) -> None:
        if threading.get_ident() != self._trio_thread:
            self._on_trio(self.start_soon, fn, *args, name=name)
            return
        if self._nursery is None:
            raise RuntimeError(f"plugin {self.name!r} is not running (start background work in on_load)")
        self._nursery.start_soon(self._guarded, fn, args, name=name or getattr(fn, "__qualname__", None))

    async def _guarded(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            await fn(*args)
        except BaseException as exc:  # the plugin boundary: SystemExit and the like stop here
            if _is_cancellation(exc):
                raise
            self.log.error("background task %s failed", getattr(fn, "__qualname__", fn), exc_info=exc)
            self._kernel.store.audit(self.name, "task", getattr(fn, "__qualname__", ""), "error", {"error": type(exc).__name__})

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


def _is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the kernel's own cancellation (``trio.Cancelled``, alone or grouped),
    which must propagate; anything else a plugin raises is the plugin's failure."""
    if isinstance(exc, (trio.Cancelled, GeneratorExit)):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.split((trio.Cancelled, GeneratorExit))[1] is None
    return False

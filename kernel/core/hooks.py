"""The hook bus: calls plugins' hook implementations.

pluggy's :class:`~pluggy.PluginManager` is the registry and validator of hook
implementations; this module does the calling, because pluggy is synchronous (an ``async def``
implementation would only return an un-awaited coroutine) and fail-closed (one raising
implementation stops the whole call).

* :meth:`HookBus.emit` — observational hooks. Sync implementations run inline, each in a
  ``try``; async implementations are queued (``send_nowait``) to their plugin's workers, which
  run them under the per-hook timeout. Fail-open: an exception, a timeout or a full queue is
  logged, audited and skipped. ``emit`` never awaits and never raises.
* :meth:`HookBus.mutate` — mutating hooks, one implementation after another in pluggy's order;
  a returned :class:`~elowen_sdk.Patch` is applied only when the plugin holds
  ``hook.mutate:<target>``, otherwise it is dropped and audited as ``denied``.
* :meth:`HookBus.call_plugin` — lifecycle and contribution hooks of a single plugin.

The dispatch tables are rebuilt by the registry whenever a plugin is enabled or disabled
(:meth:`HookBus.rebuild`); a hook with no implementation costs one dict lookup.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pluggy
import trio
from elowen_sdk import Patch, apply_patch
from elowen_sdk.hookspecs import HOOK_KINDS, MUTATING_FIELDS, MUTATING_TARGETS

log = logging.getLogger(__name__)

AuditFn = Callable[..., None]

DEFAULT_TIMEOUT = 2.0
"""Seconds an async observational or a mutating implementation may take."""

WORKERS_PER_PLUGIN = 4
"""Async observational calls of one plugin that may run at the same time."""

QUEUE_SIZE = 1024
"""Queued async observational calls per plugin before new ones are dropped (and audited)."""


@dataclass(slots=True)
class _Impl:
    plugin: str
    hook: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    is_async: bool
    ctx: Any


@dataclass(slots=True)
class PluginLane:
    """A plugin's async dispatch state: its work queue and in-flight counter.

    Created by :meth:`HookBus.open_lane` when the plugin is enabled; its workers run in the
    plugin's own nursery, so cancelling the plugin's scope stops them.
    """

    plugin: str
    send: trio.MemorySendChannel[tuple[_Impl, tuple[Any, ...]]]
    receive: trio.MemoryReceiveChannel[tuple[_Impl, tuple[Any, ...]]]
    in_flight: int = 0
    idle: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.idle.set()


class HookBus:
    """Dispatches hook calls to enabled plugins.

    Args:
        pm: the plugin manager holding the hookspecs and registered plugins.
        audit: ``audit(actor, action, target="", outcome="ok", detail=None)``, non-blocking.
        timeout: per-implementation timeout in seconds for async observational and all
            mutating implementations (sync observational ones cannot be interrupted; one
            slower than this is audited as ``slow``).
        max_failures: consecutive failures after which ``on_failure_limit(plugin)`` is called
            (the kernel disables the plugin); ``None`` turns auto-disable off.
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        *,
        audit: AuditFn,
        timeout: float = DEFAULT_TIMEOUT,
        max_failures: int | None = None,
        on_failure_limit: Callable[[str, str], None] | None = None,
    ) -> None:
        self._pm = pm
        self._audit = audit
        self.timeout = timeout
        self.max_failures = max_failures
        self._on_failure_limit = on_failure_limit
        self._observational: dict[str, tuple[tuple[_Impl, ...], tuple[_Impl, ...]]] = {}
        self._mutating: dict[str, tuple[_Impl, ...]] = {}
        self._lanes: dict[str, PluginLane] = {}
        self._failures: dict[str, int] = {}

    # ------------------------------------------------------------------ tables

    def rebuild(self, contexts: Mapping[str, Any]) -> None:
        """Recompute the dispatch tables for the plugins in ``contexts`` (name → context).

        Plugins registered in pluggy but absent from ``contexts`` (being disabled) get no new
        dispatches.
        """
        observational: dict[str, tuple[tuple[_Impl, ...], tuple[_Impl, ...]]] = {}
        mutating: dict[str, tuple[_Impl, ...]] = {}
        for hook, kind in HOOK_KINDS.items():
            if kind not in ("observational", "mutating"):
                continue
            impls = self._impls(hook, contexts)
            if not impls:
                continue
            if kind == "observational":
                sync = tuple(i for i in impls if not i.is_async)
                async_ = tuple(i for i in impls if i.is_async)
                observational[hook] = (sync, async_)
            else:
                mutating[hook] = tuple(impls)
        self._observational = observational
        self._mutating = mutating

    def _impls(self, hook: str, contexts: Mapping[str, Any], only: str | None = None) -> list[_Impl]:
        caller = getattr(self._pm.hook, hook)
        out = []
        # pluggy calls implementations in reverse registration order (tryfirst/trylast honoured)
        for hi in reversed(caller.get_hookimpls()):
            name = hi.plugin_name
            if only is not None and name != only:
                continue
            ctx = contexts.get(name)
            if ctx is None:
                continue
            if hi.hookwrapper or hi.wrapper:
                log.warning("plugin %s: wrapper implementations of %s are ignored", name, hook)
                continue
            fn = hi.function
            out.append(
                _Impl(
                    plugin=name,
                    hook=hook,
                    function=fn,
                    argnames=tuple(hi.argnames),
                    is_async=inspect.iscoroutinefunction(fn),
                    ctx=ctx,
                )
            )
        return out

    @staticmethod
    def _args(impl: _Impl, kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(impl.ctx if a == "ctx" else kwargs[a] for a in impl.argnames)

    def has_impls(self, hook: str) -> bool:
        """Whether any enabled plugin implements ``hook``."""
        return hook in self._observational or hook in self._mutating

    # ------------------------------------------------------------------ lanes

    def open_lane(self, plugin: str) -> PluginLane:
        """Create the async dispatch lane of ``plugin``; run :meth:`run_lane` in its nursery."""
        send, receive = trio.open_memory_channel[tuple[_Impl, tuple[Any, ...]]](QUEUE_SIZE)
        lane = PluginLane(plugin, send, receive)
        self._lanes[plugin] = lane
        return lane

    async def run_lane(self, lane: PluginLane) -> None:
        """Run the workers of ``lane`` until cancelled (by the plugin's scope)."""
        async with trio.open_nursery() as nursery:
            for _ in range(WORKERS_PER_PLUGIN):
                nursery.start_soon(self._worker, lane, lane.receive.clone())

    async def _worker(self, lane: PluginLane, receive: trio.MemoryReceiveChannel[Any]) -> None:
        # One cancel scope serves many calls: its deadline is set per call (cheaper than a
        # scope per call) and lifted while waiting for work; after a timeout a new one is made.
        # Queued calls are taken without a checkpoint while there are some; the worker yields
        # to the scheduler every 64 calls.
        async with receive:
            while True:
                current: _Impl | None = None
                with trio.CancelScope() as scope:
                    batch = 0
                    while True:
                        try:
                            impl, args = receive.receive_nowait()
                        except trio.WouldBlock:
                            scope.deadline = math.inf
                            batch = 0
                            try:
                                impl, args = await receive.receive()
                            except trio.EndOfChannel:
                                return
                        except trio.EndOfChannel:
                            return
                        current = impl
                        scope.deadline = trio.current_time() + self.timeout
                        try:
                            await impl.function(*args)
                        except Exception as exc:  # fail-open: never reaches other plugins
                            self._failed(impl, "error", f"{type(exc).__name__}: {exc}", exc)
                        else:
                            if self._failures:
                                self._succeeded(impl.plugin)
                        finally:
                            self._done(lane)
                        current = None
                        batch += 1
                        if batch >= 64:
                            batch = 0
                            scope.deadline = math.inf
                            await trio.lowlevel.checkpoint()
                if scope.cancelled_caught and current is not None:
                    self._failed(current, "timeout", f"took longer than {self.timeout:g}s")

    @staticmethod
    def _done(lane: PluginLane) -> None:
        lane.in_flight -= 1
        if lane.in_flight == 0:
            lane.idle.set()

    def close_lane(self, plugin: str) -> PluginLane | None:
        """Stop queueing to ``plugin`` (its tables must already exclude it); returns the lane."""
        return self._lanes.pop(plugin, None)

    async def drain(self, lane: PluginLane, timeout: float) -> bool:
        """Wait until ``lane`` has no queued or running call, at most ``timeout`` seconds.

        Returns ``True`` when it drained, ``False`` when the wait timed out.
        """
        with trio.move_on_after(timeout):
            while lane.in_flight:
                await lane.idle.wait()
            return True
        return False

    # ------------------------------------------------------------------ observational

    def emit(self, hook: str, /, **kwargs: Any) -> None:
        """Call every enabled implementation of the observational ``hook``.

        Never awaits and never raises; results are discarded. Must be called from the trio
        thread (async implementations are queued to trio channels).
        """
        entry = self._observational.get(hook)
        if entry is None:
            return
        sync, async_ = entry
        for impl in sync:
            try:
                impl.function(*[impl.ctx if a == "ctx" else kwargs[a] for a in impl.argnames])
            except Exception as exc:
                self._failed(impl, "error", f"{type(exc).__name__}: {exc}", exc)
            else:
                if self._failures:
                    self._succeeded(impl.plugin)
        for impl in async_:
            lane = self._lanes.get(impl.plugin)
            if lane is None:
                continue
            try:
                lane.send.send_nowait((impl, self._args(impl, kwargs)))
            except trio.WouldBlock:
                self._failed(impl, "dropped", "queue full")
                continue
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                continue
            if lane.in_flight == 0:
                lane.idle = trio.Event()
            lane.in_flight += 1

    # ------------------------------------------------------------------ mutating

    async def mutate(self, hook: str, /, **kwargs: Any) -> Any:
        """Run the mutating ``hook`` and return its object after every allowed patch.

        ``kwargs`` are the hook's arguments; the object patches apply to is the argument named in
        :data:`~elowen_sdk.hookspecs.MUTATING_FIELDS` (e.g. ``turn`` for ``turn_context``). Each
        implementation sees the object as patched by those before it. Every run is audited:
        ``applied``, ``denied`` (capability missing), ``invalid`` (not a Patch for this target),
        ``error`` or ``timeout``.
        """
        arg, fld = MUTATING_FIELDS[hook]
        target = MUTATING_TARGETS[hook]
        obj = kwargs[arg]
        impls = self._mutating.get(hook, ())
        for impl in impls:
            call_kwargs = {**kwargs, arg: obj}
            try:
                if impl.is_async:
                    with trio.fail_after(self.timeout):
                        result = await impl.function(*self._args(impl, call_kwargs))
                else:  # a sync implementation cannot be interrupted: no cancel scope to pay for
                    result = impl.function(*self._args(impl, call_kwargs))
            except trio.TooSlowError:
                self._failed(impl, "timeout", f"took longer than {self.timeout:g}s")
                continue
            except Exception as exc:
                self._failed(impl, "error", f"{type(exc).__name__}: {exc}", exc)
                continue
            self._succeeded(impl.plugin)
            if result is None:
                continue
            for patch in result if isinstance(result, (list, tuple)) else (result,):
                obj = self._apply(impl, target, fld, obj, patch)
        return obj

    def _apply(self, impl: _Impl, target: str, fld: str, obj: Any, patch: Any) -> Any:
        action = f"hook.mutate:{target}"
        if not isinstance(patch, Patch) or patch.target != target:
            self._audit(impl.plugin, action, impl.hook, "invalid", {"patch": repr(patch)[:200]})
            return obj
        if not impl.ctx.has(action):
            log.warning("plugin %s: patch for %s denied (capability %s not declared/granted)", impl.plugin, impl.hook, action)
            self._audit(impl.plugin, action, impl.hook, "denied", {"op": patch.op, "value": repr(patch.value)[:200]})
            return obj
        try:
            new = replace(obj, **{fld: apply_patch(getattr(obj, fld), patch)})
        except (TypeError, ValueError) as exc:
            self._audit(impl.plugin, action, impl.hook, "invalid", {"error": str(exc)})
            return obj
        self._audit(impl.plugin, action, impl.hook, "applied", {"op": patch.op, "value": repr(patch.value)[:200]})
        return new

    # ------------------------------------------------------------------ single plugin

    async def call_plugin(self, plugin: str, hook: str, ctx: Any, /, timeout: float | None = None, **kwargs: Any) -> list[Any]:
        """Call ``hook`` on ``plugin`` only (lifecycle and contribution hooks); exceptions
        propagate to the caller (the registry turns them into the plugin's ``error`` state)."""
        results = []
        for impl in self._impls(hook, {plugin: ctx}, only=plugin):
            with trio.fail_after(timeout if timeout is not None else math.inf):
                result = impl.function(*self._args(impl, kwargs))
                if inspect.isawaitable(result):
                    result = await result
            results.append(result)
        return results

    # ------------------------------------------------------------------ failures

    def _succeeded(self, plugin: str) -> None:
        self._failures.pop(plugin, None)

    def _failed(self, impl: _Impl, outcome: str, message: str, exc: BaseException | None = None) -> None:
        log.warning("plugin %s: hook %s %s: %s", impl.plugin, impl.hook, outcome, message, exc_info=exc)
        self._audit(impl.plugin, f"hook.{impl.hook}", impl.hook, outcome, {"message": message[:500]})
        count = self._failures.get(impl.plugin, 0) + 1
        self._failures[impl.plugin] = count
        if self.max_failures is not None and count == self.max_failures and self._on_failure_limit:
            self._on_failure_limit(impl.plugin, f"{count} consecutive hook failures (last: {impl.hook} {outcome}: {message})")

    def failures(self, plugin: str) -> int:
        """Consecutive failures of ``plugin`` since its last success."""
        return self._failures.get(plugin, 0)


def iter_hook_names(kind: str) -> Iterable[str]:
    """Names of the hooks of ``kind`` (``lifecycle``, ``contribution``, ``observational``,
    ``mutating``)."""
    return (h for h, k in HOOK_KINDS.items() if k == kind)

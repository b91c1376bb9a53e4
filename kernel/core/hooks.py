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
* :meth:`HookBus.broadcast` — an observational hook whose implementations the caller waits for
  (service announcements).
* :meth:`HookBus.call_plugin` — lifecycle and contribution hooks of a single plugin (a
  sync implementation may be run in a worker thread under a deadline: ``threaded``).

The plugin boundary: anything a plugin's code raises, ``BaseException`` included
(``SystemExit``, ``KeyboardInterrupt``), is that plugin's failure; only the kernel's own
cancellation (``trio.Cancelled``) goes through. A sync observational implementation is timed;
one slower than :data:`SLOW_SYNC` is audited ``slow`` (it held the trio thread) and, slower
than the hook timeout, counts as a failure. Return values are untrusted (a patch whose
``repr`` raises is dropped and audited ``invalid``). Failure audit rows are rate-limited: one
row per plugin, hook and outcome per :data:`AUDIT_WINDOW` seconds, the next one carrying how
many were suppressed. ``max_failures`` failures of a plugin within ``failure_window`` seconds
put it in ``error`` (auto-disable; on by default, :data:`MAX_FAILURES`).

The dispatch tables are rebuilt by the registry whenever a plugin is enabled or disabled
(:meth:`HookBus.rebuild`); a hook with no implementation costs one dict lookup.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pluggy
import trio

from elowen_sdk import ElowenError, Patch, apply_patch
from elowen_sdk.hookspecs import HOOK_KINDS, MUTATING_FIELDS, MUTATING_TARGETS

from .context import _is_cancellation as is_cancellation

log = logging.getLogger(__name__)

AuditFn = Callable[..., None]

DEFAULT_TIMEOUT = 2.0
"""Seconds an async observational or a mutating implementation may take."""

WORKERS_PER_PLUGIN = 4
"""Async observational calls of one plugin that may run at the same time."""

QUEUE_SIZE = 1024
"""Queued async observational calls per plugin before new ones are dropped (and audited)."""

SLOW_SYNC = 0.1
"""Seconds a sync observational implementation may hold the trio thread before it is audited ``slow``."""

MAX_FAILURES = 10
"""Failures within :data:`FAILURE_WINDOW` seconds that put a plugin in ``error`` (default)."""

FAILURE_WINDOW = 60.0
"""Seconds over which failures are counted for auto-disable."""

AUDIT_WINDOW = 60.0
"""Seconds during which repeated failure rows of one plugin, hook and outcome are only counted."""


class PluginCodeError(ElowenError):
    """A plugin's lifecycle or contribution hook failed in a way that is not an ``Exception``
    (``SystemExit``, ``KeyboardInterrupt``, …), or did not return within its deadline."""


def _safe_repr(value: Any, limit: int = 200) -> str:
    try:
        return repr(value)[:limit]
    except BaseException as exc:  # untrusted: repr() may raise anything
        if is_cancellation(exc):
            raise
        return f"<unrepresentable {type(value).__name__}: repr raised {type(exc).__name__}>"


def _redact_host_args(value: Any) -> Any:
    """``value`` with the values of its ``_``-prefixed keys (the host's tool arguments, such as
    the ``_caller`` stamp plugins sign) replaced by ``"…"`` when it is a dict."""
    if isinstance(value, dict) and any(isinstance(k, str) and k.startswith("_") for k in value):
        return {k: ("…" if isinstance(k, str) and k.startswith("_") else v) for k, v in value.items()}
    return value


@dataclass(slots=True)
class _Impl:
    plugin: str
    hook: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    is_async: bool
    ctx: Any


def _in_thread(impl: _Impl) -> _Impl:
    """``impl`` (sync) as an async implementation that runs it in a worker thread; when the
    hook timeout cancels the wait, the thread is abandoned (it runs on, its result ignored)."""
    fn = impl.function

    async def threaded(*args: Any) -> Any:
        return await trio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=True)

    return replace(impl, function=threaded, is_async=True)


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
        max_failures: failures within ``failure_window`` seconds after which
            ``on_failure_limit(plugin, reason)`` is called (the kernel puts the plugin in
            ``error``); ``None`` or 0 turns auto-disable off.
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        *,
        audit: AuditFn,
        timeout: float = DEFAULT_TIMEOUT,
        max_failures: int | None = MAX_FAILURES,
        on_failure_limit: Callable[[str, str], None] | None = None,
        failure_window: float = FAILURE_WINDOW,
    ) -> None:
        self._pm = pm
        self._audit = audit
        self.timeout = timeout
        self.max_failures = max_failures
        self._on_failure_limit = on_failure_limit
        self._observational: dict[str, tuple[tuple[_Impl, ...], tuple[_Impl, ...]]] = {}
        self._mutating: dict[str, tuple[_Impl, ...]] = {}
        self._lanes: dict[str, PluginLane] = {}
        self._failures: dict[str, deque[float]] = {}
        self.failure_window = failure_window
        self._audit_gate: dict[tuple[str, str, str], list[float]] = {}  # key -> [window start, suppressed]

    # ------------------------------------------------------------------ tables

    def rebuild(self, contexts: Mapping[str, Any], threaded: Collection[str] = ()) -> None:
        """Recompute the dispatch tables for the plugins in ``contexts`` (name → context).

        Plugins registered in pluggy but absent from ``contexts`` (being disabled) get no new
        dispatches. The sync observational implementations of the plugins in ``threaded`` (the
        third-party ones) run in a worker thread through the plugin's lane, under the hook
        timeout like async ones: a sync hook that is slow but returns cannot hold the trio
        thread (to touch trio objects from it, use ``trio.from_thread``).
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
                impls = [_in_thread(i) if i.plugin in threaded and not i.is_async else i for i in impls]
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
        # an argument the caller did not give is None (pluggy's rule), never a KeyError
        return tuple(impl.ctx if a == "ctx" else kwargs.get(a) for a in impl.argnames)

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
                        except BaseException as exc:  # fail-open: never reaches other plugins
                            if is_cancellation(exc):
                                raise
                            self._failed(impl, "error", _describe(exc), exc)
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
        self._run_sync(sync, kwargs)
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

    def _run_sync(self, impls: tuple[_Impl, ...], kwargs: Mapping[str, Any]) -> None:
        for impl in impls:
            t0 = time.perf_counter()
            try:
                impl.function(*[impl.ctx if a == "ctx" else kwargs.get(a) for a in impl.argnames])
            except BaseException as exc:
                if is_cancellation(exc):
                    raise
                self._failed(impl, "error", _describe(exc), exc)
                continue
            took = time.perf_counter() - t0
            if took > SLOW_SYNC:
                message = f"sync implementation held the event loop for {took * 1000:.0f} ms"
                if took > self.timeout:
                    self._failed(impl, "slow", message)
                else:
                    log.warning("plugin %s: hook %s slow: %s", impl.plugin, impl.hook, message)
                    self._audit_limited(impl, "slow", {"message": message, "ms": round(took * 1000)})

    async def broadcast(self, hook: str, /, **kwargs: Any) -> None:
        """Call every enabled implementation of the observational ``hook`` and wait until all
        have run: sync ones inline, async ones concurrently in the caller's task, each under the
        hook timeout. Fail-open like :meth:`emit` (errors and timeouts are logged, audited and
        skipped; never raises). The registry announces services with it (``on_service``), so
        consumers have reacted before a provider goes away."""
        entry = self._observational.get(hook)
        if entry is None:
            return
        sync, async_ = entry
        self._run_sync(sync, kwargs)
        if async_:
            async with trio.open_nursery() as nursery:
                for impl in async_:
                    nursery.start_soon(self._call_async, impl, self._args(impl, kwargs))

    async def broadcast_to(self, plugin: str, hook: str, /, **kwargs: Any) -> None:
        """:meth:`broadcast` to the implementations of ``plugin`` only (the registry replays
        the services already available to a plugin that was just enabled)."""
        entry = self._observational.get(hook)
        if entry is None:
            return
        sync, async_ = entry
        self._run_sync(tuple(i for i in sync if i.plugin == plugin), kwargs)
        mine = [i for i in async_ if i.plugin == plugin]
        if mine:
            async with trio.open_nursery() as nursery:
                for impl in mine:
                    nursery.start_soon(self._call_async, impl, self._args(impl, kwargs))

    async def _call_async(self, impl: _Impl, args: tuple[Any, ...]) -> None:
        try:
            with trio.fail_after(self.timeout):
                await impl.function(*args)
        except trio.TooSlowError:
            self._failed(impl, "timeout", f"took longer than {self.timeout:g}s")
        except BaseException as exc:  # fail-open
            if is_cancellation(exc):
                raise
            self._failed(impl, "error", _describe(exc), exc)

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
            except BaseException as exc:
                if is_cancellation(exc):
                    raise
                self._failed(impl, "error", _describe(exc), exc)
                continue
            if result is None:
                continue
            try:  # the return value is untrusted: whatever it does, the turn goes on
                for patch in list(result) if isinstance(result, (list, tuple)) else (result,):
                    obj = self._apply(impl, target, fld, obj, patch)
            except BaseException as exc:
                if is_cancellation(exc):
                    raise
                self._failed(impl, "invalid", f"bad return value: {_describe(exc)}", exc)
        return obj

    def _apply(self, impl: _Impl, target: str, fld: str, obj: Any, patch: Any) -> Any:
        action = f"hook.mutate:{target}"
        if type(patch) is not Patch or not isinstance(patch.target, str) or patch.target != target:
            self._audit(impl.plugin, action, impl.hook, "invalid", {"patch": _safe_repr(patch)})
            return obj
        if not impl.ctx.has(action):
            log.warning("plugin %s: patch for %s denied (capability %s not declared/granted)", impl.plugin, impl.hook, action)
            self._audit(impl.plugin, action, impl.hook, "denied", {"op": str(patch.op)[:50], "value": _safe_repr(patch.value)})
            return obj
        try:
            new = replace(obj, **{fld: apply_patch(getattr(obj, fld), patch)})
        except Exception as exc:
            self._audit(impl.plugin, action, impl.hook, "invalid", {"error": _describe(exc)[:500]})
            return obj
        # turn context may be a user's private text (recalled memories): audit its size only;
        # a tool call's host arguments (``_caller`` stamps, signed per plugin enable): names only
        value = {"chars": len(str(patch.value))} if target == "turn_context" else _safe_repr(_redact_host_args(patch.value))
        self._audit(impl.plugin, action, impl.hook, "applied", {"op": str(patch.op)[:50], "value": value})
        return new

    # ------------------------------------------------------------------ single plugin

    async def call_plugin(self, plugin: str, hook: str, ctx: Any, /, timeout: float | None = None, threaded: bool = False, **kwargs: Any) -> list[Any]:
        """Call ``hook`` on ``plugin`` only (lifecycle and contribution hooks); failures
        propagate to the caller (the registry turns them into the plugin's ``error`` state).

        ``threaded``: a sync implementation runs in a worker thread, so that blocking code
        cannot hold the trio thread; past ``timeout`` the call is abandoned (the thread runs on,
        its result is ignored).

        Raises:
            PluginCodeError: the implementation did not return within ``timeout`` seconds, or
                raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``, …).
            Exception: whatever the implementation raised.
        """
        results = []
        limit = timeout if timeout is not None else math.inf
        for impl in self._impls(hook, {plugin: ctx}, only=plugin):
            args = self._args(impl, kwargs)
            try:
                with trio.fail_after(limit):
                    if threaded and not impl.is_async:
                        result = await trio.to_thread.run_sync(functools.partial(impl.function, *args), abandon_on_cancel=True)
                    else:
                        result = impl.function(*args)
                    if inspect.isawaitable(result):
                        result = await result
            except trio.TooSlowError:
                raise PluginCodeError(f"{hook} did not return within {limit:g} s") from None
            except Exception:
                raise
            except BaseException as exc:
                if is_cancellation(exc):
                    raise
                raise PluginCodeError(f"{hook} raised {type(exc).__name__}: {_safe_repr(exc, 300)}") from exc
            results.append(result)
        return results

    # ------------------------------------------------------------------ failures

    def _succeeded(self, plugin: str) -> None:
        """Kept for callers; failures are counted over a time window, not reset by a success."""

    def _audit_limited(self, impl: _Impl, outcome: str, detail: dict[str, Any]) -> bool:
        """Write a failure row unless one of the same plugin, hook and outcome was written in
        the last :data:`AUDIT_WINDOW` seconds (then it is only counted); returns whether written."""
        key = (impl.plugin, impl.hook, outcome)
        now = time.monotonic()
        gate = self._audit_gate.get(key)
        if gate is not None and now - gate[0] < AUDIT_WINDOW:
            gate[1] += 1
            return False
        if gate is not None and gate[1]:
            detail = {**detail, "suppressed": int(gate[1])}
        self._audit_gate[key] = [now, 0]
        self._audit(impl.plugin, f"hook.{impl.hook}", impl.hook, outcome, detail)
        return True

    def _failed(self, impl: _Impl, outcome: str, message: str, exc: BaseException | None = None) -> None:
        if self._audit_limited(impl, outcome, {"message": message[:500]}):
            log.warning("plugin %s: hook %s %s: %s", impl.plugin, impl.hook, outcome, message, exc_info=exc)
        now = time.monotonic()
        times = self._failures.setdefault(impl.plugin, deque())
        times.append(now)
        while times and now - times[0] > self.failure_window:
            times.popleft()
        if self.max_failures and len(times) == self.max_failures and self._on_failure_limit:
            self._on_failure_limit(
                impl.plugin,
                f"{len(times)} hook failures within {self.failure_window:g} s (last: {impl.hook} {outcome}: {message})",
            )

    def suppressed(self, plugin: str, hook: str, outcome: str) -> int:
        """Failure rows of ``plugin``'s ``hook`` with ``outcome`` counted but not written since
        the last one was."""
        gate = self._audit_gate.get((plugin, hook, outcome))
        return int(gate[1]) if gate else 0

    def failures(self, plugin: str) -> int:
        """Failures of ``plugin`` within the last ``failure_window`` seconds."""
        times = self._failures.get(plugin)
        if not times:
            return 0
        now = time.monotonic()
        return sum(1 for t in times if now - t <= self.failure_window)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_safe_repr(exc, 500) if not _str_safe(exc) else str(exc)}"


def _str_safe(exc: BaseException) -> bool:
    """Whether ``str(exc)`` works (a plugin's exception may break it)."""
    try:
        str(exc)
    except BaseException as err:
        if is_cancellation(err):
            raise
        return False
    return True


def iter_hook_names(kind: str) -> Iterable[str]:
    """Names of the hooks of ``kind`` (``lifecycle``, ``contribution``, ``observational``,
    ``mutating``)."""
    return (h for h, k in HOOK_KINDS.items() if k == kind)

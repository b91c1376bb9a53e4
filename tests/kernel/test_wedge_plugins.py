"""Plugin code cannot freeze or kill the kernel: a sync ``on_load`` that blocks runs off the
trio thread and ends in ``error`` at its deadline; ``BaseException`` from hooks stays at the
plugin boundary; slow sync hooks are audited ``slow``; untrusted return values are dropped;
failure rows are rate-limited; auto-disable is on and survives a restart; safe mode holds off
plugins that failed last time (real kernel, real SQLite file)."""

from __future__ import annotations

import json
import threading
import time
import tomllib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import tomli_w
import trio

from elowen.core import reconciler
from elowen.core.kernel import Kernel
from elowen.core.registry import PluginSource
from elowen_sdk import hookimpl, parse_manifest


def faulty(name: str, **hooks: Callable[..., Any]) -> PluginSource:
    """A third-party plugin whose hook implementations are ``hooks`` (name → function)."""
    raw = {
        "name": name,
        "version": "1.0.0",
        "api": "1",
        "entry": f"wedge_{name}",
        "capabilities": {"required": [], "optional": []},
        "contributes": {"hooks": sorted(hooks)},
    }
    manifest = parse_manifest(tomllib.loads(tomli_w.dumps(raw)), Path(f"/nonexistent/{name}/elowen-plugin.toml"))
    module = ModuleType(f"wedge_{name}")
    for hook, fn in hooks.items():
        fn.__name__ = hook
        setattr(module, hook, hookimpl(fn))
    return PluginSource(name=name, entry=f"wedge_{name}", loader=lambda: module, distribution="wedge-tests", dist_version="1.0.0", manifest=manifest)


@pytest.fixture
def kernel_at(tmp_path: Path) -> Callable[..., Any]:
    @asynccontextmanager
    async def factory(*sources: PluginSource, **kwargs: Any) -> AsyncIterator[Kernel]:
        async with Kernel.open(tmp_path / "home", db_path=tmp_path / "elowen.db", discover_entry_points=False, sources=list(sources), **kwargs) as kernel:
            yield kernel

    return factory


def audit(k: Kernel, actor: str) -> list[dict[str, Any]]:
    k.store.flush_audit()
    return k.store.query("SELECT * FROM audit WHERE actor = ? ORDER BY id", (actor,))


async def wait_state(k: Kernel, name: str, state: str, timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while k.registry.get(name).state != state:
            await trio.sleep(0.01)


async def test_blocking_sync_on_load_ends_in_error_and_the_loop_keeps_running(kernel_at, monkeypatch) -> None:
    monkeypatch.setattr(reconciler, "ON_LOAD_TIMEOUT", 0.5)

    def on_load(ctx: Any) -> None:
        time.sleep(2.0)

    async with kernel_at(faulty("sleeper", on_load=on_load)) as k:
        gaps: list[float] = []

        async def ticker() -> None:
            last = trio.current_time()
            while True:
                await trio.sleep(0.02)
                now = trio.current_time()
                gaps.append(now - last)
                last = now

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            await trio.sleep(0.05)
            t0 = time.monotonic()
            await k.registry.enable("sleeper")
            took = time.monotonic() - t0
            nursery.cancel_scope.cancel()
        rec = k.registry.get("sleeper")
        assert rec.state == "error", rec.state
        assert "did not return within 0.5 s" in (rec.error or "")
        assert took < 1.5
        assert max(gaps) < 0.3, f"the trio thread was held for {max(gaps):.2f} s"


async def test_sync_on_load_in_a_thread_can_still_start_work_and_publish(kernel_at) -> None:
    started = trio.Event()

    async def work() -> None:
        started.set()

    def on_load(ctx: Any) -> None:
        ctx.start_soon(work)

    async with kernel_at(faulty("starter", on_load=on_load)) as k:
        await k.registry.enable("starter")
        assert k.registry.get("starter").state == "enabled"
        with trio.fail_after(2):
            await started.wait()


async def test_base_exceptions_from_hooks_stay_at_the_plugin_boundary(kernel_at) -> None:
    async def on_event_async(ctx: Any, event: Any) -> None:
        raise SystemExit(3)

    def on_load(ctx: Any) -> None:
        raise KeyboardInterrupt

    async with kernel_at(faulty("exiter", on_event=on_event_async), faulty("interrupter", on_load=on_load)) as k:
        await k.registry.enable("exiter")
        await k.registry.enable("interrupter")
        assert k.registry.get("interrupter").state == "error"
        assert "KeyboardInterrupt" in (k.registry.get("interrupter").error or "")
        k.events.publish("test.ping", {})
        with trio.fail_after(3):
            while not [r for r in audit(k, "exiter") if r["outcome"] == "error"]:
                await trio.sleep(0.02)
        row = [r for r in audit(k, "exiter") if r["outcome"] == "error"][0]
        assert "SystemExit" in json.loads(row["detail"])["message"]
        k.bus.emit("on_event")  # a missing argument: no KeyError
        await trio.sleep(0.05)
        assert k.registry.get("exiter").state == "enabled"  # the kernel and the plugin live on


async def test_slow_sync_hook_is_audited_slow(kernel_at) -> None:
    """A builtin's sync hook runs inline (trusted code); one that holds the loop is audited."""

    def on_event(ctx: Any, event: Any) -> None:
        time.sleep(0.15)

    source = faulty("slowpoke", on_event=on_event)
    source = PluginSource(name=source.name, entry=source.entry, loader=source.loader, distribution="elowen", dist_version="0.1.0", manifest=source.manifest)
    async with kernel_at(source) as k:
        assert k.registry.get("slowpoke").source.builtin
        await k.registry.enable("slowpoke")
        k.events.publish("test.ping", {})
        rows = [r for r in audit(k, "slowpoke") if r["outcome"] == "slow"]
        assert rows and json.loads(rows[0]["detail"])["ms"] >= 150


async def test_a_third_party_slow_sync_hook_runs_off_the_trio_thread(kernel_at) -> None:
    """A third party's sync hook that sleeps 0.4 s per event does not hold the loop (it runs in
    a worker thread through the plugin's lane); past the hook timeout it is a ``timeout``."""
    threads: list[bool] = []

    def on_event(ctx: Any, event: Any) -> None:
        threads.append(threading.current_thread() is threading.main_thread())
        time.sleep(0.4 if event.type == "test.ping" else 0)

    async with kernel_at(faulty("sleepy", on_event=on_event), hook_timeout=0.2) as k:
        await k.registry.enable("sleepy")
        ticks = 0
        t0 = trio.current_time()
        k.events.publish("test.ping", {})
        while trio.current_time() - t0 < 0.3:
            await trio.sleep(0.01)
            ticks += 1
        assert ticks >= 10, f"the trio loop ran only {ticks} times in 0.3 s: the hook held it"
        with trio.fail_after(5):
            while not [r for r in audit(k, "sleepy") if r["outcome"] == "timeout"]:
                await trio.sleep(0.02)
        assert threads and not any(threads)
        assert not [r for r in audit(k, "sleepy") if r["outcome"] == "slow"]


class Evil:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


async def test_a_return_value_whose_repr_raises_is_dropped_and_the_turn_goes_on(kernel_at) -> None:
    def turn_context(ctx: Any, turn: Any) -> Any:
        return Evil()

    async with kernel_at(faulty("evil", turn_context=turn_context)) as k:
        await k.registry.enable("evil")
        turn = object()
        assert await k.bus.mutate("turn_context", turn=turn) is turn
        rows = audit(k, "evil")
        assert [r["outcome"] for r in rows if r["action"] == "hook.mutate:turn_context"] == ["invalid"]
        assert "unrepresentable" in rows[-1]["detail"]


async def test_failure_rows_are_rate_limited_and_auto_disable_is_persisted(kernel_at) -> None:
    def on_event(ctx: Any, event: Any) -> None:
        raise ValueError("broken")

    async with kernel_at(faulty("flaky2", on_event=on_event)) as k:  # the default limit: on
        await k.registry.enable("flaky2")
        for i in range(8):  # with the plugin.enabled event: 9 failures
            k.events.publish("test.ping", {"i": i})
        with trio.fail_after(5):  # a third party's sync hooks run in worker threads
            while k.bus.failures("flaky2") < 9:
                await trio.sleep(0.01)
        rows = [r for r in audit(k, "flaky2") if r["action"] == "hook.on_event"]
        assert k.bus.failures("flaky2") == 9 and k.registry.get("flaky2").state == "enabled"
        assert len(rows) == 1 and k.bus.suppressed("flaky2", "on_event", "error") == 8
        k.events.publish("test.ping", {"i": 9})  # the 10th failure in a minute
        await wait_state(k, "flaky2", "error")
        reason = k.registry.get("flaky2").error
        assert "10 hook failures within 60 s" in (reason or "")
    async with kernel_at(faulty("flaky2", on_event=on_event)) as k:
        rec = k.registry.get("flaky2")
        assert rec.state == "error" and "auto-disabled" in (rec.error or ""), (rec.state, rec.error)
        await k.registry.enable("flaky2")  # an explicit enable lifts it
        assert k.registry.get("flaky2").state == "enabled"


async def test_safe_mode_holds_off_plugins_that_failed_last_time(kernel_at) -> None:
    def on_load(ctx: Any) -> None:
        raise RuntimeError("cannot load")

    async with kernel_at(faulty("fragile", on_load=on_load)) as k:
        await k.registry.enable("fragile")
        assert k.registry.get("fragile").state == "error"
    async with kernel_at(faulty("fragile", on_load=on_load), safe=True) as k:
        rec = k.registry.get("fragile")
        assert rec.state == "error" and (rec.error or "").startswith("safe mode"), rec.error


def test_safe_mode_turns_itself_on_after_three_unclean_starts(tmp_path: Path) -> None:
    from elowen.core.quarantine import AUTO_SAFE_AFTER, Quarantine

    for _ in range(AUTO_SAFE_AFTER):  # starts that never reached a clean stop (kill -9, crash)
        assert Quarantine(tmp_path).begin_start() is False
    q = Quarantine(tmp_path)
    q.mark("hangs", "loading", "it was being enabled")
    assert q.begin_start() is True
    assert (q.held("hangs") or "").startswith("safe mode")
    q.clean_stop()
    again = Quarantine(tmp_path)
    assert again.begin_start() is False and again.held("hangs") is None  # loading marks cleared

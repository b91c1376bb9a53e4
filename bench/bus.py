"""Hook bus benchmark: cost of emits and mutating calls, against pluggy's own call.

Prints, per case, the mean cost per call in µs (best of 5 runs of N calls):
- observational emit with 0, 1 and 10 sync implementations;
- observational emit with 10 async implementations (queued to plugin workers; measured
  until every call has finished, so the figure includes running them);
- a mutating call with 10 implementations;
- pluggy's ``pm.hook.x()`` with 10 sync implementations, in the same run.

Run: ``.venv/bin/python bench/bus.py``
"""

from __future__ import annotations

import sys
import tempfile
import time
import types
from pathlib import Path

import pluggy
import trio

from elowen.core.kernel import Kernel
from elowen.core.registry import PluginSource
from elowen_sdk import Patch, TurnContext, hookimpl, hookspecs, parse_manifest

N = 20_000
ROUNDS = 5


def make_plugin(name: str, kind: str) -> PluginSource:
    mod = types.ModuleType(f"bench_{name}")
    if kind == "sync":

        def on_event(event):
            return None

        mod.on_event = hookimpl(on_event)
    elif kind == "async":

        async def on_event(event):
            return None

        mod.on_event = hookimpl(on_event)
    elif kind == "mutate":

        def turn_context(turn):
            return Patch("turn_context", "x")

        mod.turn_context = hookimpl(turn_context)
    caps = ["hook.mutate:turn_context"] if kind == "mutate" else []
    manifest = parse_manifest({"name": name, "version": "1.0.0", "api": "1", "entry": mod.__name__, "capabilities": {"required": caps}})
    return PluginSource(name=name, entry=mod.__name__, loader=lambda: mod, distribution="elowen", manifest=manifest)


def best(fn, n: int = N) -> float:
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - t0)
    return min(times) / n * 1e6


async def abest(fn, n: int = N) -> float:
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        await fn(n)
        times.append(time.perf_counter() - t0)
    return min(times) / n * 1e6


async def with_kernel(sources, body):
    with tempfile.TemporaryDirectory() as tmp:
        async with Kernel.open(Path(tmp), db_path=Path(tmp) / "db", discover_entry_points=False, sources=sources, watch_settings=False) as k:
            return await body(k)


async def main() -> dict[str, float]:
    results: dict[str, float] = {}

    async def emit_cost(k):
        emit = k.bus.emit
        ev = object()

        def loop(n):
            for _ in range(n):
                emit("on_event", event=ev)

        return best(loop)

    results["emit, 0 impls"] = await with_kernel([], emit_cost)
    results["emit, 1 sync impl"] = await with_kernel([make_plugin("s0", "sync")], emit_cost)
    results["emit, 10 sync impls"] = await with_kernel([make_plugin(f"s{i}", "sync") for i in range(10)], emit_cost)

    async def async_cost(k):
        emit = k.bus.emit
        ev = object()

        async def loop(n):
            batch = 500
            for _ in range(n // batch):
                for _ in range(batch):
                    emit("on_event", event=ev)
                while any(lane.in_flight for lane in k.bus._lanes.values()):
                    await trio.sleep(0)

        return await abest(loop, 10_000)

    results["emit, 10 async impls (incl. running them)"] = await with_kernel([make_plugin(f"a{i}", "async") for i in range(10)], async_cost)

    async def mutate_cost(k):
        turn = TurnContext("c", "u", "m")

        async def loop(n):
            for _ in range(n):
                await k.bus.mutate("turn_context", turn=turn)

        r = await abest(loop, 2_000)
        k.store.flush_audit()
        return r

    results["mutate, 10 impls (patch applied + audited)"] = await with_kernel([make_plugin(f"m{i}", "mutate") for i in range(10)], mutate_cost)

    pm = pluggy.PluginManager("elowen")
    pm.add_hookspecs(hookspecs)
    for i in range(10):
        mod = types.ModuleType(f"pluggy_{i}")
        mod.on_event = hookimpl(lambda event: None)
        pm.register(mod, name=f"p{i}")
    hook = pm.hook.on_event

    def pluggy_loop(n):
        for _ in range(n):
            hook(ctx=None, event=None)

    results["pluggy pm.hook.on_event(), 10 sync impls"] = best(pluggy_loop)
    return results


if __name__ == "__main__":
    res = trio.run(main)
    print(f"hook bus benchmark (python {sys.version.split()[0]}, best of {ROUNDS})")
    for name, us in res.items():
        print(f"  {name:<48} {us:8.2f} µs/call")
    ratio = res["emit, 10 sync impls"] / res["pluggy pm.hook.on_event(), 10 sync impls"]
    print(f"  ratio emit(10 sync) / pluggy(10 sync): {ratio:.2f}x (target <= 2x)")

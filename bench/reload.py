"""Hot-reload benchmark: time to enable and to disable a plugin in a running kernel, and 100
enable/disable toggles while hooks are emitted continuously.

Each toggle goes the full way a user's `elowen plugin enable/disable` does inside the daemon:
settings written atomically to config.toml (fsync), the reconciler applying it, contributions
registered/removed, loops started/cancelled, the plugin's async hook workers drained.

Run: ``.venv/bin/python bench/reload.py``
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import trio

from elowen.core.kernel import Kernel
from elowen.core.registry import PluginSource
from elowen_sdk import Loop, Tool, hookimpl, parse_manifest

TOGGLES = 100


def toggled_plugin() -> PluginSource:
    mod = types.ModuleType("bench_toggled")

    def register_tools(register):
        for i in range(10):
            register(Tool(name=f"toggled.tool{i}", description="t", handler=lambda i=i: i))

    def register_loops(register):
        register(Loop(name="toggled.loop", interval=0.05, fn=lambda: None))

    async def on_event(event):
        await trio.sleep(0)

    mod.register_tools = hookimpl(register_tools)
    mod.register_loops = hookimpl(register_loops)
    mod.on_event = hookimpl(on_event)
    manifest = parse_manifest(
        {
            "name": "toggled",
            "version": "1.0.0",
            "api": "1",
            "entry": mod.__name__,
            "contributes": {"tools": ["toggled.*"], "loops": ["toggled.loop"], "hooks": ["on_event"]},
        }
    )
    return PluginSource(name="toggled", entry=mod.__name__, loader=lambda: mod, distribution="bench", manifest=manifest)


def observer_plugin(counter: list[int]) -> PluginSource:
    mod = types.ModuleType("bench_observer")

    def on_event(event):
        counter[0] += 1

    mod.on_event = hookimpl(on_event)
    manifest = parse_manifest({"name": "observer", "version": "1.0.0", "api": "1", "entry": mod.__name__})
    return PluginSource(name="observer", entry=mod.__name__, loader=lambda: mod, distribution="bench", manifest=manifest)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


async def main() -> None:
    seen = [0]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        async with Kernel.open(home, db_path=home / "db", discover_entry_points=False, sources=[toggled_plugin(), observer_plugin(seen)]) as k:
            await k.registry.enable("observer")
            enable_ms, disable_ms = [], []
            emitted = failed = 0
            stop = trio.Event()

            async def emitter() -> None:
                nonlocal emitted, failed
                while not stop.is_set():
                    try:
                        k.events.publish("bench.tick", {"n": emitted})
                        emitted += 1
                    except Exception:
                        failed += 1
                    await trio.sleep(0.001)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(emitter)
                for _ in range(TOGGLES):
                    t0 = time.perf_counter()
                    info = await k.registry.enable("toggled")
                    enable_ms.append((time.perf_counter() - t0) * 1000)
                    assert info["state"] == "enabled", info
                    t0 = time.perf_counter()
                    await k.registry.disable("toggled")
                    disable_ms.append((time.perf_counter() - t0) * 1000)
                stop.set()
            k.store.flush_audit()
            hook_failures = k.store.query_one("SELECT count(*) AS n FROM audit WHERE action LIKE 'hook.%' AND outcome != 'ok'")["n"]

    print(f"hot-reload benchmark (python {sys.version.split()[0]}, {TOGGLES} toggles, config.toml written with fsync each time)")
    for label, vals in (("enable", enable_ms), ("disable", disable_ms)):
        print(f"  {label:<8} median {statistics.median(vals):6.2f} ms   p90 {pct(vals, 90):6.2f} ms   max {max(vals):6.2f} ms   (target <= 50 ms)")
    print(f"  emits during toggles: {emitted}, failed emits: {failed}, hook failures audited: {hook_failures}, observer saw {seen[0]} events")


if __name__ == "__main__":
    trio.run(main)

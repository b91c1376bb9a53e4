"""Cron benchmarks; prints its figures.

1. Fire jitter with ``--jobs`` (default 1,000) jobs due at the same instant: a real kernel with
   the ``cron``, ``brain`` and ``inference`` plugins, a real SQLite file, the ticker running at
   its default 1 s interval, and the scripted model server on 127.0.0.1 answering each turn at
   once. Reported: due → claimed (the ticker's pass) and due → conversation started (the run's
   ``started_at``: the owner's conversation exists and ``running`` is committed), p50/p99/max,
   with the default ``max_concurrent_runs`` (4) — so the later figures are the turn
   throughput, not the ticker.
2. The ticker's CPU with ``--idle`` (default 10,000) jobs not due: process CPU time over
   ``--seconds`` of wall time with the ticker at 1 s, minus the same with no jobs; and the cost
   of one pass (``tick``) over the idle store.

Run: ``.venv/bin/python bench/cron.py [--jobs N] [--idle N] [--seconds S]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elowen_builtins.cron.schedule import parse_schedule  # noqa: E402
from elowen_builtins.cron.store import iso, parse_iso  # noqa: E402
from elowen_sdk import utc_iso  # noqa: E402
from elowen_sdk.testing import plugin_kernel  # noqa: E402
from tests.support.model_server import ModelServer, Reply  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _insert_jobs(store: Any, owner: int, n: int, next_fire: datetime) -> None:
    spec = parse_schedule("every 1h", "UTC").to_json()
    now = utc_iso()
    rows = [
        (owner, "admin", f"job {i}", "say ok", "every 1h", "UTC", spec, "fake/test-model", "none", "skip", 10, "active", iso(next_fire), now, now)
        for i in range(n)
    ]
    with store.transaction():
        store.executemany(
            "INSERT INTO cron_jobs (owner_id, owner_role, name, prompt, schedule, tz, spec, model, deliver, catchup, catchup_cap, state, next_fire, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


async def _kernel(tmp: Path, server: ModelServer, **cron: Any) -> Any:
    return plugin_kernel(tmp, enable=["brain", "inference", "cron"], config={"cron": {"timezone": "UTC", "min_interval": 1, **cron}})


async def jitter(jobs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="elowen-bench-cron-") as tmp, ModelServer(lambda r: Reply(text="ok")) as server:
        async with await _kernel(Path(tmp), server) as kernel:
            kernel.settings.update(
                lambda d: d.setdefault("inference", {}).__setitem__(
                    "providers", {"fake": {"kind": "openai", "base_url": server.url + "/v1", "max_retries": 0, "timeout": 60}}
                )
            )
            owner = kernel.store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('admin', 'admin', '[\"*\"]', ?)", (utc_iso(),))
            due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
            _insert_jobs(kernel.store, owner, jobs, due)
            with trio.fail_after(3600):
                while True:
                    row = kernel.store.query_one("SELECT COUNT(*) AS n FROM cron_runs WHERE status IN ('ran', 'failed')")
                    if row and row["n"] >= jobs:
                        break
                    await trio.sleep(0.5)
            runs = kernel.store.query("SELECT scheduled_for, claimed_at, started_at, status FROM cron_runs")
    claimed = [(parse_iso(r["claimed_at"]) - parse_iso(r["scheduled_for"])).total_seconds() * 1000 for r in runs]
    started = [(parse_iso(r["started_at"]) - parse_iso(r["scheduled_for"])).total_seconds() * 1000 for r in runs if r["started_at"]]
    failed = sum(1 for r in runs if r["status"] != "ran")
    print(f"jitter, {jobs} jobs due at once (tick 1 s, 4 concurrent runs), {failed} failed:")
    print(f"  due -> claimed:              p50 {_pct(claimed, 0.5):8.0f} ms  p99 {_pct(claimed, 0.99):8.0f} ms  max {max(claimed):8.0f} ms")
    print(f"  due -> conversation started: p50 {_pct(started, 0.5):8.0f} ms  p99 {_pct(started, 0.99):8.0f} ms  max {max(started):8.0f} ms")


async def idle_cpu(idle: int, seconds: float) -> None:
    async def measure(n: int) -> tuple[float, float]:
        with tempfile.TemporaryDirectory(prefix="elowen-bench-cron-") as tmp, ModelServer(lambda r: Reply(text="ok")) as server:
            async with await _kernel(Path(tmp), server, tick_interval=1.0) as kernel:
                owner = kernel.store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('admin', 'admin', '[\"*\"]', ?)", (utc_iso(),))
                if n:
                    _insert_jobs(kernel.store, owner, n, datetime.now(UTC) + timedelta(days=1))
                from elowen_builtins.cron.plugin import _runtimes

                rt = _runtimes["cron"]
                passes = []
                for _ in range(50):
                    t = time.perf_counter()
                    rt.tick(datetime.now(UTC))
                    passes.append((time.perf_counter() - t) * 1000)
                await trio.sleep(1.0)
                cpu, wall = time.process_time(), time.monotonic()
                await trio.sleep(seconds)
                return (time.process_time() - cpu) / (time.monotonic() - wall) * 100, statistics.median(passes)

    base, base_pass = await measure(0)
    loaded, loaded_pass = await measure(idle)
    print(f"ticker with {idle} idle jobs: one pass {loaded_pass:.3f} ms (empty store {base_pass:.3f} ms)")
    print(f"  process CPU {loaded:.2f} % vs {base:.2f} % with no jobs: the ticker adds {max(0.0, loaded - base):.2f} % of one core")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    trio.run(idle_cpu, args.idle, args.seconds)
    trio.run(jitter, args.jobs)


if __name__ == "__main__":
    main()

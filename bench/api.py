"""REST benchmark: ``POST /tasks`` throughput and latency against a real daemon subprocess.

Prints requests/s and latency (median, p99, ms) for 1 and 16 concurrent keep-alive clients
(httpx on trio, in this process; the daemon runs in its own process), once with SQLite's
``synchronous=NORMAL`` (the default) and once with ``FULL``.

Run: ``.venv/bin/python bench/api.py [seconds-per-case]``
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import httpx
import trio
from _daemon import Daemon, running_daemon


async def run_case(d: Daemon, concurrency: int, seconds: float) -> tuple[float, list[float], int]:
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=d.url, headers={"Authorization": f"Bearer {d.token}"}, limits=limits) as c:

        async def worker(n: int) -> None:
            nonlocal errors
            i = 0
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                r = await c.post("/tasks", json={"title": f"bench {n}-{i}", "project_id": d.project_id, "labels": ["bench"]})
                latencies.append(time.perf_counter() - t0)
                errors += r.status_code != 201
                i += 1

        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n in range(concurrency):
                nursery.start_soon(worker, n)
        elapsed = time.perf_counter() - t0
    return len(latencies) / elapsed, latencies, errors


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(seconds: float) -> None:
    # both SQLite synchronous settings in one run (the daemon's default is NORMAL; see
    # docs/operations.md, "On a power loss")
    for mode in ("NORMAL", "FULL"):
        os.environ["ELOWEN_SQLITE_SYNCHRONOUS"] = mode
        with running_daemon() as d:
            print(f"POST /tasks against {d.url}, synchronous={mode} ({seconds:.0f} s per case)")
            for concurrency in (1, 16):
                rate, lat, errors = await run_case(d, concurrency, seconds)
                print(
                    f"  {concurrency:>2} clients: {rate:7.0f} requests/s   median {statistics.median(lat) * 1000:6.2f} ms"
                    f"   p99 {pct(lat, 0.99) * 1000:6.2f} ms   errors {errors}"
                )
    os.environ.pop("ELOWEN_SQLITE_SYNCHRONOUS", None)


if __name__ == "__main__":
    trio.run(main, float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)

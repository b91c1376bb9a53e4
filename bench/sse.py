"""SSE benchmark: publish→receive latency over ``GET /events`` at 1, 100 and 1,000 subscribers.

A real daemon subprocess; N subscribers (raw trio sockets in this process, so the client side
stays cheap) follow ``/events?types=task.progress``; one publisher posts
``POST /tasks/{id}/progress`` at a fixed rate, putting its send time in the text. Latency is
the time from just before the POST is sent to the subscriber reading the event (same clock),
so it includes the request's own handling.

Prints per case: median and p99 latency (ms), events/s delivered (over all subscribers) and
events lost (expected deliveries that never arrived). Targets: 0 lost; p99 ≤ 50 ms at 1,000
subscribers and 100 events/s.

Run: ``.venv/bin/python bench/sse.py [seconds-per-case] [events-per-second]``
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from urllib.parse import urlsplit

import httpx
import trio

from _daemon import Daemon, running_daemon

_EVENT = re.compile(rb'"text":"(\d+) ([0-9.]+)"')


class Subscriber:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.seen: set[int] = set()

    async def run(self, d: Daemon, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        parts = urlsplit(d.url)
        stream = await trio.open_tcp_stream(parts.hostname or "127.0.0.1", parts.port or 80)
        request = (
            "GET /events?types=task.progress HTTP/1.1\r\n"
            f"Host: {parts.netloc}\r\nAuthorization: Bearer {d.token}\r\nAccept: text/event-stream\r\n\r\n"
        )
        await stream.send_all(request.encode())
        buf = b""
        started = False
        async with stream:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                now = time.time()
                buf += data
                if not started and b": connected" in buf:
                    started = True
                    task_status.started()
                cut = buf.rfind(b"\n\n")
                if cut < 0:
                    continue
                for m in _EVENT.finditer(buf, 0, cut):
                    self.seen.add(int(m.group(1)))
                    self.latencies.append(now - float(m.group(2)))
                buf = buf[cut + 2 :]


async def run_case(d: Daemon, subscribers: int, rate: float, seconds: float, task_id: int) -> dict[str, float]:
    subs = [Subscriber() for _ in range(subscribers)]
    total = int(rate * seconds)
    async with trio.open_nursery() as nursery:
        for s in subs:
            await nursery.start(s.run, d)
        await trio.sleep(0.5)
        async with httpx.AsyncClient(base_url=d.url, headers={"Authorization": f"Bearer {d.token}"}) as c:
            t0 = time.perf_counter()
            for seq in range(total):
                await trio.sleep_until(trio.current_time() + max(0.0, t0 + seq / rate - time.perf_counter()))
                r = await c.post(f"/tasks/{task_id}/progress", json={"text": f"{seq} {time.time():.6f}"})
                r.raise_for_status()
        with trio.move_on_after(5):
            while any(len(s.seen) < total for s in subs):
                await trio.sleep(0.05)
        elapsed = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    lat = sorted(x for s in subs for x in s.latencies)
    delivered = sum(len(s.seen) for s in subs)
    return {
        "median_ms": statistics.median(lat) * 1000 if lat else float("nan"),
        "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000 if lat else float("nan"),
        "delivered_per_s": delivered / elapsed,
        "lost": subscribers * total - delivered,
    }


async def main(seconds: float, rate: float) -> None:
    with running_daemon() as d:
        r = httpx.post(f"{d.url}/tasks", json={"title": "bench", "project_id": d.project_id},
                       headers={"Authorization": f"Bearer {d.token}"})
        task_id = r.json()["id"]
        print(f"SSE publish→receive, {rate:.0f} events/s for {seconds:.0f} s per case")
        for n in (1, 100, 1_000):
            res = await run_case(d, n, rate, seconds, task_id)
            print(
                f"  {n:>5} subscribers: median {res['median_ms']:6.1f} ms   p99 {res['p99_ms']:6.1f} ms   "
                f"delivered {res['delivered_per_s']:8.0f} events/s   lost {res['lost']}"
            )


if __name__ == "__main__":
    trio.run(main, float(sys.argv[1]) if len(sys.argv) > 1 else 5.0, float(sys.argv[2]) if len(sys.argv) > 2 else 100.0)

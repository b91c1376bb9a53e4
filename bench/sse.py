"""SSE benchmark: publish→receive latency over ``GET /events`` at 1, 100 and 1,000 subscribers.

A real daemon subprocess; N subscribers (raw sockets read by one epoll loop in a reader process
of its own, so the client side stays cheap and off the daemon's core) follow ``/events?types=task.progress``; one publisher posts
``POST /tasks/{id}/progress`` at a fixed rate, putting its send time in the text. Latency is
the time from just before the POST is sent to the subscriber reading the event (same clock),
so it includes the request's own handling.

Prints per case: median and p99 latency (ms), events/s delivered (over all subscribers) and
events lost (expected deliveries that never arrived). Targets: 0 lost; p99 ≤ 50 ms at 1,000
subscribers and 100 events/s.

Run: ``.venv/bin/python bench/sse.py [seconds-per-case] [events-per-second] [subscriber counts, e.g. 1,100,1000]``
"""

from __future__ import annotations

import multiprocessing
import re
import selectors
import socket
import statistics
import sys
import time
from multiprocessing.connection import Connection
from urllib.parse import urlsplit

import httpx
import trio
from _daemon import Daemon, running_daemon

_EVENT = re.compile(rb'"text":"(\d+) ([0-9.]+)"')


def _reader(url: str, token: str, n: int, conn: Connection) -> None:
    """The subscribers: ``n`` raw sockets read by one epoll loop in a process of its own, so
    the client side costs one core at most and never competes with the daemon's event loop.
    Protocol on ``conn``: sends ``"ready"`` once every stream said ``: connected``; on
    ``"stop"`` sends back ``(latencies, seen-per-subscriber)`` and exits."""
    parts = urlsplit(url)
    request = (
        f"GET /events?types=task.progress HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    sel = selectors.DefaultSelector()
    bufs: list[bytes] = [b""] * n
    seen: list[set[int]] = [set() for _ in range(n)]
    latencies: list[float] = []
    connected = 0
    for i in range(n):
        sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80))
        sock.sendall(request)
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, i)
    ready_sent = False
    while True:
        if conn.poll():
            if conn.recv() == "stop":
                conn.send((latencies, [len(x) for x in seen]))
                return
        for key, _ in sel.select(timeout=0.01):
            i = key.data
            try:
                data = key.fileobj.recv(262144)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            now = time.time()
            if not data:
                sel.unregister(key.fileobj)
                continue
            buf = bufs[i] + data
            if b": connected" in buf and not bufs[i].startswith(b"!"):
                connected += 1
                buf = b"!" + buf  # marks the stream as connected
            cut = buf.rfind(b"\n\n")
            if cut < 0:
                bufs[i] = buf
                continue
            for m in _EVENT.finditer(buf, 0, cut):
                seen[i].add(int(m.group(1)))
                latencies.append(now - float(m.group(2)))
            bufs[i] = b"!" + buf[cut + 2 :]
        if not ready_sent and connected == n:
            conn.send("ready")
            ready_sent = True


async def run_case(d: Daemon, subscribers: int, rate: float, seconds: float, task_id: int) -> dict[str, float]:
    ours, theirs = multiprocessing.Pipe()
    reader = multiprocessing.Process(target=_reader, args=(d.url, d.token, subscribers, theirs), daemon=True)
    reader.start()
    try:
        await trio.to_thread.run_sync(ours.recv)  # "ready"
        await trio.sleep(0.5)
        total = int(rate * seconds)
        async with httpx.AsyncClient(base_url=d.url, headers={"Authorization": f"Bearer {d.token}"}) as c:
            t0 = time.perf_counter()
            for seq in range(total):
                await trio.sleep_until(trio.current_time() + max(0.0, t0 + seq / rate - time.perf_counter()))
                r = await c.post(f"/tasks/{task_id}/progress", json={"text": f"{seq} {time.time():.6f}"})
                r.raise_for_status()
        await trio.sleep(3)  # stragglers
        elapsed = time.perf_counter() - t0
        ours.send("stop")
        lat, seen = await trio.to_thread.run_sync(ours.recv)
    finally:
        reader.join(10)
        if reader.is_alive():
            reader.kill()
    lat.sort()
    delivered = sum(seen)
    return {
        "median_ms": statistics.median(lat) * 1000 if lat else float("nan"),
        "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000 if lat else float("nan"),
        "delivered_per_s": delivered / (elapsed - 3),
        "lost": subscribers * total - delivered,
    }


async def main(seconds: float, rate: float, counts: tuple[int, ...] = (1, 100, 1_000)) -> None:
    with running_daemon() as d:
        r = httpx.post(f"{d.url}/tasks", json={"title": "bench", "project_id": d.project_id}, headers={"Authorization": f"Bearer {d.token}"})
        task_id = r.json()["id"]
        print(f"SSE publish→receive, {rate:.0f} events/s for {seconds:.0f} s per case")
        for n in counts:
            res = await run_case(d, n, rate, seconds, task_id)
            print(
                f"  {n:>5} subscribers: median {res['median_ms']:6.1f} ms   p99 {res['p99_ms']:6.1f} ms   "
                f"delivered {res['delivered_per_s']:8.0f} events/s   lost {res['lost']}"
            )


if __name__ == "__main__":
    trio.run(
        main,
        float(sys.argv[1]) if len(sys.argv) > 1 else 5.0,
        float(sys.argv[2]) if len(sys.argv) > 2 else 100.0,
        tuple(int(n) for n in sys.argv[3].split(",")) if len(sys.argv) > 3 else (1, 100, 1_000),
    )

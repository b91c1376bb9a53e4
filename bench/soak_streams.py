"""Soak rows for the event stream (run by ``bench/soak.py``): SSE replay across daemon restarts,
and slow subscribers (memory stays bounded, each is dropped and resumes with Last-Event-ID).

An SSE client here is a plain thread with ``httpx`` that reconnects with the last ``id:`` it saw
(the WHATWG EventSource rule, HTML Living Standard §9.2), so what it received can be compared
with the daemon's durable ``events`` table afterwards.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from elowen.core.store import Store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (``VmRSS`` of ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Reader(threading.Thread):
    """An SSE subscriber of ``/events`` that reconnects with ``Last-Event-ID``; ``delay`` seconds
    of sleep after each line make it a slow reader."""

    def __init__(self, url: str, token: str, *, delay: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.url, self.token, self.delay = url, token, delay
        self.ids: list[int] = []
        self.connects = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            headers = {"Authorization": f"Bearer {self.token}"}
            if self.ids:
                headers["Last-Event-ID"] = str(self.ids[-1])
            try:
                with httpx.stream("GET", f"{self.url}/events", headers=headers, timeout=httpx.Timeout(5, read=30)) as r:
                    if r.status_code != 200:
                        time.sleep(0.2)
                        continue
                    self.connects += 1
                    for line in r.iter_lines():
                        if self.stop.is_set():
                            return
                        if line.startswith("id: "):
                            self.ids.append(int(line[4:]))
                        if self.delay:
                            time.sleep(self.delay)
            except (httpx.HTTPError, OSError):
                time.sleep(0.2)

    def check(self, db: Path) -> dict[str, int]:
        store = Store(db)
        try:
            stored = [int(r["id"]) for r in store.query("SELECT id FROM events ORDER BY id")]
        finally:
            store.close()
        return {
            "stored": len(stored),
            "missing": len(set(stored) - set(self.ids)),
            "duplicate": len(self.ids) - len(set(self.ids)),
            "out of order": sum(1 for a, b in zip(self.ids, self.ids[1:]) if b <= a),
        }


def wait_caught_up(reader: Reader, db: Path, timeout: float = 60) -> None:
    store = Store(db)
    try:
        newest = int(store.query_one("SELECT max(id) AS m FROM events")["m"] or 0)
    finally:
        store.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (not reader.ids or reader.ids[-1] < newest):
        time.sleep(0.1)


def replay_across_restarts(tmp: Path, restarts: int, proc: Any) -> dict[str, object]:
    """``restarts`` SIGTERM restarts of one home on one port, 50 tasks created per life, one
    SSE reader throughout: every stored event received once, in order."""
    home, port = tmp / "replay", free_port()
    (tmp / "proj-replay").mkdir(exist_ok=True)
    d = proc(home, port=port)
    reader = Reader(d.url, d.token)
    reader.start()
    project = None
    acked = 0
    stops: list[float] = []
    for life in range(restarts + 1):
        if life:
            d = proc(home, port=port)
        with d.client() as c:
            if project is None:
                project = c.post("/projects", json={"name": "p", "path": str(tmp / "proj-replay")}).json()["id"]
            for _ in range(50):
                if c.post("/tasks", json={"title": f"life {life}", "project_id": project}).status_code == 201:
                    acked += 1
        wait_caught_up(reader, home / "elowen.db", timeout=20)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        d.proc.wait(30)
        stops.append(time.monotonic() - t0)
    d = proc(home, port=port)  # one more life so the reader can drain what it missed
    wait_caught_up(reader, home / "elowen.db")
    reader.stop.set()
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait(30)
    result = reader.check(home / "elowen.db")
    return {
        "experiment": f"SSE replay across {restarts} restarts",
        "acknowledged": acked,
        "lost": result["missing"],
        **result,
        "reconnects": reader.connects,
        "max stop s": round(max(stops), 2),
    }


def slow_subscribers(tmp: Path, readers: int, proc: Any) -> dict[str, object]:
    """``readers`` subscribers that read one line per 20 ms while 300 large task events are
    published: the daemon's memory stays bounded, the slow ones are dropped and resume with
    ``Last-Event-ID``, and each ends with every event exactly once."""
    home = tmp / "slow"
    (tmp / "proj-slow").mkdir(exist_ok=True)
    d = proc(home, env={"ELOWEN_SEND_TIMEOUT": "2"})
    before = rss_mb(d.proc.pid)
    subs = [Reader(d.url, d.token, delay=0.02) for _ in range(readers)]
    for s in subs:
        s.start()
    time.sleep(1)
    peak = before
    with d.client() as c:
        pid = c.post("/projects", json={"name": "p", "path": str(tmp / "proj-slow")}).json()["id"]
        for i in range(300):
            c.post("/tasks", json={"title": f"slow {i}", "project_id": pid, "description": "y" * 20_000})
            if i % 20 == 0:
                peak = max(peak, rss_mb(d.proc.pid))
    deadline = time.monotonic() + 240
    for s in subs:
        wait_caught_up(s, home / "elowen.db", timeout=max(1.0, deadline - time.monotonic()))
        peak = max(peak, rss_mb(d.proc.pid))
    for s in subs:
        s.stop.set()
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait(30)
    stop_s = time.monotonic() - t0
    checks = [s.check(home / "elowen.db") for s in subs]
    return {
        "experiment": f"{readers} slow /events readers",
        "acknowledged": checks[0]["stored"],
        "lost": sum(c["missing"] for c in checks),
        "duplicate": sum(c["duplicate"] for c in checks),
        "out of order": sum(c["out of order"] for c in checks),
        "reconnects": sum(s.connects for s in subs) - readers,
        "RSS MB": f"{before:.0f} -> {peak:.0f}",
        "stop s": round(stop_s, 2),
    }

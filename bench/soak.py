"""Soak the daemon (not in CI: it runs for minutes): kill -9 rounds under concurrent writers with
an audit check, SSE replay across restarts, stuck and slow event-stream readers (memory and the
shutdown time), 1,000+ idle connections, fault-injecting third-party plugins, a full disk.

    python bench/soak.py [--rounds 10] [--writers 4] [--idle 1100] [--restarts 5]

The fault-injecting plugins are a real distribution (a ``.dist-info`` with entry points, on the
daemon's ``PYTHONPATH``) whose hooks raise, hang, raise ``SystemExit``, block synchronously in
``on_load`` and in ``on_event``, and return values whose ``repr()`` raises. The full disk is a
real 20 MiB tmpfs mounted as the daemon's home (needs root; the row says so when it cannot run).

Prints one row per experiment: what was acknowledged, what was lost (must be 0), and times.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import soak_faults
import soak_streams

from elowen.core.store import Store


class Proc:
    def __init__(self, home: Path, env: dict[str, str] | None = None, *, port: int = 0, plugins: bool = False) -> None:
        self.home = home
        full = {**os.environ, "ELOWEN_LOG_LEVEL": "WARNING", **(env or {})}
        full.pop("ELOWEN_DB", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "elowen.daemon", "--home", str(home), "--port", str(port), *([] if plugins else ["--no-plugins"])],
            env=full,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                info = json.loads((home / "daemon.pid").read_text())
                if info.get("pid") == self.proc.pid:
                    self.url = f"http://127.0.0.1:{info['port']}"
                    self.port = int(info["port"])
                    if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                        break
            except (OSError, ValueError, httpx.HTTPError):
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError("the daemon did not start")
        self.token = (home / "admin.token").read_text().strip()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10)


def kill9_rounds(tmp: Path, rounds: int, writers: int) -> dict[str, object]:
    home = tmp / "kill9"
    (tmp / "proj").mkdir(exist_ok=True)
    acked: list[int] = []
    lock = threading.Lock()
    project = None
    for _ in range(rounds):
        d = Proc(home)
        if project is None:
            project = d.client().post("/projects", json={"name": "p", "path": str(tmp / "proj")}).json()["id"]
        stop = threading.Event()

        def write(d: Proc = d, stop: threading.Event = stop, project: int = project) -> None:
            with d.client() as c:
                while not stop.is_set():
                    try:
                        r = c.post("/tasks", json={"title": "soak", "project_id": project})
                    except httpx.HTTPError:
                        return
                    if r.status_code == 201:
                        with lock:
                            acked.append(r.json()["id"])

        threads = [threading.Thread(target=write) for _ in range(writers)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        stop.set()
        for t in threads:
            t.join()
    store = Store(home / "elowen.db")
    try:
        tasks = {r["id"] for r in store.query("SELECT id FROM tasks")}
        events = {json.loads(r["data"])["id"] for r in store.query("SELECT data FROM events WHERE type = 'task.created'")}
        audit = {int(r["target"].split(":")[1]) for r in store.query("SELECT target FROM audit WHERE action = 'task.create'")}
        ok = store.integrity_check()
    finally:
        store.close()
    lost_tasks = len(set(acked) - tasks)
    return {
        "experiment": f"kill -9 x{rounds}, {writers} writers",
        "acknowledged": len(acked),
        "lost": lost_tasks,
        "lost events": len(set(acked) - events),
        "lost audit": len(set(acked) - audit),
        "integrity": ok,
    }


def stuck_readers(tmp: Path, readers: int) -> dict[str, object]:
    d = Proc(tmp / "stuck", env={"ELOWEN_SEND_TIMEOUT": "2"})
    (tmp / "proj2").mkdir(exist_ok=True)
    socks = []
    for _ in range(readers):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.connect(("127.0.0.1", d.port))
        s.sendall(f"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {d.token}\r\n\r\n".encode())
        socks.append(s)
    with d.client() as c:
        pid = c.post("/projects", json={"name": "p", "path": str(tmp / "proj2")}).json()["id"]
        t0 = time.monotonic()
        for _ in range(100):
            c.post("/tasks", json={"title": "x", "project_id": pid, "description": "y" * 50_000})
        write_s = time.monotonic() - t0
        health = c.get("/health").status_code
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    code = d.proc.wait(30)
    stop_s = time.monotonic() - t0
    for s in socks:
        s.close()
    return {
        "experiment": f"{readers} stuck /events readers",
        "acknowledged": 100,
        "lost": 0,
        "health": health,
        "100 writes s": round(write_s, 2),
        "stop s": round(stop_s, 2),
        "exit": code,
    }


def idle_connections(tmp: Path, n: int) -> dict[str, object]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 500)), hard))
    d = Proc(tmp / "idle", env={"ELOWEN_KEEPALIVE_TIMEOUT": "60"})
    socks = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(n)]
    time.sleep(1)
    took = []
    for _ in range(20):  # a new connection each time (each evicts an idle one when at the cap)
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", d.port), timeout=20) as c:
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := c.recv(65536):
                answer += chunk
        took.append(time.monotonic() - t0)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    for s in socks:
        s.close()
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait(30)
    return {
        "experiment": f"{n} idle connections",
        "acknowledged": 20,
        "lost": 0,
        "/health median ms": round(sorted(took)[10] * 1000, 1),
        "stop s": round(time.monotonic() - t0, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--idle", type=int, default=1100)
    p.add_argument("--restarts", type=int, default=5)
    p.add_argument("--only", default="", help="comma-separated rows: kill9,replay,stuck,slow,idle,faults,disk (default: all)")
    args = p.parse_args()
    rows = {
        "kill9": lambda t: kill9_rounds(t, args.rounds, args.writers),
        "replay": lambda t: soak_streams.replay_across_restarts(t, args.restarts, Proc),
        "stuck": lambda t: stuck_readers(t, 20),
        "slow": lambda t: soak_streams.slow_subscribers(t, 10, Proc),
        "idle": lambda t: idle_connections(t, args.idle),
        "faults": lambda t: soak_faults.faulty_plugins(t, Proc),
        "disk": lambda t: soak_faults.full_disk(t, Proc),
    }
    chosen = [r for r in args.only.split(",") if r] or list(rows)
    unknown = set(chosen) - set(rows)
    if unknown:
        p.error(f"unknown rows: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="elowen-soak-") as tmp:
        for name in chosen:
            row = rows[name](Path(tmp))
            print(" | ".join(f"{k}: {v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()

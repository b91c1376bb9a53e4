"""Idle connections cannot exhaust the daemon: keep-alive connections close, the connection
cap evicts idle ones or refuses cleanly, and ``/health`` answers with 1,000+ idle clients
(real daemon processes, real sockets)."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .conftest import DaemonProc, start_daemon, wait_ready


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``sock`` (reading everything), or None."""
    sock.settimeout(seconds)
    t0 = time.monotonic()
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - t0


def test_connection_close_and_idle_keep_alive_are_closed(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home", "--no-plugins", env={"ELOWEN_KEEPALIVE_TIMEOUT": "1"})
    try:
        requests = {
            "http/1.0": b"GET /health HTTP/1.0\r\n\r\n",
            "connection: close": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            "keep-alive": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            "never sends": b"",
        }
        for name, request in requests.items():
            s = socket.create_connection(("127.0.0.1", d.port))
            if request:
                s.sendall(request)
            took = _closed_within(s, 5)
            s.close()
            assert took is not None, f"{name}: the daemon left the connection open"
            assert took < (0.5 if "close" in name or "1.0" in name else 3), (name, took)
    finally:
        d.stop()


def _spawn_limited(home: Path, nofile: int, env: dict[str, str]) -> DaemonProc:
    """The daemon under a hard open-files limit of ``nofile`` (the usual desktop 1,024)."""
    home.mkdir(parents=True)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    stderr = open(home.parent / f"{home.name}-stderr.txt", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "elowen.daemon", "--home", str(home), "--port", "0", "--no-plugins"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        preexec_fn=limit,
    )
    port = wait_ready(home, proc)
    token = (home / "admin.token").read_text().strip()
    return DaemonProc(home, proc, port, token, home.parent / f"{home.name}-stderr.txt")


def test_health_answers_with_1100_idle_connections_under_a_1024_file_limit(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2_500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4_096), hard))
    d = _spawn_limited(tmp_path / "home", 1_024, {"ELOWEN_KEEPALIVE_TIMEOUT": "60"})
    idle: list[socket.socket] = []
    try:
        for i in range(1_100):
            s = socket.create_connection(("127.0.0.1", d.port))
            if i % 10 == 0:  # some after a request (keep-alive), the others never sent anything
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            idle.append(s)
        time.sleep(2.0)
        took = []
        for _ in range(20):  # a new connection each time (each one evicts an idle one)
            t0 = time.monotonic()
            with socket.create_connection(("127.0.0.1", d.port), timeout=20) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
            took.append(time.monotonic() - t0)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        print(f"/health with 1,100 idle connections: median {sorted(took)[10] * 1000:.1f} ms, max {max(took) * 1000:.1f} ms")
        assert sorted(took)[10] < 0.25
        assert d.proc.poll() is None
        log = d.output()
        assert "EMFILE" not in log and "Too many open files" not in log, log[-2000:]
    finally:
        for s in idle:
            s.close()
        d.stop()


def test_over_the_cap_busy_connections_are_refused_with_503(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home", "--no-plugins", env={"ELOWEN_MAX_CONNECTIONS": "20"})
    streams: list[socket.socket] = []
    try:
        for _ in range(20):  # 20 event streams: none of them idle
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {d.admin_token}\r\n\r\n".encode())
            s.settimeout(5)
            assert s.recv(100).startswith(b"HTTP/1.1 200")
            streams.append(s)
        r = httpx.get(f"{d.url}/health", timeout=5)
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "too_many_connections"
        streams.pop().close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if httpx.get(f"{d.url}/health", timeout=5).status_code == 200:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("a freed slot was not reused")
        assert json.loads(httpx.get(f"{d.url}/health", timeout=5).text)["status"]
    finally:
        for s in streams:
            s.close()
        d.stop()

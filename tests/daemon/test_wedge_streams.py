"""Clients that stop reading cannot wedge the daemon: a stuck ``/events`` reader is dropped at
its send deadline, and ``SIGTERM`` ends the daemon within the shutdown bound whatever the
clients do (real daemon process, real sockets)."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import httpx

from .conftest import start_daemon
from .helpers import make_project


def _stuck_reader(port: int, token: str, path: str = "/events") -> socket.socket:
    """A raw client with a tiny receive buffer that sends one request and never reads."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return s


def _fill(admin: httpx.Client, project: int, n: int = 60) -> None:
    big = "x" * 60_000
    for i in range(n):
        r = admin.post("/tasks", json={"title": f"t{i}", "project_id": project, "description": big})
        assert r.status_code == 201, r.text


def test_stuck_sse_reader_is_dropped_and_stop_is_bounded(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home", "--no-plugins", env={"ELOWEN_SEND_TIMEOUT": "1"})
    stuck = []
    try:
        with d.admin() as admin:
            project = make_project(admin, tmp_path / "proj", "proj")
            stuck = [_stuck_reader(d.port, d.admin_token) for _ in range(3)]
            time.sleep(0.3)
            _fill(admin, project)
            # the daemon keeps answering while the readers are stuck
            assert admin.get("/health").status_code == 200
        deadline = time.monotonic() + 8
        log = ""
        while time.monotonic() < deadline:
            log = d.output()
            if "send deadline" in log:
                break
            time.sleep(0.2)
        assert "send deadline" in log, log[-2000:]
        _fill(d.admin(), project, 20)  # streams stuck again (new ones) before the stop
        stuck += [_stuck_reader(d.port, d.admin_token) for _ in range(2)]
        time.sleep(0.3)
        _fill(d.admin(), project, 30)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        code = d.proc.wait(15)
        took = time.monotonic() - t0
        assert code == 0
        assert took < 6.0, f"stop took {took:.1f} s"
    finally:
        for s in stuck:
            s.close()
        d.stop()


def test_a_second_signal_stops_at_once_whatever_the_clients_do(tmp_path: Path) -> None:
    # long send deadline and shutdown bound: only the second signal can make this quick
    d = start_daemon(tmp_path / "home", "--no-plugins", env={"ELOWEN_SEND_TIMEOUT": "60", "ELOWEN_SHUTDOWN_TIMEOUT": "60"})
    stuck = []
    try:
        with d.admin() as admin:
            project = make_project(admin, tmp_path / "proj", "proj")
            stuck = [_stuck_reader(d.port, d.admin_token) for _ in range(3)]
            time.sleep(0.3)
            _fill(admin, project, 40)
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        d.proc.wait(15)
        took = time.monotonic() - t0
        assert took < 3.0, f"the second signal took {took:.1f} s"
        assert "second SIGTERM" in d.output()
    finally:
        for s in stuck:
            s.close()
        d.stop()

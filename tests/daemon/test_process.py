"""The daemon process: single instance, port taken, loopback only, cold start, graceful
SIGTERM, crash safety under SIGKILL, and the in-process entry point."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from elowen.core.store import Store
from elowen.daemon.server import serve

from .conftest import spawn, start_daemon, wait_ready
from .helpers import make_project
from .sse_client import read_sse


def _run_to_exit(home: Path, *args: str) -> tuple[int, str]:
    proc = spawn(home, *args)
    code = proc.wait(timeout=20)
    return code, (home.parent / f"{home.name}-stderr.txt").read_text()


def test_second_instance_is_refused(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home", "--no-plugins")
    try:
        code, err = _run_to_exit(tmp_path / "home", "--no-plugins")
        assert code == 2
        assert "another Elowen daemon is already running" in err and f"pid {d.proc.pid}" in err
        assert httpx.get(f"{d.url}/health").json()["pid"] == d.proc.pid
    finally:
        d.stop()


def test_port_taken_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, err = _run_to_exit(tmp_path / "home", "--no-plugins", "--port", str(port))
    assert code == 2
    assert f"port {port} on 127.0.0.1 is already in use" in err
    assert not (tmp_path / "home" / "daemon.pid").exists()


def test_non_loopback_host_needs_allow_remote(tmp_path: Path) -> None:
    code, err = _run_to_exit(tmp_path / "home", "--no-plugins", "--host", "0.0.0.0")
    assert code == 2 and "refusing to listen on non-loopback host" in err


def test_admin_token_file_is_private_and_never_logged(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home")
    try:
        token_file = d.home / "admin.token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert d.admin_token.startswith("elw_") and len(d.admin_token) > 40
        assert httpx.get(f"{d.url}/users/me", headers={"Authorization": f"Bearer {d.admin_token}"}).json()["role"] == "admin"
    finally:
        assert d.stop() == 0
    logs = (d.home / "logs" / "daemon.log").read_text() + d.output()
    assert "admin.token" in logs and d.admin_token not in logs
    store = Store(d.home / "elowen.db")
    try:
        hashes = [r["hash"] for r in store.query("SELECT hash FROM tokens")]
    finally:
        store.close()
    assert d.admin_token not in hashes and len(hashes) == 1
    # a restart keeps the same admin (no second bootstrap)
    d2 = start_daemon(tmp_path / "home")
    try:
        assert d2.admin_token == d.admin_token
        assert httpx.get(f"{d2.url}/users/me", headers={"Authorization": f"Bearer {d.admin_token}"}).status_code == 200
    finally:
        d2.stop()


def test_the_daemon_starts_without_importing_optional_servers(tmp_path: Path) -> None:
    """The daemon serves from a fresh home, with and without plugins; with every plugin (the
    ``mcp`` plugin included) the MCP SDK is not imported until the first ``/mcp`` request
    (``GET /mcp/status`` reads the daemon's own ``sys.modules``). How fast it starts is
    measured by ``bench/coldstart.py`` and ``bench/mcp_roundtrip.py``."""
    for args in (("--no-plugins",), ()):
        home = tmp_path / ("bare" if args else "full")
        proc = spawn(home, *args)
        try:
            port = wait_ready(home, proc)
            if not args:
                auth = {"Authorization": f"Bearer {(home / 'admin.token').read_text().strip()}"}
                url = f"http://127.0.0.1:{port}"
                assert httpx.get(f"{url}/mcp/status", headers=auth, timeout=30).json()["sdk_loaded"] is False
                init = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
                }
                r = httpx.post(f"{url}/mcp", json=init, headers={**auth, "Accept": "application/json, text/event-stream"}, timeout=30)
                assert r.status_code == 200 and '"serverInfo"' in r.text, r.text
                assert httpx.get(f"{url}/mcp/status", headers=auth, timeout=30).json()["sdk_loaded"] is True
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0


def test_sigterm_finishes_in_flight_requests_and_ends_streams(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home", "--no-plugins")
    with d.admin() as admin:
        pid = make_project(admin, tmp_path / "proj", "proj")
    stream_ended = threading.Event()

    def follow() -> None:
        with d.admin() as c, c.stream("GET", "/events") as r:
            for _ in r.iter_lines():
                pass
        stream_ended.set()

    def slow_body() -> Iterator[bytes]:
        body = json.dumps({"title": "in flight", "project_id": pid}).encode()
        yield body[:10]
        time.sleep(0.6)  # SIGTERM arrives now
        yield body[10:]

    result: dict[str, httpx.Response] = {}

    def post() -> None:
        with d.admin() as c:
            result["r"] = c.post("/tasks", content=slow_body(), headers={"Content-Type": "application/json"})

    follower = threading.Thread(target=follow)
    follower.start()
    poster = threading.Thread(target=post)
    time.sleep(0.3)
    poster.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    d.proc.send_signal(signal.SIGTERM)
    poster.join(10)
    assert result["r"].status_code == 201, result["r"].text
    assert stream_ended.wait(5)
    assert d.proc.wait(10) == 0
    assert time.perf_counter() - t0 < 3.0
    follower.join(5)
    assert not (d.home / "daemon.pid").exists()
    log = d.output()
    assert "SIGTERM received" in log and "Elowen daemon stopped" in log
    d2 = start_daemon(tmp_path / "home", "--no-plugins")
    try:
        titles = [t["title"] for t in d2.admin().get("/tasks").json()["items"]]
        assert titles == ["in flight"]
    finally:
        d2.stop()


@pytest.mark.slow
def test_sigkill_during_writes_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    d = start_daemon(home, "--no-plugins")
    with d.admin() as admin:
        pid = make_project(admin, tmp_path / "proj", "proj")
    acked: list[int] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        with d.admin() as c:
            i = 0
            while not stop.is_set():
                try:
                    r = c.post("/tasks", json={"title": f"w{n}-{i}", "project_id": pid, "labels": ["crash"]})
                except httpx.HTTPError:
                    return
                if r.status_code == 201:
                    acked.append(r.json()["id"])
                i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(10)
    stop.set()
    for t in threads:
        t.join(10)
    assert len(acked) > 50
    d2 = start_daemon(home, "--no-plugins")
    try:
        with d2.admin() as c:
            found: set[int] = set()
            cursor = None
            while True:
                page = c.get("/tasks", params={"limit": 500, **({"cursor": cursor} if cursor else {})}).json()
                found |= {t["id"] for t in page["items"]}
                cursor = page["next_cursor"]
                if not cursor:
                    break
        assert set(acked) <= found, sorted(set(acked) - found)[:10]
    finally:
        d2.stop()
    store = Store(home / "elowen.db")
    try:
        assert store.integrity_check() == "ok"
    finally:
        store.close()


async def test_serve_in_process(tmp_path: Path) -> None:
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(
            lambda task_status: serve(tmp_path / "home", "127.0.0.1", 0, discover_plugins=False, heartbeat=0.2, shutdown=stop, task_status=task_status)
        )
        token = (tmp_path / "home" / "admin.token").read_text().strip()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}) as c:
            assert (await c.get("/health")).json()["status"] == "ok"
            comments: list[str] = []
            async with c.stream("GET", "/events") as r:
                stop.set()  # shutting down ends the stream
                with trio.fail_after(5):
                    async for _ in read_sse(r, comments=comments):
                        pass
    assert not (tmp_path / "home" / "daemon.pid").exists()

"""Cross-origin writes and DNS rebinding against a real daemon: JSON-only writes (415),
the ``Host`` check (421) and the ``Origin`` check (403), before any handler runs — so a page on
another site can neither act nor keep the admin's password login throttled."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from elowen.daemon.origin import HostPolicy, check_request, is_json_type, policy_for

from .conftest import DaemonProc, start_daemon
from .helpers import make_project

PASSWORD = "correct horse battery staple"
EVIL = "http://evil.example"


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    daemon = start_daemon(tmp_path_factory.mktemp("origin") / "home", "--no-plugins", env={"ELOWEN_ALLOWED_HOSTS": "elowen.lan, proxy.lan:8443"})
    try:
        with daemon.admin() as admin:
            me = admin.get("/users/me").json()
            assert admin.put(f"/users/{me['id']}/password", json={"password": PASSWORD}).status_code == 200
        yield daemon
    finally:
        daemon.stop()


def raw(d: DaemonProc, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as is (httpx would fix the Host header); returns (status, body)."""
    with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.find(b"\r\n\r\n") + 4 + _length(data):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def _length(data: bytes) -> int:
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            return int(line.split(":", 1)[1])
    return 0


def test_a_simple_cross_origin_post_is_refused_and_never_throttles_the_login(d: DaemonProc) -> None:
    body = b'{"name": "admin", "password": "wrong"}'
    with d.client() as c:
        for _ in range(12):  # more than the throttle's 5 failures a minute
            r = c.post("/auth/login", content=body, headers={"Content-Type": "text/plain", "Origin": EVIL})
            assert r.status_code == 403, r.text
            assert r.json()["error"]["code"] == "cross_origin"
            r = c.post("/auth/login", content=body, headers={"Content-Type": "text/plain"})  # no Origin: still not JSON
            assert r.status_code == 415, r.text
            r = c.post("/auth/login", content=b"name=admin&password=wrong", headers={"Content-Type": "application/x-www-form-urlencoded"})
            assert r.status_code == 415
        ok = c.post("/auth/login", json={"name": "admin", "password": PASSWORD})
        assert ok.status_code == 200, ok.text


def test_cross_origin_writes_with_a_token_are_refused(d: DaemonProc, tmp_path_factory: pytest.TempPathFactory) -> None:
    with d.admin() as admin:
        project = make_project(admin, tmp_path_factory.mktemp("o") / "p", "P")
        r = admin.post("/tasks", content=f'{{"title": "t", "project_id": {project}}}', headers={"Content-Type": "text/plain"})
        assert r.status_code == 415
        r = admin.post("/tasks", json={"title": "t", "project_id": project}, headers={"Origin": EVIL})
        assert r.status_code == 403
        r = admin.post("/tasks", json={"title": "t", "project_id": project}, headers={"Origin": "null"})
        assert r.status_code == 403
        titles = [t["title"] for t in admin.get("/tasks").json()["items"]]
        assert titles == []
        # same-origin and no Origin pass; so does JSON with a charset or a +json type
        assert admin.post("/tasks", json={"title": "a", "project_id": project}, headers={"Origin": d.url}).status_code == 201
        r = admin.post("/tasks", content=f'{{"title": "b", "project_id": {project}}}', headers={"Content-Type": "application/json; charset=utf-8"})
        assert r.status_code == 201
        assert admin.post(f"/tasks/{r.json()['id']}/cancel").status_code == 200  # empty body: no type needed


def test_a_dns_rebinding_host_is_refused(d: DaemonProc) -> None:
    status, body = raw(d, f"GET /health HTTP/1.1\r\nHost: evil.example:{d.port}\r\nConnection: close\r\n\r\n".encode())
    assert status == 421, body
    assert b"misdirected_host" in body
    status, _ = raw(d, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{d.port + 1}\r\nConnection: close\r\n\r\n".encode())
    assert status == 421  # another port: another origin
    status, _ = raw(d, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 421
    for bare in (b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", b"GET /health HTTP/1.0\r\n\r\n"):
        assert raw(d, bare)[0] == 200
    for host in (f"127.0.0.1:{d.port}", f"localhost:{d.port}", f"elowen.lan:{d.port}", "elowen.lan:1234", "proxy.lan:8443"):
        status, body = raw(d, f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        assert status == 200, (host, body)
    status, _ = raw(d, b"GET /health HTTP/1.1\r\nHost: proxy.lan:9999\r\nConnection: close\r\n\r\n")
    assert status == 421


def test_a_cross_origin_websocket_is_refused(d: DaemonProc) -> None:
    handshake = (
        f"GET /sessions/x/terminal?ticket=t HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {EVIL}\r\n\r\n"
    ).encode()
    status, _ = raw(d, handshake)
    assert status == 403


def test_policy_units() -> None:
    p = policy_for("127.0.0.1", 4400, {"allowed_hosts": ["Elowen.LAN"]}, env={})
    assert p.allows("127.0.0.1:4400") and p.allows("localhost:4400") and p.allows("[::1]:4400")
    assert p.allows("elowen.lan:80") and p.allows("elowen.lan")
    assert not p.allows("127.0.0.1:4401") and not p.allows("evil.example:4400") and p.allows("")
    assert p.allows(None) and p.allows("127.0.0.1")
    assert not p.allows("127.0.0.1:4400@evil") and not p.allows("127.0.0.1:4400/x") and not p.allows("127.0.0.1:99999")
    assert p.allows_origin("http://127.0.0.1:4400") and not p.allows_origin("http://127.0.0.1:4400/path")
    assert not p.allows_origin("null") and not p.allows_origin("file://") and not p.allows_origin(EVIL)
    assert policy_for("0.0.0.0", 4400, {"allowed_hosts": ["*"]}, env={}).allows("anything:1")
    assert not policy_for("0.0.0.0", 4400, {}, env={}).allows("0.0.0.0:4400")
    assert policy_for("192.168.1.5", 4400, {}, env={}).allows("192.168.1.5:4400")
    with pytest.raises(ValueError):
        policy_for("127.0.0.1", 4400, {"allowed_hosts": ["a b"]}, env={})
    assert is_json_type("application/json") and is_json_type("application/merge-patch+json; charset=utf-8")
    assert not is_json_type("text/plain") and not is_json_type(None) and not is_json_type("application/jsonx")
    any_port = HostPolicy(port=None, names=frozenset({"localhost"}))
    assert check_request(any_port, "POST", {"Host": "localhost"}, b"{}") is not None  # no Content-Type
    assert check_request(any_port, "POST", {"Host": "localhost"}, b"") is None
    assert check_request(any_port, "GET", {"Host": "localhost", "Origin": EVIL}, None).status == 403  # type: ignore[union-attr]

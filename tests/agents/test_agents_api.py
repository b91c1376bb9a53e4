"""The agents plugin's routes on a real daemon subprocess (real HTTP, real tmux, the fake agent).

Who may do what: admins everything; a member sees sessions and decisions of projects they may
see, and only the task's owner (or an admin) types keys, decides, or gets an input ticket.
"""

from __future__ import annotations

import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import tomli_w
import wsproto
import wsproto.events as ws_events

from tests.daemon.helpers import assert_error_shape, make_project, make_user
from tests.support.daemon import launch_daemon
from tests.support.waiting import free_port, wait

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


class Daemon:
    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=10.0)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    home = tmp_path / "elowen"
    home.mkdir()
    wrapper = tmp_path / "fake-claude"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    port = free_port()
    settings = {
        "plugins": {
            "tmux": {"config": {"socket": sock, "enter_delay": 0.05}},
            "agents": {
                "config": {
                    "url": f"http://127.0.0.1:{port}",
                    "scheduler_interval": 0.5,
                    "janitor_interval": 0.3,
                    "stuck_interval": 0.3,
                    "liveness_interval": 0.3,
                }
            },
            "claude-code": {"config": {"binary": str(wrapper), "env": {"FAKE_LOG": str(tmp_path / "fake.log")}}},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp_path / "stderr.txt")
    try:
        d = Daemon(url, (home / "admin.token").read_text().strip())
        with d.client() as c:
            wait(lambda: c.get("/plugins/agents").json()["state"] == "enabled", "agents enabled")
        yield d
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def ws_first_message(url: str, path: str, timeout: float = 5.0) -> tuple[str | None, int | None]:
    """Open a WebSocket, return (first text/bytes message decoded, close code)."""
    parts = urlsplit(url)
    conn = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as s:
        s.sendall(conn.send(ws_events.Request(host=f"{parts.hostname}:{parts.port}", target=path)))
        buf: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = s.recv(65536)
            if not data:
                return None, None
            conn.receive_data(data)
            for event in conn.events():
                if isinstance(event, (ws_events.TextMessage, ws_events.BytesMessage)):
                    chunk = event.data if isinstance(event.data, str) else event.data.decode("utf-8", "replace")
                    buf.append(chunk)
                    if event.message_finished:
                        return "".join(buf), None
                elif isinstance(event, ws_events.CloseConnection):
                    return None, event.code
                elif isinstance(event, ws_events.RejectConnection):
                    return None, event.status_code
    return None, None


def test_sessions_and_decisions_over_http(daemon: Daemon, tmp_path: Path) -> None:
    with daemon.client() as admin:
        project = make_project(admin, tmp_path / "repo", "demo")
        owner_id, owner_token = make_user(admin, "owner")
        peer_id, peer_token = make_user(admin, "peer")
        _, stranger_token = make_user(admin, "stranger")
        for uid in (owner_id, peer_id):
            assert admin.post(f"/users/{uid}/projects", json={"project_id": project}).status_code < 300
    owner, peer, stranger = daemon.client(owner_token), daemon.client(peer_token), daemon.client(stranger_token)
    with owner, peer, stranger:
        task = owner.post("/tasks", json={"title": "t", "project_id": project, "exec": "claude:fake"}).json()
        name = f"elowen-t{task['id']}-a1"
        decision = wait(lambda: (owner.get("/decisions", params={"task": task["id"], "status": "pending"}).json()["items"] or [None])[0], "decision")
        assert decision["kind"] == "prompt" and decision["payload"]["state"] == "permission_prompt"

        # visibility
        assert stranger.get("/decisions").json()["items"] == []
        assert_error_shape(stranger.get(f"/decisions/{decision['id']}"), 404)
        assert_error_shape(stranger.get(f"/sessions/{name}"), 404)
        assert [s["session"] for s in peer.get("/sessions").json()["items"]] == [name]
        session = owner.get(f"/sessions/{name}").json()
        assert "Do you want to proceed?" in session["capture"] and session["classification"]["state"] == "permission_prompt"
        assert "env" not in session

        # acting: owner or admin only; bad bodies are 422
        assert_error_shape(peer.post(f"/decisions/{decision['id']}", json={"action": "approve"}), 403)
        assert_error_shape(stranger.post(f"/decisions/{decision['id']}", json={"action": "approve"}), 404)
        assert_error_shape(owner.post(f"/decisions/{decision['id']}", json={"action": "maybe"}), 422)
        assert_error_shape(owner.post(f"/decisions/{decision['id']}", json={"action": "choice"}), 422)
        assert_error_shape(peer.post(f"/sessions/{name}/keys", json={"keys": ["Enter"]}), 403)
        assert_error_shape(owner.post(f"/sessions/{name}/keys", json={"keys": "Enter"}), 422)
        assert_error_shape(owner.post(f"/sessions/{name}/keys", json={"keys": ["not a key!"]}), 422)
        assert_error_shape(owner.post(f"/sessions/{name}/keys", json={}), 422)

        # live terminal: single-use ticket, input only for the owner/admin
        assert_error_shape(peer.post(f"/sessions/{name}/ticket", json={"input": True}), 403)
        ticket = peer.post(f"/sessions/{name}/ticket", json={}).json()
        assert ticket["input"] is False
        first, _ = ws_first_message(daemon.url, f"/sessions/{name}/terminal?ticket={ticket['ticket']}")
        assert first is not None and "Do you want to proceed?" in first
        again, code = ws_first_message(daemon.url, f"/sessions/{name}/terminal?ticket={ticket['ticket']}")
        assert again is None and code in (1008, 403)

        # the owner approves; a second answer conflicts
        decided = owner.post(f"/decisions/{decision['id']}", json={"action": "approve", "rationale": "fine"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "approved" and decided.json()["decided_by"] == f"user:{owner_id}"
        assert_error_shape(owner.post(f"/decisions/{decision['id']}", json={"action": "approve"}), 409)

        # pagination
        with daemon.client() as admin:
            page = admin.get("/decisions", params={"limit": 1}).json()
            assert len(page["items"]) == 1 and page["next_cursor"] is None
            assert_error_shape(admin.get("/decisions", params={"cursor": "!!"}), 400)

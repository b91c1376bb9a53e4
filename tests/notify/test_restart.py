"""The outbox across a real crash: a daemon killed with SIGKILL while a web push is pending (the
push service failing) delivers it after the restart; one killed after the push service took a
message but before the daemon heard the answer delivers it again (at-least-once: never lost,
possibly twice). The VAPID key survives restarts. Real daemon processes, real SQLite file, the
scripted push service on 127.0.0.1."""

from __future__ import annotations

import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.notify.push_service import PushService
from tests.support.daemon import launch_daemon
from tests.support.waiting import free_port, wait

pytestmark = pytest.mark.slow


class Daemon:
    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.home.mkdir()
        self.socket = f"elowen-test-{uuid.uuid4().hex[:8]}"
        config = {
            "plugins": {
                "tmux": {"config": {"socket": self.socket}},
                "notify": {"config": {"allow_insecure_endpoints": True, "backoff_base": 0.2, "backoff_max": 0.5, "max_attempts": 100}},
            }
        }
        (self.home / "config.toml").write_text(tomli_w.dumps(config))
        self.log = root / "daemon.err"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        self.proc, self.url = launch_daemon(self.home, free_port(), self.log, timeout=60)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def client(self) -> httpx.Client:
        token = (self.home / "admin.token").read_text().strip()
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path)
    try:
        yield d
    finally:
        d.stop()


def _deliveries(d: Daemon, nid: int) -> list[dict[str, Any]]:
    with d.client() as c:
        return list(c.get(f"/notifications/{nid}").json()["deliveries"])


def test_pending_push_survives_kill9(daemon: Daemon) -> None:
    with PushService() as push:
        daemon.start()
        with daemon.client() as c:
            key = c.get("/notifications/push/key").json()["public_key"]
            sub_id, sub = push.new_subscription(key)
            assert c.post("/notifications/push/subscriptions", json={**sub, "device": "test"}).status_code == 201
            push.status[sub_id] = 503  # the push service is down
            nid = c.post("/notifications/test", json={"title": "Across a crash"}).json()["id"]
        wait(lambda: push.attempts.get(sub_id, 0) >= 2, "failed attempts", timeout=30)
        daemon.kill9()
        assert push.for_sub(sub_id) == []
        push.status.pop(sub_id)  # the push service is back
        daemon.start()
        wait(lambda: push.for_sub(sub_id), "the push after the restart", timeout=30)
        assert push.for_sub(sub_id)[0].message["title"] == "Across a crash" and push.refused == []
        wait(lambda: _deliveries(daemon, nid)[0]["status"] == "delivered", "recorded delivered", timeout=30)
        with daemon.client() as c:
            assert c.get("/notifications/push/key").json()["public_key"] == key  # kept in the home folder


def test_a_push_accepted_but_unacknowledged_is_sent_again(daemon: Daemon) -> None:
    with PushService() as push:
        daemon.start()
        with daemon.client() as c:
            sub_id, sub = push.new_subscription(c.get("/notifications/push/key").json()["public_key"])
            c.post("/notifications/push/subscriptions", json=sub).raise_for_status()
            gate = push.hold[sub_id] = threading.Event()
            nid = c.post("/notifications/test", json={"title": "Once or twice, never never"}).json()["id"]
        wait(lambda: push.for_sub(sub_id), "the push service took it", timeout=30)
        daemon.kill9()  # before the 201 reached the daemon
        gate.set()
        daemon.start()
        wait(lambda: len(push.for_sub(sub_id)) == 2, "sent again after the restart", timeout=30)
        assert {r.message["id"] for r in push.for_sub(sub_id)} == {nid}
        wait(lambda: _deliveries(daemon, nid)[0]["status"] == "delivered", "recorded delivered", timeout=30)

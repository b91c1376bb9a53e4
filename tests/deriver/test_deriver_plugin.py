"""The ``deriver`` plugin toggled in a running daemon with a live agent (real daemon subprocess,
real HTTP, real tmux, the fake agent drawing real Claude Code screens).

Disabled: the agent still runs and is shown ``unsupervised`` (``GET /sessions``, ``elowen
agents``), its prompt becomes no decision. Enabled again: the live pane is classified at once
(the sweep is set to a minute, so only the on-load classification can explain a fast decision),
an open decision is re-linked rather than duplicated, and answering it works.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.daemon.helpers import make_project
from tests.support.daemon import launch_daemon
from tests.support.waiting import free_port, wait

FAKE_AGENT = Path(__file__).resolve().parents[1] / "agents" / "fake_agent.py"
ELOWEN = Path(sys.executable).parent / "elowen"


class Daemon:
    def __init__(self, url: str, token: str, home: Path, port: int, log: Path) -> None:
        self.url = url
        self.token = token
        self.home = home
        self.port = port
        self.log = log

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10.0)

    def cli(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ELOWEN_")}
        env.update(ELOWEN_HOME=str(self.home), ELOWEN_HOST="127.0.0.1", ELOWEN_PORT=str(self.port), ELOWEN_NO_AUTOSTART="1")
        out = subprocess.run([str(ELOWEN), *args], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def fake_events(self, event: str) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [e for e in (json.loads(line) for line in self.log.read_text().splitlines() if line.strip()) if e["event"] == event]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    home = tmp_path / "elowen"
    home.mkdir()
    wrapper = tmp_path / "fake-claude"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    port = free_port()
    log = tmp_path / "fake.log"
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
            "deriver": {"config": {"sweep_interval": 60}},
            "claude-code": {"config": {"binary": str(wrapper), "env": {"FAKE_LOG": str(log), "FAKE_PROMPTS": "2"}}},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp_path / "stderr.txt")
    try:
        d = Daemon(url, (home / "admin.token").read_text().strip(), home, port, log)
        with d.client() as c:
            wait(lambda: c.get("/plugins/deriver").json()["state"] == "enabled", "deriver enabled")
        yield d
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def _toggle(c: httpx.Client, action: str) -> None:
    r = c.post(f"/plugins/deriver/{action}")
    assert r.status_code < 300, r.text
    state = "enabled" if action == "enable" else "disabled"
    wait(lambda: c.get("/plugins/deriver").json()["state"] == state, f"deriver {state}")


def _session(c: httpx.Client, name: str) -> dict[str, Any]:
    [row] = [s for s in c.get("/sessions").json()["items"] if s["session"] == name]
    return row


def _pending(c: httpx.Client, task_id: int) -> list[dict[str, Any]]:
    return c.get("/decisions", params={"task": task_id, "status": "pending"}).json()["items"]


def test_disable_shows_unsupervised_and_enable_resumes_at_once(daemon: Daemon, tmp_path: Path) -> None:
    with daemon.client() as c:
        project = make_project(c, tmp_path / "repo", "demo")
        _toggle(c, "disable")
        task = c.post("/tasks", json={"title": "t", "project_id": project, "exec": "claude:fake"}).json()
        name = f"elowen-t{task['id']}-a1"

        # disabled: the agent runs and reaches its prompt, nobody classifies it
        wait(lambda: daemon.fake_events("prompt"), "the agent shows its first prompt")
        time.sleep(1.0)  # several liveness passes; a deriver would have needed ~0.3 s
        row = _session(c, name)
        assert row["state"] == "running" and row["supervised"] is False and row["signal"] == "unsupervised"
        assert _pending(c, task["id"]) == []
        listing = daemon.cli("agents")
        assert name in listing and "unsupervised" in listing
        assert json.loads(daemon.cli("agents", "--json"))[0]["signal"] == "unsupervised"

        # enabled again: the live pane is classified on load, not at the next sweep (60 s)
        enabled_at = time.monotonic()
        _toggle(c, "enable")
        [first] = wait(lambda: _pending(c, task["id"]), "decision after re-enable", timeout=10)
        assert time.monotonic() - enabled_at < 10
        assert first["kind"] == "prompt" and first["payload"]["state"] == "permission_prompt"
        wait(lambda: _session(c, name)["supervised"], "supervised again")
        assert _session(c, name)["signal"] == "needs_input"

        # answered through the decisions route: the agents side sends the key
        r = c.post(f"/decisions/{first['id']}", json={"action": "approve"})
        assert r.status_code == 200 and r.json()["answer"]["keys"] == ["1"], r.text
        [second] = wait(lambda: [d for d in _pending(c, task["id"]) if d["id"] != first["id"]], "the second prompt's decision")
        assert second["payload"]["fingerprint"] == first["payload"]["fingerprint"]

        # a toggle with a decision in flight loses nothing and duplicates nothing
        _toggle(c, "disable")
        assert [d["id"] for d in _pending(c, task["id"])] == [second["id"]]
        _toggle(c, "enable")
        wait(lambda: _session(c, name)["supervised"], "supervised after the second enable")
        time.sleep(0.5)  # the on-load classification has run
        assert [d["id"] for d in _pending(c, task["id"])] == [second["id"]]
        r = c.post(f"/decisions/{second['id']}", json={"action": "approve"})
        assert r.status_code == 200, r.text
        wait(lambda: daemon.fake_events("idle"), "the agent is idle")
        assert [e["key"] for e in daemon.fake_events("key")] == ["1", "1"]
        wait(lambda: _session(c, name)["signal"] == "complete", "complete signal")
        assert len(c.get("/decisions", params={"task": task["id"]}).json()["items"]) == 2

"""Approving a button-row prompt presses the right button even when the focus was moved.

OpenCode 1.18.33 and Kilo 7.7.7 confirm the FOCUSED button with Enter, and their focus wraps
around (Left on "Allow once" focuses "Reject"; captured). When a human attached to the
terminal left the focus on "Allow always", an approval sending a bare Enter would grant a
standing permission. The answer path reads the focus from the ``-e`` capture and moves back to
"Allow once" first.

Real daemon subprocess, real tmux, real HTTP: the "agent" is a shell script that draws the real
OpenCode capture (escapes included) with "Allow always" focused, then waits.
"""

from __future__ import annotations

import signal
import stat
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
import tomli_w

from tests.daemon.helpers import make_project
from tests.support.daemon import launch_daemon
from tests.support.waiting import free_port, wait

pytestmark = pytest.mark.slow

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "opencode" / "captured"


@pytest.mark.parametrize(
    ("name", "keys"),
    # control: a prompt as the CLI first draws it, "Allow once" focused: Enter alone
    [("26_permission_prompt_allow_always_focused_200x50", ["Left", "Enter"]), ("12_permission_prompt_200x50", ["Enter"])],
    ids=["always-focused", "default-focus"],
)
def test_approve_moves_back_to_allow_once(tmp_path: Path, name: str, keys: list[str]) -> None:
    drawn = tmp_path / "screen.ansi"
    drawn.write_text((CAPTURED / f"{name}.ansi.txt").read_text().rstrip("\n"))
    agent = tmp_path / "fake-opencode"
    # `--pure session list` is the provider's one-time state set-up (Provider.init_command): exits, as OpenCode's does
    agent.write_text(f'#!/bin/sh\n[ "$2" = session ] && exit 0\nclear\ncat {drawn}\nexec sleep 600\n')
    agent.chmod(agent.stat().st_mode | stat.S_IEXEC)
    home = tmp_path / "elowen"
    home.mkdir()
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    port = free_port()
    settings = {
        "plugins": {
            "tmux": {"config": {"socket": sock, "enter_delay": 0.05}},
            "agents": {"config": {"url": f"http://127.0.0.1:{port}", "scheduler_interval": 0.5}},
            "opencode": {"config": {"binary": str(agent)}},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp_path / "stderr.txt")
    try:
        token = (home / "admin.token").read_text().strip()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10.0) as c:
            wait(lambda: c.get("/plugins/deriver").json()["state"] == "enabled", "deriver enabled")
            project = make_project(c, tmp_path / "repo", "demo")
            task = c.post("/tasks", json={"title": "t", "project_id": project, "exec": "opencode:fake/fake-model"}).json()
            [d] = wait(lambda: c.get("/decisions", params={"task": task["id"], "status": "pending"}).json()["items"], "a decision", timeout=60)
            assert d["payload"]["request"]["command"] in ("echo hi > hi.txt", "echo one > one.txt")
            r = c.post(f"/decisions/{d['id']}", json={"action": "approve"})
            assert r.status_code == 200, r.text
            assert r.json()["answer"]["keys"] == keys
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)

"""A live dialog that is no known prompt becomes a ``question`` decision for a human (real daemon
subprocess, real HTTP, real tmux). The "agent" is a shell script that draws a real Claude Code
2.1.197 capture (the WebFetch prompt, its question reworded so no known prompt matches, no
footer) and waits; then it draws the same screen with its payload cwd checked by a real prompt
(the Write-outside capture) so the request of a ``prompt`` decision is normalised with the
session's workdir.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.daemon.helpers import make_project
from tests.support.daemon import launch_daemon
from tests.support.waiting import free_port, wait

pytestmark = pytest.mark.slow

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "claude"


def _agent(tmp_path: Path, screen: str) -> Path:
    drawn = tmp_path / "screen.txt"
    drawn.write_text(screen.rstrip("\n"))
    script = tmp_path / "fake-claude"
    script.write_text(f"#!/bin/sh\nclear\ncat {drawn}\nexec sleep 600\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _run(tmp_path: Path, screen: str) -> list[dict[str, Any]]:
    home = tmp_path / "elowen"
    home.mkdir()
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    port = free_port()
    settings = {
        "plugins": {
            "tmux": {"config": {"socket": sock, "enter_delay": 0.05}},
            "agents": {"config": {"url": f"http://127.0.0.1:{port}", "scheduler_interval": 0.5}},
            "claude-code": {"config": {"binary": str(_agent(tmp_path, screen))}},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp_path / "stderr.txt")
    try:
        token = (home / "admin.token").read_text().strip()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10.0) as c:
            wait(lambda: c.get("/plugins/deriver").json()["state"] == "enabled", "deriver enabled")
            project = make_project(c, tmp_path / "repo", "demo")
            task = c.post("/tasks", json={"title": "t", "project_id": project, "exec": "claude:fake"}).json()
            items: list[dict[str, Any]] = wait(
                lambda: c.get("/decisions", params={"task": task["id"], "status": "pending"}).json()["items"], "a decision", timeout=30
            )
            sessions = c.get("/sessions").json()["items"]
            for d in items:
                d["_workdir"] = next(row["workdir"] for row in sessions if row["session"] == d["session"])
            return items
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def test_unknown_dialog_becomes_a_question_with_the_screen(tmp_path: Path) -> None:
    screen = (SCREENS / "30_permission_prompt_webfetch_2.1.197.txt").read_text()
    screen = screen.replace("Do you want to allow Claude to fetch this content?", "Shall we switch the output style?")
    screen = screen.replace("No, and tell Claude what to do differently (esc)", "Keep the current style")
    [d] = _run(tmp_path, screen)
    assert d["kind"] == "question"
    p = d["payload"]
    assert p["state"] == "unknown_dialog"
    assert p["request"]["question"] == "Shall we switch the output style?"
    assert p["request"]["complete"] is False
    assert "Shall we switch the output style?" in p["screen"]


def test_prompt_request_is_resolved_against_the_session_workdir(tmp_path: Path) -> None:
    screen = (SCREENS / "31_permission_prompt_write_outside_2.1.197.txt").read_text()
    [d] = _run(tmp_path, screen)
    assert d["kind"] == "prompt"
    r = d["payload"]["request"]
    assert r["kind"] == "write" and r["complete"] is True
    # the header shows ../../../../root/e2e-outside-write.txt; resolved from the session's cwd
    assert r["file"] == r["paths"][0]
    want = os.path.realpath(os.path.join(d["_workdir"], "../../../../root/e2e-outside-write.txt"))
    assert r["paths"] == [want] and r["question"].endswith("e2e-outside-write.txt?")

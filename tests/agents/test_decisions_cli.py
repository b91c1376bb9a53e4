"""``elowen decisions`` and the decision id in ``elowen agents``: the real ``elowen`` command
against a real daemon subprocess (real HTTP, real tmux, real SQLite). The "agent" is a shell
script that draws a real Claude Code 2.1.197 capture (the Write-outside-the-checkout prompt) and
waits, so the deriver makes a real ``prompt`` decision from it; the overseer has no mission to
decide it in, so it waits for a human. Also :func:`elowen.cli.decisions.action_of` for every
request kind, and the exit statuses of bad input."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
from click.testing import CliRunner

from elowen.cli.decisions import action_of, decisions
from tests.daemon.helpers import make_project
from tests.support.daemon import launch_daemon
from tests.support.waiting import free_port, wait

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "claude"
ELOWEN = str(Path(sys.executable).parent / "elowen")


# ---------------------------------------------------------------- the action column


@pytest.mark.parametrize(
    ("request_", "want"),
    [
        ({"kind": "bash", "command": "rm -rf build", "complete": True}, "bash: rm -rf build"),
        ({"kind": "write", "paths": ["/root/x.txt"], "file": "x.txt", "complete": True}, "write: /root/x.txt"),
        ({"kind": "patch", "paths": ["/h/.ssh/authorized_keys", "/r/a.py"], "complete": True}, "patch: /h/.ssh/authorized_keys, /r/a.py"),
        ({"kind": "fetch", "url": "https://example.com/page", "complete": True}, "fetch: https://example.com/page"),
        ({"kind": "directory", "directory": "/root", "patterns": ["/root/*"], "complete": True}, "directory: /root (/root/*)"),
        ({"kind": "mcp", "server": "github", "tool": "create_issue", "complete": True}, "mcp: github/create_issue"),
        (
            {"kind": "edit", "paths": [], "file": "", "question": "Do you want to make this edit?", "complete": False, "missing": ["paths"]},
            "edit: Do you want to make this edit? [incomplete: paths]",
        ),
    ],
)
def test_action_names_the_extracted_request(request_: dict[str, Any], want: str) -> None:
    assert action_of({"kind": "prompt", "payload": {"request": request_}}) == want


def test_action_of_other_kinds_and_long_text() -> None:
    assert action_of({"kind": "review", "payload": {"summary": "closed: wrote the file"}}) == "closed: wrote the file"
    assert action_of({"kind": "check", "payload": {}}) == "-"
    long = action_of({"payload": {"request": {"kind": "bash", "command": "echo " + "x" * 200}}})
    assert len(long) == 72 and long.endswith("…") and "\n" not in long


def test_pending_and_status_together_is_a_usage_error() -> None:
    result = CliRunner().invoke(decisions, ["--pending", "--status", "approved"])
    assert result.exit_code == 2 and "not both" in result.output


@pytest.mark.parametrize("args", [["show", "abc"], ["show", "0"], ["--task", "x"], ["--status", "maybe"], ["--kind", "nope"]])
def test_bad_arguments_are_usage_errors(args: list[str]) -> None:
    assert CliRunner().invoke(decisions, args).exit_code == 2


def test_unreachable_daemon_exits_3(tmp_path: Path) -> None:
    env = {**os.environ, "ELOWEN_URL": f"http://127.0.0.1:{free_port()}", "ELOWEN_TOKEN": "x", "ELOWEN_HOME": str(tmp_path), "ELOWEN_NO_AUTOSTART": "1"}
    proc = subprocess.run([ELOWEN, "decisions", "--pending"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and proc.stderr.startswith("error:"), proc.stderr


# ---------------------------------------------------------------- against a real daemon


@dataclass
class Live:
    url: str
    token: str
    home: Path
    task_id: int
    decision: dict[str, Any]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ELOWEN_URL": self.url, "ELOWEN_TOKEN": self.token, "ELOWEN_HOME": str(self.home), "ELOWEN_NO_AUTOSTART": "1"}
        return subprocess.run([ELOWEN, *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    drawn = tmp_path / "screen.txt"
    drawn.write_text((SCREENS / "31_permission_prompt_write_outside_2.1.197.txt").read_text().rstrip("\n"))
    agent = tmp_path / "fake-claude"
    agent.write_text(f"#!/bin/sh\nclear\ncat {drawn}\nexec sleep 600\n")
    agent.chmod(agent.stat().st_mode | stat.S_IEXEC)
    home = tmp_path / "elowen"
    home.mkdir()
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    port = free_port()
    settings = {
        "plugins": {
            "tmux": {"config": {"socket": sock, "enter_delay": 0.05}},
            "agents": {"config": {"url": f"http://127.0.0.1:{port}", "scheduler_interval": 0.5}},
            "claude-code": {"config": {"binary": str(agent)}},
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
            [d] = wait(lambda: c.get("/decisions", params={"task": task["id"], "status": "pending"}).json()["items"], "a decision", timeout=60)
        yield Live(url, token, home, int(task["id"]), d)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


@pytest.mark.slow
def test_decisions_and_agents_show_what_waits_and_who_decided(live: Live) -> None:
    did = live.decision["id"]
    target = live.decision["payload"]["request"]["paths"][0]
    assert target.endswith("/root/e2e-outside-write.txt")

    # `elowen agents` names the decision the waiting agent needs
    agents = live.run("agents", "--json")
    assert agents.returncode == 0, agents.stderr
    [session] = [s for s in json.loads(agents.stdout) if s["task_id"] == live.task_id]
    assert session["decision_id"] == did
    table = live.run("agents").stdout.splitlines()
    assert "DECISION" in table[0].split()
    row = next(line.split() for line in table[1:] if line.split()[0] == session["session"])
    assert row[table[0].split().index("DECISION")] == str(did)

    # `elowen decisions --pending`: id, task, agent, kind, the extracted action, status
    pending = live.run("decisions", "--pending")
    assert pending.returncode == 0, pending.stderr
    header, *rows = pending.stdout.splitlines()
    assert header.split() == ["ID", "TASK", "AGENT", "KIND", "STATUS", "BY", "CONF", "WHEN", "ACTION"]
    [line] = [r for r in rows if r.split()[0] == str(did)]
    assert line.split()[1:6] == [str(live.task_id), session["session"], "prompt", "pending", "-"]
    assert f"write: {target}" in line
    as_json = json.loads(live.run("decisions", "--pending", "--json").stdout)
    assert [d["id"] for d in as_json] == [did] and as_json[0]["payload"]["request"]["kind"] == "write"

    # a human rejects it; the list then says who and when, and nothing waits any more
    answered = live.run("decide", str(did), "--reject", "-r", "not outside the checkout")
    assert answered.returncode == 0 and "rejected" in answered.stdout, answered.stderr
    done = json.loads(live.run("decisions", "--task", str(live.task_id), "--json").stdout)
    mine = next(d for d in done if d["id"] == did)
    assert mine["status"] == "rejected" and mine["decided_by"].startswith("user:") and mine["decided_at"]
    rejected = live.run("decisions", "--status", "rejected", "--last", "1").stdout.splitlines()
    assert rejected[1].split()[:6] == [str(did), str(live.task_id), session["session"], "prompt", "rejected", mine["decided_by"]]
    assert did not in [d["id"] for d in json.loads(live.run("decisions", "--pending", "--json").stdout)]

    # one decision in full: the request and the screen it was read from
    shown = live.run("decisions", "show", str(did))
    assert shown.returncode == 0, shown.stderr
    assert f"paths: ['{target}']" in shown.stdout and "diff:\n  1 hello" in shown.stdout
    assert "rationale:  not outside the checkout" in shown.stdout and "  - Yes, allow all edits in root/" in shown.stdout, shown.stdout
    assert json.loads(live.run("decisions", "show", str(did), "--json").stdout)["id"] == did

    # errors: an unknown decision is refused (exit 1), answering it twice too
    missing = live.run("decisions", "show", "999999")
    assert missing.returncode == 1 and missing.stderr.startswith("error:") and "not found" in missing.stderr
    again = live.run("decide", str(did), "--approve")
    assert again.returncode == 1 and again.stderr.startswith("error:"), again.stderr

"""End to end: the daemon (a real subprocess) runs tasks on the REAL agent CLIs in tmux.

For each of Claude Code 2.1.197, Codex 0.171.0, OpenCode 1.18.33 and Kilo 7.7.7 (installed by
``scripts/install-test-deps``), against the scripted model server (``tests/support``):

* a task is created over the REST API, the agents plugin spawns the CLI, its permission prompt
  becomes a pending decision; approving it (``POST /decisions/{id}``) lets the command run, and
  that command is ``elowen close $ELOWEN_TASK --summary … --evidence …`` run by the CLI itself
  with its agent token: the task closes with that evidence;
* rejecting the prompt is handled (the command does not run, the decision is ``rejected``);
* killing the agent's process makes the stuck detector reopen the task with a resume note and
  relaunch it (resuming the previous conversation), twice, then block it;
* Claude's folder-trust dialog is handled both pre-seeded and not.

The model runs ``RUN: <cmd>`` commands found at the end of its prompt (``DefaultScript``); the
task prompt ends with the task description, so the description says what to run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.support.agent_env import CLIS, Cli, prepare_agent
from tests.support.daemon import launch_daemon
from tests.support.model_server import ModelServer
from tests.support.waiting import free_port
from tests.support.waiting import wait as _wait

pytestmark = pytest.mark.slow

STEP = 90.0  # seconds per waited-for step (CLIs start in 2–8 s on a 2-core machine)
SCREEN_ONLY: dict[str, dict[str, bool]] = {"claude": {"permission_channel": False}}

PLUGIN = {"claude": "claude-code", "codex": "codex", "opencode": "opencode", "kilo": "kilo"}
# Codex 0.171 runs commands in a login shell (bash -lc) whose /etc/profile resets PATH, which
# would hide Elowen's own bin folder from the agent; allow_login_shell=false keeps the agent's PATH.
EXTRA_ARGS: dict[str, list[str]] = {}  # Codex's provider now adds allow_login_shell=false itself
EXEC = {"claude": "claude:fake-model", "codex": "codex:fake-model", "opencode": "opencode:fake/fake-model", "kilo": "kilo:fake/fake-model"}


def wait(predicate: Callable[[], Any], what: str, timeout: float = STEP, on_fail: Callable[[], str] | None = None) -> Any:
    return _wait(predicate, what, timeout, on_fail, interval=0.25)


@dataclass
class Daemon:
    cli: Cli
    home: Path
    repo: Path
    proc: subprocess.Popen[bytes]
    url: str
    token: str
    socket: str
    model: ModelServer

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=15.0)

    def get(self, path: str, **params: Any) -> Any:
        with self.api() as c:
            r = c.get(path, params=params)
            r.raise_for_status()
            return r.json()

    def post(self, path: str, body: Any) -> Any:
        with self.api() as c:
            r = c.post(path, json=body)
            assert r.status_code < 300, r.text
            return r.json()

    def screen(self) -> str:
        names = subprocess.run(["tmux", "-L", self.socket, "list-sessions", "-F", "#{session_name}"], capture_output=True, text=True).stdout.split()
        out = []
        for n in names:
            if n.startswith("elowen-t"):
                cap = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-t", f"={n}:"], capture_output=True, text=True).stdout
                out.append(f"--- {n}\n{cap}")
        log = self.home / "logs" / "daemon.log"
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
        return "\n".join(out) + "\n--- daemon log tail\n" + tail

    def events(self, type_: str) -> list[dict[str, Any]]:
        import apsw

        conn = apsw.Connection(str(self.home / "elowen.db"), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return [json.loads(r[0]) for r in conn.execute("SELECT data FROM events WHERE type = ? ORDER BY id", (type_,))]
        finally:
            conn.close()

    def create_task(self, description: str, title: str = "e2e task") -> int:
        project = self.post("/projects", {"name": f"p-{uuid.uuid4().hex[:6]}", "path": str(self.repo)}) if not hasattr(self, "_project") else self._project  # type: ignore[has-type]
        self._project = project
        return int(self.post("/tasks", {"title": title, "project_id": project["id"], "exec": EXEC[self.cli], "description": description})["id"])

    def pending(self, task_id: int) -> dict[str, Any]:
        def find() -> Any:
            items = self.get("/decisions", task=task_id, status="pending")["items"]
            return items[0] if items else None

        return wait(find, f"a pending decision for task {task_id}", on_fail=self.screen)


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def start(tmp_path: Path, cli: Cli, model: ModelServer, *, trust: bool = True) -> Daemon:
    fake_home, repo, home = tmp_path / "agent-home", tmp_path / "repo", tmp_path / "elowen"
    for p in (fake_home, repo, home):
        p.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    launch = prepare_agent(cli, fake_home, repo, model.url, trust=trust)
    port = free_port()
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    settings = {
        "plugins": {
            "tmux": {"config": {"socket": sock}},
            "agents": {
                "config": {
                    "url": f"http://127.0.0.1:{port}",
                    "preseed_trust": trust,
                    "scheduler_interval": 1.0,
                    "sweep_interval": 1.0,
                    "liveness_interval": 0.5,
                    "stuck_interval": 0.5,
                    "janitor_interval": 0.5,
                }
            },
            # the screen path for every CLI (Claude Code's permission channel is tested in test_permission_channel_e2e.py)
            PLUGIN[cli]: {"config": {"binary": launch.argv[0], "env": launch.env, "extra_args": EXTRA_ARGS.get(cli, []), **SCREEN_ONLY.get(cli, {})}},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp_path / "daemon-stderr.txt")
    token = (home / "admin.token").read_text().strip()
    d = Daemon(cli, home, repo, proc, url, token, sock, model)
    wait(lambda: d.get("/plugins/agents")["state"] == "enabled", "agents plugin enabled", timeout=15)
    return d


@pytest.fixture
def run_daemon(tmp_path: Path, model_server: ModelServer) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(cli: Cli, trust: bool = True) -> Daemon:
        d = start(tmp_path, cli, model_server, trust=trust)
        started.append(d)
        return d

    try:
        yield make
    finally:
        for d in started:
            d.proc.send_signal(signal.SIGTERM)
            try:
                d.proc.wait(20)
            except subprocess.TimeoutExpired:
                d.proc.kill()
            subprocess.run(["tmux", "-L", d.socket, "kill-server"], capture_output=True, check=False)


def close_command(marker: str) -> str:
    return f'RUN: echo {marker} > proof.txt && elowen close $ELOWEN_TASK --summary "wrote proof.txt" --evidence "proof.txt contains {marker}"'


@pytest.mark.parametrize("cli", CLIS)
def test_approve_runs_the_command_and_the_agent_closes_its_task(cli: Cli, run_daemon: Callable[..., Daemon]) -> None:
    d = run_daemon(cli)
    marker = f"ok-{uuid.uuid4().hex[:6]}"
    task_id = d.create_task(f"Write the proof file, then close the task. {close_command(marker)}")
    decision = d.pending(task_id)
    assert decision["kind"] == "prompt"
    assert "elowen close" in json.dumps(decision["payload"]["request"]), decision
    assert not (d.repo / "proof.txt").exists()
    assert any(e["signal"] == "needs_input" and e["task_id"] == task_id for e in d.events("signal"))
    decided = d.post(f"/decisions/{decision['id']}", {"action": "approve"})
    assert decided["status"] == "approved"
    task = wait(lambda: (lambda t: t if t["state"] == "closed" else None)(d.get(f"/tasks/{task_id}")), "the task closed by its agent", on_fail=d.screen)
    assert task["summary"] == "wrote proof.txt"
    assert task["evidence"] == [f"proof.txt contains {marker}"]
    assert (d.repo / "proof.txt").read_text().strip() == marker
    # the janitor ends the finished agent's session
    wait(lambda: all(s["state"] != "running" for s in d.get("/sessions", task=task_id)["items"]), "session ended", on_fail=d.screen)


@pytest.mark.parametrize("cli", CLIS)
def test_reject_keeps_the_command_from_running(cli: Cli, run_daemon: Callable[..., Daemon]) -> None:
    d = run_daemon(cli)
    task_id = d.create_task(f"Try to write the proof file. {close_command('rejected')}")
    decision = d.pending(task_id)
    decided = d.post(f"/decisions/{decision['id']}", {"action": "reject", "rationale": "not now"})
    assert decided["status"] == "rejected" and decided["answer"]["keys"]
    # the CLI takes the rejection: its prompt leaves the screen, nothing ran, the task stays open for work
    wait(lambda: d.get(f"/sessions/elowen-t{task_id}-a1")["classification"]["state"] != "permission_prompt", "the prompt to go away", on_fail=d.screen)
    time.sleep(1.0)
    assert not (d.repo / "proof.txt").exists()
    assert d.get(f"/tasks/{task_id}")["state"] == "in_progress"
    assert d.get(f"/decisions/{decision['id']}")["status"] == "rejected"


@pytest.mark.parametrize("cli", CLIS)
def test_killed_agent_is_resumed_twice_then_the_task_is_blocked(cli: Cli, run_daemon: Callable[..., Daemon]) -> None:
    d = run_daemon(cli)
    task_id = d.create_task("Start the work. RUN: echo started > started.txt")
    for attempt in (1, 2, 3):
        name = f"elowen-t{task_id}-a{attempt}"
        d.pending(task_id)  # the agent is up and has talked to the model
        session = d.get(f"/sessions/{name}")
        assert session["state"] == "running" and session["pid"]
        os.kill(session["pid"], signal.SIGKILL)
        if attempt < 3:
            nxt = f"elowen-t{task_id}-a{attempt + 1}"
            wait(lambda nxt=nxt: d.get(f"/sessions/{nxt}") if _exists(d, nxt) else None, f"relaunch {attempt}", on_fail=d.screen)
            note = d.get(f"/tasks/{task_id}")["resume_note"]
            assert f"Attempt {attempt}" in note and f"Relaunch {attempt} of 2" in note
    task = wait(lambda: (lambda t: t if t["state"] == "blocked" else None)(d.get(f"/tasks/{task_id}")), "blocked", on_fail=d.screen)
    assert task["attempts"] == 3 and "Blocked after 2 relaunches" in task["resume_note"]
    spawned = [e for e in d.events("agent.spawned") if e["task_id"] == task_id]
    assert [e["attempt"] for e in spawned] == [1, 2, 3]
    assert spawned[1]["resumed"] and spawned[2]["resumed"], spawned
    # the resumed CLI sent the previous conversation to the model again
    prompts = [r for r in d.model.requests if r.has_tools and json.dumps(r.body).count(f"Elowen task #{task_id}") >= 2]
    assert prompts, "no request carried the earlier conversation"


def _exists(d: Daemon, name: str) -> bool:
    with d.api() as c:
        return c.get(f"/sessions/{name}").status_code == 200


@pytest.mark.parametrize("trust", [True, False], ids=["preseeded", "dialog"])
def test_claude_trust_dialog(trust: bool, run_daemon: Callable[..., Daemon]) -> None:
    d = run_daemon("claude", trust=trust)
    task_id = d.create_task("Start the work. RUN: echo started > started.txt")
    d.pending(task_id)  # past the trust dialog: the permission prompt is up
    auto = [x for x in d.get("/decisions", task=task_id)["items"] if x["decided_by"] == "elowen:auto-trust"]
    assert len(auto) == (0 if trust else 1)
    config = json.loads((d.repo.parent / "agent-home" / ".claude.json").read_text())
    assert config["projects"][str(d.repo)]["hasTrustDialogAccepted"] is True

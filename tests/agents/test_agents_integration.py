"""The agents plugin in a real kernel with real tmux (a private socket per test) and a fake
agent (``fake_agent.py``: real captured Claude Code screens, real keys read from its tty).

The daemon's task service is registered as kernel service ``tasks`` exactly as the daemon does
(``elowen.daemon.server``); no HTTP here (the e2e tests use the daemon).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from elowen_sdk import Service
from elowen_sdk.testing import plugin_kernel

from elowen.daemon.execspec import resolve
from elowen.daemon.services.tasks import TaskService
from elowen_builtins.agents.decisions import Verdict
from elowen_builtins.agents.screen import classify

from tests.support.fake_cli import fake_claude, private_tmux_socket
from tests.support.waiting import until
SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "claude"
FAST = {
    "scheduler_interval": 0.5,
    "sweep_interval": 0.5,
    "liveness_interval": 0.2,
    "stuck_interval": 0.2,
    "janitor_interval": 0.2,
}


class World:
    """A kernel with tmux, claude-code (pointed at the fake agent) and agents enabled."""

    def __init__(self, kernel: Any, tmp: Path, socket: str, log: Path) -> None:
        self.kernel = kernel
        self.tmp = tmp
        self.socket = socket
        self.log = log
        self.store = kernel.store
        svc = kernel.contributions.all("service").get("tasks")
        self.tasks: TaskService = svc.obj.obj if svc else TaskService(kernel.store, kernel.events, resolve)
        if svc is None:
            kernel.contributions.add("kernel", "service", Service("tasks", self.tasks), [])
        self.repo = tmp / "repo"
        self.repo.mkdir(exist_ok=True)
        row = self.store.query_one("SELECT id FROM projects WHERE path = ?", (str(self.repo),))
        self.project = row["id"] if row else self.store.execute(
            "INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(self.repo),)
        )

    @property
    def agents(self) -> Any:
        return self.kernel.contributions.get("service", "agents").obj.obj

    def log_events(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def events(self, type_: str) -> list[dict[str, Any]]:
        rows = self.store.query("SELECT data FROM events WHERE type = ? ORDER BY id", (type_,))
        return [json.loads(r["data"]) for r in rows]

    def create_task(self, title: str = "Do it") -> int:
        return int(self.tasks.create(title=title, project_id=self.project, exec="claude:fake", description="Run the thing.")["id"])

    def sessions(self, task_id: int) -> list[dict[str, Any]]:
        return self.store.query("SELECT * FROM agent_sessions WHERE task_id = ? ORDER BY attempt", (task_id,))

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False)


@pytest.fixture
def socket_name() -> Any:
    with private_tmux_socket() as name:
        yield name


@asynccontextmanager
async def world(tmp: Path, socket: str, *, env: dict[str, str] | None = None, agents: dict[str, Any] | None = None) -> AsyncIterator[World]:
    log = tmp / "fake.log"
    config = {
        "tmux": {"socket": socket, "enter_delay": 0.05},
        "claude-code": {"binary": str(fake_claude(tmp)), "env": {"FAKE_LOG": str(log), **(env or {})}},
        "agents": {**FAST, **(agents or {})},
    }
    async with plugin_kernel(tmp, enable=["agents", "tmux", "claude-code"], config=config) as kernel:
        w = World(kernel, tmp, socket, log)
        await until(lambda: w.agents.ready.is_set(), what="agents ready")
        yield w


async def pending(w: World, task_id: int, n: int = 1) -> list[dict[str, Any]]:
    return await until(lambda: (lambda ds: ds if len(ds) >= n else None)(w.agents.decisions.list(task_id=task_id, status="pending")), what=f"{n} pending decision(s)")


async def test_prompt_becomes_decision_and_approval_sends_keys(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        [decision] = await pending(w, task_id)
        assert decision["kind"] == "prompt"
        assert decision["payload"]["request"]["command"].startswith("echo hello-from-fake")
        [session] = w.sessions(task_id)
        assert session["session"] == f"elowen-t{task_id}-a1" and session["state"] == "running"
        assert w.tasks.get(task_id)["state"] == "in_progress"
        assert any(e["signal"] == "needs_input" and e["request"]["state"] == "permission_prompt" for e in w.events("signal"))
        # ELOWEN_TOKEN went in through the environment (tmux -e), never onto the screen or into the row
        assert "ELOWEN_TOKEN" not in session["env"]
        decided = await w.agents.decide(decision["id"], "approve")
        assert decided["status"] == "approved" and decided["answer"]["keys"] == ["1"]
        await until(lambda: any(e["event"] == "idle" for e in w.log_events()), what="agent idle")
        assert [e["key"] for e in w.log_events() if e["event"] == "key"] == ["1"]
        await until(lambda: any(e["signal"] == "complete" for e in w.events("signal")), what="complete signal")
        # answering twice is refused
        with pytest.raises(Exception) as exc:
            await w.agents.decide(decision["id"], "approve")
        assert getattr(exc.value, "status", None) == 409
        # closing the task: the janitor ends the session
        w.tasks.close(task_id, "done", ["test"])
        await until(lambda: w.sessions(task_id)[0]["state"] == "ended", what="session ended")
        assert w.tmux("has-session", "-t", f"={session['session']}").returncode != 0


async def test_two_identical_prompts_in_a_row_are_both_answered(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, env={"FAKE_PROMPTS": "2"}) as w:
        task_id = w.create_task()
        [first] = await pending(w, task_id)
        await w.agents.decide(first["id"], "approve")
        second = await until(lambda: [d for d in w.agents.decisions.list(task_id=task_id, status="pending") if d["id"] != first["id"]], what="second decision")
        assert second[0]["payload"]["fingerprint"] == first["payload"]["fingerprint"]
        assert second[0]["payload"]["instance"] == first["payload"]["instance"] + 1
        await w.agents.decide(second[0]["id"], "approve")
        await until(lambda: any(e["event"] == "idle" for e in w.log_events()), what="agent idle")
        assert [e["key"] for e in w.log_events() if e["event"] == "key"] == ["1", "1"]
        assert len(w.agents.decisions.list(task_id=task_id)) == 2


async def test_reject_sends_the_reject_key(tmp_path: Path, socket_name: str) -> None:
    expected = list(classify("claude", (SCREENS / "06_permission_prompt.txt").read_text()).reject_keys)
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        [decision] = await pending(w, task_id)
        decided = await w.agents.decide(decision["id"], "reject", rationale="no")
        assert decided["status"] == "rejected" and decided["rationale"] == "no"
        await until(lambda: any(e["event"] == "key" for e in w.log_events()), what="key")
        keys = [e["key"] for e in w.log_events() if e["event"] == "key"]
        assert keys == ["Escape" if expected == ["Escape"] else expected[0]]


async def test_gate_auto_decides(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        seen: list[int] = []

        async def gate(decision: Any) -> Verdict:
            seen.append(decision["id"])
            return Verdict("approve", confidence=0.9, rationale="harmless echo", decided_by="overseer")

        w.kernel.contributions.get("service", "decisions").obj.obj.set_gate(gate)
        task_id = w.create_task()
        decision = await until(lambda: [d for d in w.agents.decisions.list(task_id=task_id) if d["status"] == "approved"], what="gate approval")
        assert decision[0]["decided_by"] == "overseer" and decision[0]["confidence"] == 0.9
        assert seen == [decision[0]["id"]]
        await until(lambda: [e for e in w.log_events() if e["event"] == "key"], what="key sent")


async def test_trust_dialog_is_accepted_after_checking_the_selection(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, env={"FAKE_TRUST": "1"}) as w:
        task_id = w.create_task()
        await pending(w, task_id)  # the permission prompt after the trust dialog
        trust = [e for e in w.log_events() if e["event"] == "trust_key"]
        assert trust == [dict(trust[0], key="Enter")]
        auto = [d for d in w.agents.decisions.list(task_id=task_id) if d["decided_by"] == "elowen:auto-trust"]
        assert len(auto) == 1 and auto[0]["payload"]["state"] == "trust_prompt"


async def test_killed_agent_is_relaunched_twice_then_blocked(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        for attempt in (1, 2, 3):
            row = await until(lambda: (lambda s: s[-1] if len(s) == attempt and s[-1]["pid"] else None)(w.sessions(task_id)), what=f"attempt {attempt}")
            await pending(w, task_id)  # the agent runs and shows its prompt
            os.kill(row["pid"], signal.SIGKILL)
            if attempt < 3:
                await until(lambda: w.tasks.get(task_id)["state"] in ("open", "in_progress") and len(w.sessions(task_id)) == attempt + 1, what="relaunch")
                note = w.tasks.get(task_id)["resume_note"]
                assert f"Attempt {attempt}" in note and f"Relaunch {attempt} of 2" in note
        await until(lambda: w.tasks.get(task_id)["state"] == "blocked", what="blocked")
        task = w.tasks.get(task_id)
        assert task["attempts"] == 3 and "Blocked after 2 relaunches" in task["resume_note"]
        assert [s["state"] for s in w.sessions(task_id)] == ["exited", "exited", "exited"]
        # the killed agents' prompts can no longer be answered
        assert not w.agents.decisions.list(task_id=task_id, status="pending")


async def test_restart_readopts_live_agent_without_a_second_spawn(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        [decision] = await pending(w, task_id)
    # the kernel is gone; the agent still runs in tmux
    assert subprocess.run(["tmux", "-L", socket_name, "has-session", "-t", f"=elowen-t{task_id}-a1"], check=False).returncode == 0
    async with world(tmp_path, socket_name) as w:
        await until(lambda: w.events("agent.adopted"), what="adoption")
        await trio.sleep(0.6)  # a scheduler tick and a sweep pass
        assert len(w.sessions(task_id)) == 1
        decisions = w.agents.decisions.list(task_id=task_id)
        assert [d["id"] for d in decisions] == [decision["id"]] and decisions[0]["status"] == "pending"
        await w.agents.decide(decision["id"], "approve")
        await until(lambda: any(e["event"] == "idle" for e in w.log_events()), what="agent idle")


async def test_agent_that_died_while_down_is_reconciled_on_start(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, agents={"max_relaunches": 0}) as w:
        task_id = w.create_task()
        await pending(w, task_id)
        pid = w.sessions(task_id)[0]["pid"]
    os.kill(pid, signal.SIGKILL)
    async with world(tmp_path, socket_name, agents={"max_relaunches": 0}) as w:
        await until(lambda: w.tasks.get(task_id)["state"] == "blocked", what="blocked at start")
        assert not w.events("agent.adopted")


async def test_stalled_agent_raises_one_check_per_episode(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, agents={"idle_after": 0.3, "stall_after": 1.0}) as w:
        task_id = w.create_task()
        [prompt] = await pending(w, task_id)
        await trio.sleep(1.5)  # stalled at a prompt that waits for us: no check (a decision is open)
        assert [d["kind"] for d in w.agents.decisions.list(task_id=task_id)] == ["prompt"]
        await w.agents.decide(prompt["id"], "approve")
        [check] = await until(lambda: w.agents.decisions.list(task_id=task_id, kind="check"), what="a check decision")
        assert check["payload"]["reason"] == "stalled" and check["payload"]["state"] == "idle"
        await trio.sleep(1.5)  # still the same stall episode
        assert len(w.agents.decisions.list(task_id=task_id, kind="check")) == 1
        decided = await w.agents.decide(check["id"], "approve", rationale="it is thinking")
        assert decided["status"] == "approved"
        # a check that ends the agent: the stuck detector then relaunches it
        w.agents.decisions.create("check", task_id=task_id, session=check["session"], payload={"reason": "test"})
        [second] = w.agents.decisions.list(task_id=task_id, kind="check", status="pending")
        await w.agents.decide(second["id"], "reject")
        await until(lambda: len(w.sessions(task_id)) == 2, what="relaunch after the check was rejected")


async def test_missing_cli_blocks_at_once_with_a_clear_note(tmp_path: Path, socket_name: str) -> None:
    """A CLI that is not installed is not retried (it would only fail the same way): the task
    is blocked at once with a note saying what to install or configure, and nothing is spawned."""
    async with world(tmp_path, socket_name) as w:
        await w.kernel.registry.configure("claude-code", {"binary": "claude-not-installed-here"})
        task_id = w.create_task()
        await until(lambda: w.tasks.get(task_id)["state"] == "blocked", what="blocked")
        note = w.tasks.get(task_id)["resume_note"]
        assert "'claude-not-installed-here' is not installed or not on the PATH" in note
        assert "elowen plugin config claude-code binary=" in note
        assert w.tasks.get(task_id)["attempts"] == 1
        assert "elowen-t" not in w.tmux("list-sessions", "-F", "#{session_name}").stdout


async def test_failed_spawn_never_kills_a_session_it_does_not_own(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        # a session with the name the next agent would get, not created by this kernel
        w.tmux("new-session", "-d", "-s", "elowen-t1-a1", "sleep 600")
        task_id = w.create_task()
        await until(lambda: w.sessions(task_id) and w.sessions(task_id)[0]["state"] == "exited", what="spawn failure recorded")
        assert w.tmux("has-session", "-t", "=elowen-t1-a1:").returncode == 0, "the foreign session must survive"

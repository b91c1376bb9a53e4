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
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen.daemon.auth import Access
from elowen.daemon.services.tasks import TaskService
from elowen.daemon.services.users import UserService, UsersHostService
from elowen_builtins.agents.screen import classify
from elowen_sdk import Service
from elowen_sdk.services.agents import DecideError
from elowen_sdk.testing import plugin_kernel
from tests.support.executors import kernel_resolver
from tests.support.fake_cli import fake_claude, private_tmux_socket
from tests.support.waiting import until

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "claude"
FAST = {
    "scheduler_interval": 0.5,
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
        self.tasks: TaskService = svc.obj.obj if svc else TaskService(kernel.store, kernel.events, kernel_resolver(kernel))
        if svc is None:
            kernel.contributions.add("kernel", "service", Service("tasks", self.tasks), [])
        if kernel.contributions.all("service").get("users") is None:  # the daemon's agent tokens
            users = UsersHostService(UserService(kernel.store, Access(kernel.store)))
            kernel.contributions.add("kernel", "service", Service("users", users), [])
        self.repo = tmp / "repo"
        self.repo.mkdir(exist_ok=True)
        row = self.store.query_one("SELECT id FROM projects WHERE path = ?", (str(self.repo),))
        self.project = (
            row["id"]
            if row
            else self.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(self.repo),))
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
        "deriver": {"sweep_interval": 0.5},
    }
    async with plugin_kernel(tmp, enable=["agents", "deriver", "tmux", "claude-code"], config=config) as kernel:
        w = World(kernel, tmp, socket, log)
        await until(lambda: w.agents.ready.is_set(), what="agents ready")
        yield w


async def pending(w: World, task_id: int, n: int = 1) -> list[dict[str, Any]]:
    return await until(
        lambda: (lambda ds: ds if len(ds) >= n else None)(w.agents.decisions.list_decisions(task_id=task_id, status="pending")), what=f"{n} pending decision(s)"
    )


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
        # ELOWEN_TOKEN (an agent token from the users service) went in through the environment
        # (tmux -e), never onto the screen or into the row
        assert w.store.query_one("SELECT COUNT(*) AS n FROM tokens WHERE scope = 'agent' AND task_id = ?", (task_id,))["n"] == 1
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
        second = await until(
            lambda: [d for d in w.agents.decisions.list_decisions(task_id=task_id, status="pending") if d["id"] != first["id"]], what="second decision"
        )
        assert second[0]["payload"]["fingerprint"] == first["payload"]["fingerprint"]
        assert second[0]["payload"]["instance"] == first["payload"]["instance"] + 1
        await w.agents.decide(second[0]["id"], "approve")
        await until(lambda: any(e["event"] == "idle" for e in w.log_events()), what="agent idle")
        assert [e["key"] for e in w.log_events() if e["event"] == "key"] == ["1", "1"]
        assert len(w.agents.decisions.list_decisions(task_id=task_id)) == 2


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


async def test_a_decision_path_answers_from_the_created_event(tmp_path: Path, socket_name: str) -> None:
    """No gate callback: a decision path learns of a decision from ``decision.created`` and
    answers through the ``decisions`` service; the agents side sends the keys."""
    async with world(tmp_path, socket_name) as w:
        seen: list[int] = []
        decisions = w.kernel.contributions.get("service", "decisions").obj.obj

        async def path() -> None:
            async with w.kernel.events.subscribe(types=["decision.created"]) as events:
                async for event in events:
                    seen.append(event.data["decision"]["id"])
                    await decisions.decide(event.data["decision"]["id"], "approve", confidence=0.9, rationale="harmless echo", decided_by="overseer")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(path)
            task_id = w.create_task()
            decision = await until(lambda: [d for d in w.agents.decisions.list_decisions(task_id=task_id) if d["status"] == "approved"], what="path approval")
            assert decision[0]["decided_by"] == "overseer" and decision[0]["confidence"] == 0.9
            assert decision[0]["answer"]["keys"] == ["1"]
            assert seen == [decision[0]["id"]]
            await until(lambda: [e for e in w.log_events() if e["event"] == "key"], what="key sent")
            nursery.cancel_scope.cancel()


async def test_trust_dialog_is_accepted_after_checking_the_selection(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, env={"FAKE_TRUST": "1"}) as w:
        task_id = w.create_task()
        await pending(w, task_id)  # the permission prompt after the trust dialog
        trust = [e for e in w.log_events() if e["event"] == "trust_key"]
        assert trust == [dict(trust[0], key="Enter")]
        auto = [d for d in w.agents.decisions.list_decisions(task_id=task_id) if d["decided_by"] == "elowen:auto-trust"]
        assert len(auto) == 1 and auto[0]["payload"]["state"] == "trust_prompt"
        # recorded already approved: no decision path ever saw it pending
        [created] = [e["decision"] for e in w.events("decision.created") if e["decision"]["id"] == auto[0]["id"]]
        assert created["status"] == "approved" and created["answer"]["keys"] == ["Enter"]


async def test_killed_agent_is_relaunched_twice_then_blocked(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        for attempt in (1, 2, 3):
            row = await until(lambda: (lambda s: s[-1] if len(s) == attempt and s[-1]["pid"] else None)(w.sessions(task_id)), what=f"attempt {attempt}")  # noqa: B023 (awaited at once)
            await pending(w, task_id)  # the agent runs and shows its prompt
            os.kill(row["pid"], signal.SIGKILL)
            if attempt < 3:
                await until(lambda: w.tasks.get(task_id)["state"] in ("open", "in_progress") and len(w.sessions(task_id)) == attempt + 1, what="relaunch")  # noqa: B023
                note = w.tasks.get(task_id)["resume_note"]
                assert f"Attempt {attempt}" in note and f"Relaunch {attempt} of 2" in note
        await until(lambda: w.tasks.get(task_id)["state"] == "blocked", what="blocked")
        task = w.tasks.get(task_id)
        assert task["attempts"] == 3 and "Blocked after 2 relaunches" in task["resume_note"]
        assert [s["state"] for s in w.sessions(task_id)] == ["exited", "exited", "exited"]
        # the killed agents' prompts can no longer be answered
        assert not w.agents.decisions.list_decisions(task_id=task_id, status="pending")


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
        decisions = w.agents.decisions.list_decisions(task_id=task_id)
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
        assert [d["kind"] for d in w.agents.decisions.list_decisions(task_id=task_id)] == ["prompt"]
        await w.agents.decide(prompt["id"], "approve")
        [check] = await until(lambda: w.agents.decisions.list_decisions(task_id=task_id, kind="check"), what="a check decision")
        assert check["payload"]["reason"] == "stalled" and check["payload"]["state"] == "idle"
        await trio.sleep(1.5)  # still the same stall episode
        assert len(w.agents.decisions.list_decisions(task_id=task_id, kind="check")) == 1
        decided = await w.agents.decide(check["id"], "approve", rationale="it is thinking")
        assert decided["status"] == "approved"
        # a check that ends the agent: the stuck detector then relaunches it
        w.agents.decisions.create("check", task_id=task_id, session=check["session"], payload={"reason": "test"})
        [second] = w.agents.decisions.list_decisions(task_id=task_id, kind="check", status="pending")
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


async def test_services_conform_to_their_contracts(tmp_path: Path, socket_name: str) -> None:
    from elowen_sdk.contracts import missing_members
    from elowen_sdk.services.agents import AgentsService, DecisionsService, DeriverService

    async with world(tmp_path, socket_name) as w:
        for name, contract in (("agents", AgentsService), ("decisions", DecisionsService), ("deriver", DeriverService)):
            assert missing_members(w.kernel.contributions.get("service", name).obj.obj, contract) == [], name


async def test_sessions_say_whether_a_deriver_watches_them(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        await pending(w, task_id)
        name = f"elowen-t{task_id}-a1"
        row = w.agents.session(name)
        assert row["supervised"] is True and row["signal"] == "needs_input" and isinstance(row["env"], dict)
        assert [r["session"] for r in w.agents.sessions(task_id=task_id, state="running")] == [name]
        assert w.agents.session("elowen-t999-a1") is None
        await w.kernel.registry.disable("deriver")
        row = w.agents.session(name)
        assert row["state"] == "running" and row["supervised"] is False and row["signal"] == "unsupervised"


async def test_answers_check_the_screen_themselves_without_a_deriver(tmp_path: Path, socket_name: str) -> None:
    """The agents side checks the prompt is still on screen before sending keys, deriver or
    not: answered with the deriver off, keys go; answered after the prompt was answered in the
    terminal (nobody expired the decision), nothing is typed and the decision expires."""
    async with world(tmp_path, socket_name, env={"FAKE_PROMPTS": "2"}) as w:
        task_id = w.create_task()
        [first] = await pending(w, task_id)
        await w.kernel.registry.disable("deriver")
        decided = await w.agents.decide(first["id"], "approve")
        assert decided["status"] == "approved" and decided["answer"]["keys"] == ["1"]
        # the second prompt: nobody turns it into a decision; a human answers it in the terminal
        await until(lambda: len([e for e in w.log_events() if e["event"] == "prompt"]) == 2, what="second prompt")
        w.tmux("send-keys", "-t", f"=elowen-t{task_id}-a1:", "1")
        await until(lambda: any(e["event"] == "idle" for e in w.log_events()), what="agent idle")
        assert [d["id"] for d in w.agents.decisions.list_decisions(task_id=task_id)] == [first["id"]]
        # a stale decision for it (no deriver expired it): refused, nothing typed
        stale = w.agents.decisions.create("prompt", task_id=task_id, session=f"elowen-t{task_id}-a1", payload=first["payload"])
        keys_before = [e["key"] for e in w.log_events() if e["event"] == "key"]
        with pytest.raises(DecideError) as exc:
            await w.agents.decide(stale["id"], "approve")
        assert exc.value.status == 409 and exc.value.code == "prompt_gone"
        assert w.agents.decisions.get(stale["id"])["status"] == "expired"
        await trio.sleep(0.3)
        assert [e["key"] for e in w.log_events() if e["event"] == "key"] == keys_before == ["1", "1"]


async def test_spawn_session_starts_a_cli_outside_the_scheduler(tmp_path: Path, socket_name: str) -> None:
    from elowen_sdk.services.agents import SpawnError

    async with world(tmp_path, socket_name) as w:
        work = tmp_path / "mission-1"
        work.mkdir()
        out = await w.agents.spawn_session(
            "elowen-ov-m1-1", "claude:fake", prompt="watch the mission", cwd=str(work), env={"ELOWEN_TOKEN": "secret", "ELOWEN_MISSION": "1"}
        )
        assert out["session"] == "elowen-ov-m1-1" and out["provider"] == "claude" and out["model"] == "fake" and out["pane_id"].startswith("%")
        assert w.tmux("has-session", "-t", "=elowen-ov-m1-1").returncode == 0
        env = w.tmux("show-environment", "-t", "=elowen-ov-m1-1").stdout
        assert "ELOWEN_MISSION=1" in env and f"ELOWEN_URL={w.agents.daemon_url()}" in env
        assert str(Path(sys.executable).parent) in next(line for line in env.splitlines() if line.startswith("PATH="))
        assert w.store.query("SELECT * FROM agent_sessions") == []  # not a task's agent
        with pytest.raises(SpawnError):
            await w.agents.spawn_session("elowen-ov-m1-2", "nosuchcli", prompt="x", cwd=str(work), env={})
        await w.kernel.registry.configure("claude-code", {"binary": "claude-not-installed-here"})
        with pytest.raises(SpawnError, match="not installed"):
            await w.agents.spawn_session("elowen-ov-m1-3", "claude:fake", prompt="x", cwd=str(work), env={})


async def test_close_then_reopen_at_once_never_runs_two_agents(tmp_path: Path, socket_name: str) -> None:
    """A task closed and reopened before the janitor ran: its old agent is ended (``task
    reopened``) before a new attempt starts; never two running sessions of one task."""
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        await pending(w, task_id)
        first = w.sessions(task_id)[0]
        w.tasks.close(task_id, "done", ["test"])
        w.tasks.update(task_id, {"state": "open"})  # in the same trio step: no janitor ran between
        both = await until(lambda: (s := w.sessions(task_id)) and len(s) == 2 and s, what="a second attempt")
        old = next(s for s in both if s["session"] == first["session"])
        new = next(s for s in both if s["session"] != first["session"])
        assert old["state"] == "ended" and old["end_reason"] == "task reopened"
        assert old["ended_at"] <= new["started_at"] and new["attempt"] == 2
        assert w.tmux("has-session", "-t", f"={first['session']}").returncode != 0

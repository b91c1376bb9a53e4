"""End to end: the daemon runs tasks of missions on the REAL OpenCode CLI in tmux, and the
overseer decides its permission prompts — through the relay (the scripted model server plays
the overseer's model) and through a parked overseer that is itself a real OpenCode CLI running
``elowen overseer poll`` / ``elowen overseer decide``.

The agent's model runs the ``RUN: <cmd>`` commands at the end of the task description
(``DefaultScript``)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e._overseer_daemon import Daemon, OverseerScript, start, wait
from tests.support.model_server import ModelServer

pytestmark = pytest.mark.slow


def close_command(marker: str) -> str:
    return f'RUN: echo {marker} > proof.txt && elowen close $ELOWEN_TASK --summary "wrote proof.txt" --evidence "proof.txt contains {marker}"'


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(OverseerScript()) as server:
        yield server


@pytest.fixture
def daemon(tmp_path: Path, model: ModelServer) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(overseer_cli: str | None = None, sandbox: bool = True, **overseer: object) -> Daemon:
        d = start(tmp_path, model, overseer, overseer_cli=overseer_cli, sandbox=sandbox)
        started.append(d)
        return d

    try:
        yield make
    finally:
        for d in started:
            d.stop()


def test_relay_l1_approves_0_9_escalates_0_7_and_l2_approves_0_7(daemon: Callable[..., Daemon], model: ModelServer) -> None:
    script: OverseerScript = model.script  # type: ignore[assignment]
    d = daemon()
    mission = d.mission(1)
    marker = f"ok-{uuid.uuid4().hex[:6]}"
    done = d.task(mission["id"], f"Write the proof file, then close the task. {close_command(marker)}")
    approved = d.decision(done, ("approved", "escalated"))
    assert approved["status"] == "approved" and approved["confidence"] == 0.9, approved
    assert approved["decided_by"] == "overseer:relay:fake/fake-model"
    task = wait(lambda: (t := d.get(f"/tasks/{done}"))["state"] == "closed" and t, "the agent closed its task", on_fail=d.screen)
    assert (d.repo / "proof.txt").read_text().strip() == marker and task["evidence"] == [f"proof.txt contains {marker}"]
    review = d.decision(done, "approved", kind="review")  # the closed task was reviewed and accepted
    assert review["decided_by"] == "overseer:relay:fake/fake-model"

    script.verdict = {"prompt": {"approve": True, "confidence": 0.7, "rationale": "probably fine"}}
    unsure = d.task(mission["id"], "Look around. RUN: ls -la")
    escalated = d.decision(unsure, ("approved", "escalated"))
    assert escalated["status"] == "escalated" and escalated["confidence"] == 0.7
    assert [e["id"] for e in d.get("/escalations")["items"]] == [escalated["id"]]

    assert "L2" in d.cli("mission", "level", str(mission["id"]), "L2").stdout
    at_l2 = d.task(mission["id"], "Look around again. RUN: ls")
    passed = d.decision(at_l2, ("approved", "escalated"))
    assert passed["status"] == "approved" and passed["confidence"] == 0.7
    # a human answers the escalation from the inbox: the keys reach the agent
    out = d.cli("escalations", "answer", str(escalated["id"]), "--approve")
    assert out.returncode == 0 and "approved" in out.stdout, out.stderr
    assert d.get(f"/decisions/{escalated['id']}")["answer"]["keys"]


def test_destructive_command_escalates_at_l3_with_confidence_1(daemon: Callable[..., Daemon], model: ModelServer) -> None:
    script: OverseerScript = model.script  # type: ignore[assignment]
    script.verdict = {"prompt": {"approve": True, "confidence": 1.0, "rationale": "sure"}}
    d = daemon()
    mission = d.mission(3)
    task_id = d.task(mission["id"], "Publish. RUN: git push --force origin main")
    decision = d.decision(task_id, ("approved", "escalated"))
    assert decision["status"] == "escalated" and decision["confidence"] == 1.0 and decision["decided_by"] == "overseer:rules"
    assert "git-force-push" in decision["rationale"]
    assert not [r for r in model.requests if r.json_schema is not None and "git push" in str(r.body)]


def test_l0_dispatches_nothing_until_the_level_rises(daemon: Callable[..., Daemon]) -> None:
    d = daemon()
    mission = d.mission(0)
    task_id = d.task(mission["id"], "Look around. RUN: ls")
    time.sleep(4)  # several scheduler ticks
    assert d.get("/sessions", task=task_id)["items"] == []
    assert d.get(f"/tasks/{task_id}")["state"] == "open"
    d.patch(f"/missions/{mission['id']}", {"level": "L1"})
    approved = d.decision(task_id, ("approved", "escalated"))
    assert approved["status"] == "approved"


@pytest.mark.parametrize("overseer_exec", ["opencode:fake/fake-model", "claude:fake-model"])
def test_parked_overseer_cli_decides_and_killing_it_escalates(daemon: Callable[..., Daemon], overseer_exec: str) -> None:
    d = daemon(overseer_cli=overseer_exec.split(":")[0], overseer_exec=overseer_exec)
    mission = d.mission(1)
    agent = wait(lambda: [a for a in d.get("/overseer/agents")["items"] if a["state"] == "running"], "the overseer agent", on_fail=d.screen)[0]
    marker = f"ok-{uuid.uuid4().hex[:6]}"
    task_id = d.task(mission["id"], f"Write the proof file. {close_command(marker)}")
    decision = d.decision(task_id, ("approved", "escalated"))
    assert decision["status"] == "approved", (decision, d.screen())
    assert decision["decided_by"] == f"overseer:agent:overseer-m{mission['id']}" and decision["confidence"] == 0.9
    wait(lambda: d.get(f"/tasks/{task_id}")["state"] == "closed", "the agent closed its task", on_fail=d.screen)
    assert (d.repo / "proof.txt").read_text().strip() == marker

    held = d.task(mission["id"], "Look around. HOLD RUN: ls -la")
    pending = d.decision(held, "pending")
    wait(lambda: d.get(f"/decisions/{pending['id']}")["status"] == "pending" and _claimed(d, pending["id"]), "the overseer to poll it", on_fail=d.screen)
    d.tmux("kill-session", "-t", f"={agent['session']}")
    escalated = d.decision(held, "escalated")
    assert "overseer agent is gone" in escalated["rationale"] and escalated["decided_by"] == "overseer:liveness"
    wait(
        lambda: [a for a in d.get("/overseer/agents")["items"] if a["state"] == "running" and a["id"] != agent["id"]], "a restarted overseer", on_fail=d.screen
    )


def _claimed(d: Daemon, decision_id: int) -> bool:
    import apsw

    conn = apsw.Connection(str(d.home / "elowen.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = list(conn.execute("SELECT claimed_at FROM overseer_queue WHERE decision_id = ?", (decision_id,)))
    finally:
        conn.close()
    return bool(rows and rows[0][0])


@pytest.mark.skipif(os.geteuid() != 0, reason="Claude Code only refuses to skip permissions when run as root")
def test_an_overseer_cli_that_exits_at_once_says_why(daemon: Callable[..., Daemon]) -> None:
    d = daemon(overseer_cli="claude", sandbox=False, overseer_exec="claude:fake-model", max_overseer_restarts=0)
    d.mission(1)
    dead = wait(lambda: [a for a in d.get("/overseer/agents")["items"] if a["state"] == "dead"], "the overseer agent's death", on_fail=d.screen)[0]
    reason = dead["end_reason"]
    assert reason.startswith("the overseer CLI exited"), dead
    # its last words, when tmux read them before the exit (a CLI that prints and exits in the
    # same instant can lose its output in the pty; tests/overseer/test_parked.py checks the
    # last words with a CLI that lingers a moment)
    assert ": " not in reason or "root/sudo privileges" in reason, dead

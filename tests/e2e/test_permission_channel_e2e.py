"""End to end: the REAL Claude Code 2.1.197 (installed by ``scripts/install-test-deps``) under
the daemon, in tmux and bubblewrap, against the scripted model server. Its permission requests
arrive through the structured channel (the ``PermissionRequest`` http hook Elowen configures
with ``--settings``, posting to ``POST /agent/permission`` on 127.0.0.1 from inside the sandbox)
and its verdicts go back through it; it reaches Elowen's MCP server (``--mcp-config``, token
from the environment) and closes its task with the ``close`` tool.

The scripted model runs the ``RUN: <cmd>`` commands of the task description one by one, then,
with ``CLOSE`` in the description, calls ``mcp__elowen__close``.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._overseer_daemon import Daemon, start, wait
from tests.support.model_server import ModelServer, ParsedRequest, Reply, ToolCall, shell_tool_call

pytestmark = pytest.mark.slow

CLOSE_TOOL = "mcp__elowen__close"
_RUN = re.compile(r"RUN:\s*(.+?)(?=\s+RUN:|\s+CLOSE\b|$)", re.MULTILINE)


@dataclass
class ChannelScript:
    """Claude's model and the overseer relay's model (``verdict`` per decision kind)."""

    verdict: dict[str, dict[str, Any]] = field(default_factory=lambda: {"prompt": {"approve": True, "confidence": 0.7, "rationale": "harmless"}})

    def __call__(self, request: ParsedRequest) -> Reply:
        messages = request.body.get("messages") or []
        system = str(messages[0].get("content")) if messages else ""
        if request.json_schema is not None and "You are the overseer of Elowen" in system:
            kind = str(request.body.get("response_format", {}).get("json_schema", {}).get("name", "")).removeprefix("overseer_")
            return Reply(text=json.dumps(self.verdict.get(kind) or {"approve": True, "confidence": 0.95, "rationale": "fine", "note": ""}))
        if not request.has_tools:
            return Reply(text="Fake session title")
        prompt = request.prompt
        commands = [m.strip() for m in _RUN.findall(prompt)]
        step = len(request.tool_results)
        if step < len(commands):
            return Reply(text="FAKE: I will run a shell command.", tool_calls=(shell_tool_call(request, commands[step]),))
        if re.search(r"\bCLOSE\b", prompt) and step == len(commands) and CLOSE_TOOL in request.tool_names:
            summary = {"summary": "ran the commands", "evidence": ["proof.txt written", "closed through MCP"]}
            return Reply(text="FAKE: closing through MCP.", tool_calls=(ToolCall(CLOSE_TOOL, summary),))
        return Reply(text="FAKE: done.")


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(ChannelScript()) as server:
        yield server


@pytest.fixture
def daemon(tmp_path: Path, model: ModelServer) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(**overseer: object) -> Daemon:
        d = start(tmp_path, model, overseer, cli="claude")
        started.append(d)
        return d

    try:
        yield make
    finally:
        for d in started:
            d.stop()


def task(d: Daemon, mission_id: int | None, description: str) -> int:
    body = {"title": "channel task", "project_id": d.project, "exec": "claude:fake-model", "description": description}
    if mission_id is not None:
        body["labels"] = [f"mission:{mission_id}"]
    task_id = int(d.post("/tasks", body)["id"])
    if mission_id is not None:
        d.post(f"/missions/{mission_id}/tasks", {"task_ids": [task_id]})
    return task_id


def channel_decision(d: Daemon, task_id: int, status: str | tuple[str, ...]) -> dict[str, Any]:
    """The task's prompt decision in ``status`` once the channel holds it (when the deriver
    saw the dialog first, the channel's request takes that decision over a moment later)."""
    wanted = (status,) if isinstance(status, str) else status

    def find() -> Any:
        items = [x for x in prompts(d, task_id) if x["status"] in wanted and x["payload"].get("channel")]
        return items[0] if items else None

    return wait(find, f"a channel prompt decision of task {task_id} in {wanted}", on_fail=d.screen)  # type: ignore[no-any-return]


def prompts(d: Daemon, task_id: int) -> list[dict[str, Any]]:
    return list(d.get("/decisions", task=task_id, kind="prompt")["items"])


def session_screen(d: Daemon, task_id: int) -> str:
    rows = d.get("/sessions", task=task_id)["items"]
    return d.tmux("capture-pane", "-p", "-t", f"={rows[0]['session']}:").stdout if rows else ""


def test_l2_relay_approves_through_the_channel_and_the_agent_closes_through_mcp(daemon: Callable[..., Daemon], model: ModelServer) -> None:
    d = daemon()
    mission = d.mission(2)
    marker = f"ok-{uuid.uuid4().hex[:6]}"
    command = f"echo {marker} > proof.txt"
    task_id = task(d, mission["id"], f"Write the proof file, then close the task. RUN: {command} CLOSE")
    decision = channel_decision(d, task_id, ("approved", "escalated"))
    assert decision["status"] == "approved" and decision["decided_by"] == "overseer:relay:fake/fake-model", decision
    payload = decision["payload"]
    assert payload["channel"] == "hook" and payload["state"] == "permission_prompt"
    request = payload["request"]
    assert (request["kind"], request["tool"], request["command"], request["complete"]) == ("bash", "Bash", command, True)
    assert "keys" not in decision["answer"] and decision["answer"]["channel"] == "hook"  # no keystrokes
    closed = wait(lambda: (t := d.get(f"/tasks/{task_id}"))["state"] == "closed" and t, "the agent closed its task through MCP", on_fail=d.screen)
    assert (d.repo / "proof.txt").read_text().strip() == marker
    assert closed["evidence"] == ["proof.txt written", "closed through MCP"]
    assert any(CLOSE_TOOL in r.tool_names for r in model.requests), "Claude Code was not given Elowen's MCP tools"
    # the token never appears on the command line or in the stored environment
    sessions = d.get("/sessions", task=task_id)["items"]
    assert all("ELOWEN_TOKEN" not in (s.get("env") or {}) for s in sessions)
    # one decision, through the channel: the screen saw the same dialog and made no second
    # decision, and no key was sent; Elowen's own MCP tools are allowed by the rule Elowen
    # gives (`mcp__elowen`), so `close` asked nothing
    made = prompts(d, task_id)
    assert [(p["payload"]["request"]["kind"], p["payload"]["request"]["tool"]) for p in made] == [("bash", "Bash")]
    assert all(p["payload"]["channel"] == "hook" and "keys" not in p["answer"] for p in made)


def test_a_write_to_home_escalates_and_the_human_rejection_goes_back_through_the_channel(daemon: Callable[..., Daemon], model: ModelServer) -> None:
    d = daemon()
    mission = d.mission(2)
    agent_home = d.repo.parent / "agent-home"
    command = "echo secret >> ~/.bashrc"
    task_id = task(d, mission["id"], f"Tweak the shell. RUN: {command}")
    decision = channel_decision(d, task_id, "escalated")
    assert decision["decided_by"] == "overseer:rules" and decision["confidence"] == 1.0, decision
    assert decision["payload"]["channel"] == "hook" and decision["payload"]["request"]["command"] == command
    assert "redirect-outside-checkout" in decision["rationale"], decision["rationale"]
    assert not [r for r in model.requests if "overseer of Elowen" in str(r.body) and ".bashrc" in str(r.body)]  # rules, not the model
    assert [e["id"] for e in d.get("/escalations")["items"]] == [decision["id"]]
    out = d.cli("escalations", "answer", str(decision["id"]), "--reject", "-r", "Do not touch the shell profile.")
    assert out.returncode == 0, out.stderr
    rejected = d.get(f"/decisions/{decision['id']}")
    assert rejected["status"] == "rejected" and "keys" not in rejected["answer"]
    # Claude Code got the reason as the tool's result (through the hook), never ran it
    seen = wait(lambda: any("Do not touch the shell profile." in t.output for r in model.requests for t in r.all_tool_results), "the reason reached the model")
    assert seen
    bashrc = agent_home / ".bashrc"
    assert not bashrc.exists() or "secret" not in bashrc.read_text()
    assert len(prompts(d, task_id)) == 1


def test_the_screen_does_not_answer_a_prompt_the_channel_holds(daemon: Callable[..., Daemon], model: ModelServer) -> None:
    """No decision path: the request waits for a human while its dialog is on screen and the
    deriver watches it; it stays ONE decision, and the human's verdict goes through the channel
    (no keys: nothing is typed into the pane)."""
    d = daemon()
    marker = f"held-{uuid.uuid4().hex[:6]}"
    command = f"echo {marker} > held.txt"
    task_id = task(d, None, f"Write the held file. RUN: {command}")
    decision = channel_decision(d, task_id, "pending")
    assert decision["payload"]["channel"] == "hook"
    # the pane's command line names the token only as ${ELOWEN_TOKEN} / $ELOWEN_TOKEN
    started = d.tmux("list-panes", "-a", "-F", "#{pane_start_command}").stdout
    assert "--mcp-config" in started and "PermissionRequest" in started and "ELOWEN_TOKEN" in started and "elw_" not in started
    wait(lambda: "Do you want to proceed?" in session_screen(d, task_id), "Claude's own dialog on screen", on_fail=d.screen)
    linked = wait(
        lambda: d.get(f"/decisions/{decision['id']}")["payload"].get("fingerprint"), "the deriver linked the dialog to the decision", on_fail=d.screen
    )
    assert linked
    time.sleep(3.0)  # the deriver keeps watching the dialog
    assert [p["id"] for p in prompts(d, task_id)] == [decision["id"]]
    assert not (d.repo / "held.txt").exists()
    answered = d.post(f"/decisions/{decision['id']}", {"action": "approve"})
    assert answered["status"] == "approved" and "keys" not in answered["answer"]
    wait(lambda: (d.repo / "held.txt").exists(), "the approved command ran", on_fail=d.screen)
    wait(lambda: "FAKE: done." in session_screen(d, task_id), "Claude finished its turn", on_fail=d.screen)
    time.sleep(1.0)
    assert [p["id"] for p in prompts(d, task_id)] == [decision["id"]]
    composer = [ln for ln in session_screen(d, task_id).splitlines() if ln.startswith("❯")]
    assert composer and composer[-1].strip("❯\xa0 ") == "", composer  # no stray "1" typed into the composer
    assert (d.repo / "held.txt").read_text().strip() == marker

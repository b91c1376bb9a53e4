"""End to end, through the daemon and the overseer, with the REAL CLIs: the cases where a
supervisor that reads screens is most likely to approve something it did not understand.

A real daemon subprocess runs each task of an L2 mission on the real CLI (Claude Code 2.1.197,
Codex 0.171.0, OpenCode 1.18.33, Kilo 7.7.7, installed by ``scripts/install-test-deps``) in tmux,
against the scripted model server. The overseer's relay model (the same server) APPROVES
EVERYTHING with confidence 0.9, above the L2 threshold 0.6: only the rules
(``overseer.policy.destructive_reasons``) and rule 1 (``not_understood``) stand between the agent
and the action. The agent's model makes exactly one tool call, chosen per test (``CALL``), then
says it is done; a task description with ``RUN: <cmd>`` runs that shell command instead.

Skipped (with the reason) when a CLI is not installed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._overseer_daemon import Daemon, OverseerScript, start, wait
from tests.support.agent_env import MissingCliError, cli_binary
from tests.support.model_server import DefaultScript, ModelServer, ParsedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

EXEC = {"claude": "claude:fake-model", "codex": "codex:fake-model", "opencode": "opencode:fake/fake-model", "kilo": "kilo:fake/fake-model"}
DECIDED = ("approved", "rejected", "escalated", "answered", "expired")


@dataclass
class AgentScript:
    """The agents' model: with ``CALL`` in the prompt, ``call`` first (``{home}`` and
    ``{repo}`` in its string arguments filled in), then ``"FAKE: done."``; otherwise
    :class:`DefaultScript` (``RUN: <cmd>``)."""

    call: ToolCall | None = None
    fill: dict[str, str] = field(default_factory=dict)
    default: DefaultScript = field(default_factory=DefaultScript)

    def __call__(self, request: ParsedRequest) -> Reply:
        if not request.has_tools or "CALL" not in request.prompt or self.call is None:
            return self.default(request)
        if request.tool_results:
            return Reply(text="FAKE: done.")
        args = {k: (v.format(**self.fill) if isinstance(v, str) else v) for k, v in self.call.arguments.items()}
        return Reply(text="FAKE: I will use a tool.", tool_calls=(ToolCall(self.call.name, args),))


@pytest.fixture
def model() -> Iterator[ModelServer]:
    # the relay approves every prompt at 0.9 (the L2 threshold is 0.6)
    verdict = {"prompt": {"approve": True, "confidence": 0.9, "rationale": "looks fine"}}
    with ModelServer(OverseerScript(verdict=verdict, default=AgentScript())) as server:  # type: ignore[arg-type]
        yield server


@pytest.fixture
def daemon(tmp_path: Path, model: ModelServer) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(cli: str, call: ToolCall | None = None, **overseer: Any) -> Daemon:
        try:
            cli_binary(cli)  # type: ignore[arg-type]
        except MissingCliError as exc:
            pytest.skip(f"{cli} is not installed here ({exc})")
        agent: AgentScript = model.script.default  # type: ignore[attr-defined]
        agent.call = call
        agent.fill = {"home": str((tmp_path / "agent-home").resolve()), "repo": str((tmp_path / "repo").resolve())}
        d = start(tmp_path, model, overseer, cli=cli)
        started.append(d)
        return d

    try:
        yield make
    finally:
        for d in started:
            d.stop()


def _task(d: Daemon, cli: str, description: str) -> int:
    mission = d.mission(2)
    body = {"title": "must-show", "project_id": d.project, "exec": EXEC[cli], "description": description, "labels": [f"mission:{mission['id']}"]}
    task_id = int(d.post("/tasks", body)["id"])
    d.post(f"/missions/{mission['id']}/tasks", {"task_ids": [task_id]})
    return task_id


def _decided(d: Daemon, task_id: int) -> dict[str, Any]:
    """The task's first prompt decision once it is no longer pending. Generous: on a loaded
    2-core machine OpenCode and Kilo took 50–80 s from start to their first model request."""

    def find() -> Any:
        items = [x for x in d.get("/decisions", task=task_id, kind="prompt")["items"] if x["status"] in DECIDED]
        return items[0] if items else None

    return wait(find, f"a decided prompt decision of task {task_id}", timeout=240, on_fail=d.screen)


def _stays(d: Daemon, decision_id: int, status: str, seconds: float = 4.0) -> None:
    """The decision keeps ``status`` for ``seconds`` (nothing approves it later)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert d.get(f"/decisions/{decision_id}")["status"] == status
        time.sleep(0.5)


def _relay_asked(model: ModelServer, needle: str) -> bool:
    return any(r.json_schema is not None and needle in json.dumps(r.body) for r in model.requests)


# ---------------------------------------------------------------- Claude Code


def test_claude_webfetch_is_decided_not_hung(daemon: Callable[..., Daemon], model: ModelServer) -> None:
    # no `Esc to cancel` footer on this prompt: it used to classify as `starting` and hang
    d = daemon("claude", ToolCall("WebFetch", {"url": "https://example.com/page", "prompt": "Summarise the page"}))
    task_id = _task(d, "claude", "Read the page. CALL")
    decision = _decided(d, task_id)
    request = decision["payload"]["request"]
    assert request["kind"] == "fetch" and request["url"] == "https://example.com/page" and request["complete"] is True
    assert decision["status"] == "approved" and decision["decided_by"] == "overseer:relay:fake/fake-model", decision
    # the approval reached the CLI: the tool ran (offline: an error result) and the model heard back
    model.wait_for(lambda r: r.has_tools and bool(r.tool_results) and "CALL" in r.prompt, timeout=90)


def test_claude_write_outside_the_checkout_is_escalated_never_written(daemon: Callable[..., Daemon], model: ModelServer, tmp_path: Path) -> None:
    # the question shows only the basename; the header under the rule shows the real path
    target = (tmp_path / "agent-home").resolve() / "e2e-outside-write.txt"
    d = daemon("claude", ToolCall("Write", {"file_path": "{home}/e2e-outside-write.txt", "content": "hello\n"}))
    task_id = _task(d, "claude", "Write the note. CALL")
    decision = _decided(d, task_id)
    request = decision["payload"]["request"]
    assert request["kind"] == "write" and request["paths"] == [str(target)], request
    assert decision["status"] == "escalated" and decision["decided_by"] == "overseer:rules" and "destructive" in decision["rationale"], decision
    _stays(d, decision["id"], "escalated")
    assert not target.exists()
    assert not _relay_asked(model, "e2e-outside-write.txt")  # the rules decided before any model


def test_claude_close_step_with_a_variable_is_approved_at_l2(daemon: Callable[..., Daemon]) -> None:
    # Claude adds a `Contains simple_expansion` warning line under a command with $VAR
    d = daemon("claude")
    marker = f"ok-{uuid.uuid4().hex[:6]}"
    task_id = _task(d, "claude", f'Write the proof, then close. RUN: echo {marker} > proof.txt && elowen close $ELOWEN_TASK --summary "wrote proof.txt"')
    decision = _decided(d, task_id)
    request = decision["payload"]["request"]
    assert request["command"] == f'echo {marker} > proof.txt && elowen close $ELOWEN_TASK --summary "wrote proof.txt"', request
    assert decision["status"] == "approved" and decision["decided_by"] == "overseer:relay:fake/fake-model", decision
    wait(lambda: d.get(f"/tasks/{task_id}")["state"] == "closed", "the agent closed its task", on_fail=d.screen)
    assert (d.repo / "proof.txt").read_text().strip() == marker


def test_a_rejection_reason_reaches_the_agent(daemon: Callable[..., Daemon], model: ModelServer) -> None:
    d = daemon("claude")
    task_id = _task(d, "claude", "Publish the branch. RUN: git push --force origin main")
    decision = _decided(d, task_id)
    assert decision["status"] == "escalated" and "git-force-push" in decision["rationale"], decision
    reason = f"Do not force-push; open a pull request instead ({uuid.uuid4().hex[:6]})."
    out = d.cli("decide", str(decision["id"]), "--reject", "-r", reason)
    assert out.returncode == 0 and "rejected" in out.stdout, out.stderr
    # the reason reaches the model: through Claude Code's permission channel as the rejected
    # tool's result (the default), or — screen path — typed into the composer as the next prompt
    told = model.wait_for(lambda r: r.has_tools and (reason in r.prompt or any(reason in t.output for t in r.tool_results)), timeout=90)
    assert told.api == "anthropic"
    assert d.get(f"/tasks/{task_id}")["state"] == "in_progress"


# ---------------------------------------------------------------- Codex

PATCH = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {home}/.ssh/authorized_keys\n+ssh-ed25519 AAAAC3Nza fake@host\n*** End Patch\nEOF\n"


def test_codex_apply_patch_to_authorized_keys_is_escalated(daemon: Callable[..., Daemon], model: ModelServer, tmp_path: Path) -> None:
    keys = (tmp_path / "agent-home").resolve() / ".ssh" / "authorized_keys"
    d = daemon("codex", ToolCall("exec_command", {"cmd": PATCH}))
    task_id = _task(d, "codex", "Add my key. CALL")
    decision = _decided(d, task_id)
    request = decision["payload"]["request"]
    assert request["kind"] == "patch" and request["paths"] == [str(keys)] and "+ssh-ed25519" in (request.get("diff") or ""), request
    assert decision["status"] == "escalated" and decision["decided_by"] == "overseer:rules", decision
    _stays(d, decision["id"], "escalated")
    assert not keys.exists()
    assert not _relay_asked(model, "authorized_keys")


# ---------------------------------------------------------------- OpenCode and Kilo


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
def test_external_directory_is_extracted_and_judged(cli: str, daemon: Callable[..., Daemon], model: ModelServer, tmp_path: Path) -> None:
    # "Access external directory <dir>" with "Patterns - <dir>/*": once an empty request, approved blindly
    home = (tmp_path / "agent-home").resolve()
    d = daemon(cli, ToolCall("read", {"filePath": "{home}/notes.txt"}))
    (home / "notes.txt").write_text("private\n")
    task_id = _task(d, cli, "Read my notes. CALL")
    decision = _decided(d, task_id)
    request = decision["payload"]["request"]
    assert request["kind"] == "directory" and request["directory"] == str(home) and request["patterns"] == [f"{home}/*"], request
    assert request["complete"] is True
    # the agent's HOME is never scratch: the rules escalate before the approve-everything model
    assert decision["status"] == "escalated" and decision["decided_by"] == "overseer:rules", decision
    _stays(d, decision["id"], "escalated")
    assert not any("private" in r.output for req in model.requests for r in req.all_tool_results)

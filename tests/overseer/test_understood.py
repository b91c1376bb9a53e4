"""Rule 1 — never approve what was not understood. The overseer's model (the scripted model
server) approves everything with confidence 1.0 at L3, so only the rules and rule 1 stand
between an agent and its action: a permission request is approved only when its request is
complete (``payload.request.complete``), for every prompt kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elowen_builtins.overseer.policy import not_understood
from tests.overseer.conftest import MODEL, until, verdict_script, world
from tests.support.model_server import ModelServer

KINDS: dict[str, dict[str, Any]] = {
    "bash": {"tool": "Bash", "command": "pytest -q", "missing": ["command"]},
    "edit": {"tool": "Edit", "paths": ["{repo}/a.py"], "file": "{repo}/a.py", "diff": "-a\n+b", "missing": ["paths"]},
    "write": {"tool": "Write", "paths": ["{repo}/b.txt"], "file": "{repo}/b.txt", "missing": ["paths"]},
    "fetch": {"tool": "WebFetch", "url": "https://example.com/doc", "missing": ["url"]},
    "directory": {"tool": "external_directory", "directory": "/tmp/elowen-rule1-dir", "patterns": ["/tmp/elowen-rule1-dir/*"], "missing": ["directory"]},
    "mcp": {"tool": "query", "server": "db", "arguments": '{"sql": "select 1"}', "missing": ["server"]},
    "patch": {"tool": "apply_patch", "paths": ["{repo}/c.py"], "file": "{repo}/c.py", "diff": "+x", "missing": ["paths"]},
    "network": {"tool": "network", "url": "pypi.org", "missing": ["url"]},
    "other": {"tool": "Task", "missing": ["kind"]},
}


def _request(kind: str, repo: Path, *, complete: bool) -> dict[str, Any]:
    base = {
        k: (v.replace("{repo}", str(repo)) if isinstance(v, str) else [p.replace("{repo}", str(repo)) for p in v] if k == "paths" else v)
        for k, v in KINDS[kind].items()
    }
    missing = base.pop("missing")
    return {"kind": kind, **base, "complete": complete, "missing": [] if complete else missing}


def test_not_understood_reads_complete_and_falls_back_to_parsing_bash() -> None:
    def decision(request: Any) -> dict[str, Any]:
        return {"kind": "prompt", "payload": {"request": request}}

    assert not_understood(decision({"kind": "write", "paths": ["/r/x"], "complete": True, "missing": []})) == []
    assert not_understood(decision({"kind": "write", "paths": [], "complete": False, "missing": ["paths"]})) == ["paths"]
    # without the extraction's field: only a shell command that parses is complete
    assert not_understood(decision({"tool": "Bash", "command": "elowen close $ELOWEN_TASK --summary done"})) == []
    assert not_understood(decision({"tool": "exec_command", "command": "ls -la"})) == []
    assert not_understood(decision({"tool": "Bash", "command": "echo 'unterminated"}))
    assert not_understood(decision({"tool": "Bash", "command": ""})) == ["command"]
    assert not_understood(decision({"tool": "Write", "file": "x.txt"}))
    assert not_understood(decision({})) == ["request"]
    assert not_understood(decision(None)) == ["request"]
    assert not_understood({"kind": "question", "payload": {}}) == []


async def _settle(w: Any, task_id: int, request: dict[str, Any]) -> dict[str, Any]:
    decision = w.decisions.create("prompt", task_id=task_id, payload={"request": request})
    w.rt.autopilot.submit(decision)
    return await until(lambda: (d := w.decisions.get(decision["id"]))["status"] != "pending" and d, what=f"decision on {request.get('kind')}")


@pytest.mark.parametrize("level", [2, 3])
async def test_every_incomplete_kind_escalates_even_when_the_model_approves(tmp_path: Path, socket_name: str, model_server: ModelServer, level: int) -> None:
    model_server.script = verdict_script({"approve": True, "confidence": 1.0, "rationale": "looks fine"})
    async with world(tmp_path, socket_name, model=model_server) as w:
        task_id = w.task(w.mission(level), agent=False)
        for kind in KINDS:
            settled = await _settle(w, task_id, _request(kind, w.repo, complete=False))
            assert settled["status"] == "escalated", (kind, settled)
            assert settled["rationale"].startswith("not understood: the request does not name "), settled["rationale"]
            assert KINDS[kind]["missing"][0] in settled["rationale"], (kind, settled["rationale"])
            assert settled["decided_by"] == "overseer:rules" and settled["confidence"] == 1.0
        # the model was never asked about a request nobody understood
        assert not [r for r in model_server.requests if r.api == "chat"]


async def test_every_complete_kind_reaches_the_model(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    model_server.script = verdict_script({"approve": True, "confidence": 1.0, "rationale": "looks fine"})
    async with world(tmp_path, socket_name, model=model_server) as w:
        task_id = w.task(w.mission(3), agent=False)
        for kind in KINDS:
            if kind == "other":
                continue  # "other" is never complete
            settled = await _settle(w, task_id, _request(kind, w.repo, complete=True))
            # approved by the model; the decision has no agent pane, so the keys cannot be sent
            # and the approval escalates with the model's confidence — what matters: not rule 1
            assert settled["decided_by"] == f"overseer:relay:{MODEL}", (kind, settled)
            assert "not understood" not in (settled["rationale"] or ""), (kind, settled)
            assert "approve could not be carried out" in settled["rationale"], (kind, settled)


async def test_missing_field_bash_flows_keep_working_other_tools_do_not(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    model_server.script = verdict_script({"approve": True, "confidence": 1.0, "rationale": "fine"})
    async with world(tmp_path, socket_name, model=model_server) as w:
        task_id = w.task(w.mission(3), agent=False)
        bash = await _settle(w, task_id, {"tool": "Bash", "command": "elowen close $ELOWEN_TASK --summary ok"})
        assert bash["decided_by"] == f"overseer:relay:{MODEL}", bash
        write = await _settle(w, task_id, {"tool": "Write", "file": str(w.repo / "e2e.txt")})
        assert write["status"] == "escalated" and write["rationale"].startswith("not understood"), write
        glued = await _settle(w, task_id, {"tool": "Bash", "command": 'echo "$X Contains simple_expansion'})
        assert glued["status"] == "escalated" and glued["decided_by"] == "overseer:rules", glued


async def test_a_real_prompt_not_understood_escalates_with_the_screen(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    """The fake agent's real Claude prompt (a Bash command that parses: approved), then the same
    prompt with a request the extraction could not complete: escalated with the screen, both when
    routed and when a decision path's approval is applied later."""
    from elowen_sdk.services.missions import Proposal

    model_server.script = verdict_script({"approve": True, "confidence": 1.0, "rationale": "fine"})
    async with world(tmp_path, socket_name, model=model_server) as w:
        task_id = w.task(w.mission(3))
        [decision] = await until(lambda: w.decisions.list_decisions(task_id=task_id) or None, what="a decision")
        settled = await until(lambda: (d := w.decisions.get(decision["id"]))["status"] != "pending" and d, what="settled")
        assert settled["status"] == "approved"  # the Bash prompt parses: complete
        incomplete = {**decision["payload"], "request": {"kind": "write", "complete": False, "missing": ["paths"]}}
        routed = w.decisions.create("prompt", task_id=task_id, session=decision["session"], payload=incomplete)
        result = await until(lambda: (d := w.decisions.get(routed["id"]))["status"] != "pending" and d, what="routed")
        assert result["status"] == "escalated" and result["decided_by"] == "overseer:rules"
        assert "does not name paths" in result["rationale"] and "\n\nScreen:\n" in result["rationale"]
        # a path's later approval is held to rule 1 as well (a task in no mission: the autopilot
        # leaves its decision pending, so only apply() acts on it)
        loose = w.task(None, agent=False)
        held = w.decisions.create("prompt", task_id=loose, session=decision["session"], payload=incomplete)
        await w.rt.autopilot.sweep()
        assert w.decisions.get(held["id"])["status"] == "pending"
        applied = await w.rt.autopilot.apply(held["id"], Proposal("approve", confidence=1.0, rationale="sure", source="test"))
        assert applied is not None and applied["status"] == "escalated" and applied["decided_by"] == "overseer:test"
        assert "\n\nScreen:\n" in applied["rationale"]

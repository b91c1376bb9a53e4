"""End to end through the ``elowen`` CLI against a real daemon: ``elowen ask`` answered by the
autopilot (the scripted model server plays the overseer's model) and escalated then answered
by a human from ``elowen escalations``; ``elowen mission …``; ``elowen provider …``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._overseer_daemon import Daemon, OverseerScript, start, wait
from tests.support.model_server import ModelServer

pytestmark = pytest.mark.slow


@pytest.fixture
def d(tmp_path: Path) -> Iterator[Daemon]:
    script = OverseerScript(verdict={"message": {"answer": "Use Python 3.11.", "confidence": 0.9, "rationale": "pinned in pyproject"}})
    with ModelServer(script) as model:
        daemon = start(tmp_path, model, {"default_level": "L2"})
        try:
            yield daemon
        finally:
            daemon.stop()


def test_ask_round_trips(d: Daemon) -> None:
    out = d.cli("ask", "Which Python version?")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Use Python 3.11."

    d.model.script.verdict = {"message": {"answer": "MIT?", "confidence": 0.3, "rationale": "a guess"}}  # type: ignore[attr-defined]
    env_cmd = [str(Path(sys.executable).parent / "elowen"), "ask", "Which license?"]
    asker = subprocess.Popen(env_cmd, env=_env(d), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        item = wait(lambda: [e for e in json.loads(d.cli("escalations", "--json").stdout) if e["kind"] == "message"], "the escalated ask")[0]
        assert item["payload"]["question"] == "Which license?" and item["confidence"] == 0.3
        answered = d.cli("escalations", "answer", str(item["id"]), "--text", "Apache-2.0")
        assert answered.returncode == 0, answered.stderr
        stdout, stderr = asker.communicate(timeout=60)
    finally:
        if asker.poll() is None:
            asker.kill()
    assert asker.returncode == 0, stderr
    assert stdout.strip() == "Apache-2.0"
    assert "escalated to a human" in stderr


def _env(d: Daemon) -> dict[str, str]:
    import os

    return {**os.environ, "ELOWEN_URL": d.url, "ELOWEN_TOKEN": d.token, "ELOWEN_HOME": str(d.home), "ELOWEN_NO_AUTOSTART": "1"}


def test_mission_and_provider_commands(d: Daemon) -> None:
    created = json.loads(d.cli("mission", "create", "ship it", "--level", "L0", "--project", str(d.project), "--json").stdout)
    assert created["state"] == "paused" and created["level"] == 0
    mid = str(created["id"])
    assert "active" in d.cli("mission", "engage", mid).stdout
    assert "L3" in d.cli("mission", "level", mid, "L3").stdout
    assert "paused" in d.cli("mission", "pause", mid).stdout
    assert "active" in d.cli("mission", "resume", mid).stdout
    shown = json.loads(d.cli("mission", "show", mid, "--json").stdout)
    assert shown["level"] == 3 and shown["state"] == "active"
    assert "ship it" in d.cli("mission", "list").stdout
    refused = d.cli("mission", "engage", mid)
    assert refused.returncode == 1 and "cannot engage" in refused.stderr
    assert "disengaged" in d.cli("mission", "disengage", mid).stdout

    added = d.cli("provider", "add", "ollama", "--kind", "openai", "--base-url", "http://127.0.0.1:11434/v1")
    assert added.returncode == 0, added.stderr
    listed = {p["name"]: p for p in json.loads(d.cli("provider", "list", "--json").stdout)}
    assert listed["ollama"]["kind"] == "openai" and "fake" in listed
    again = d.cli("provider", "add", "ollama", "--kind", "openai", "--base-url", "http://127.0.0.1:1/v1")
    assert again.returncode == 1 and "already exists" in again.stderr
    bad = d.cli("provider", "add", "x", "--kind", "openai", "--base-url", "http://127.0.0.1:1", "--api-key-env", "sk-abc123")
    assert bad.returncode == 1
    assert d.cli("provider", "remove", "ollama").returncode == 0
    assert "ollama" not in d.cli("provider", "list").stdout
    assert d.cli("provider", "remove", "ollama").returncode == 1

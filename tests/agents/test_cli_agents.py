"""``elowen agents classify`` (local, no daemon) and the argument checks of ``elowen decide``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from elowen.cli.agents import agents, decide

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"


def test_classify_a_captured_permission_prompt() -> None:
    result = CliRunner().invoke(agents, ["classify", "--cli", "claude", str(SCREENS / "claude" / "06_permission_prompt.txt")])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["state"] == "permission_prompt"
    assert out["request"]["command"].startswith("echo hello-from-fake")
    assert out["options"][0] == "Yes" and out["approve_keys"] == ["1"] and out["reject_keys"]


def test_classify_from_stdin_with_a_version() -> None:
    text = (SCREENS / "lookalikes" / "claude__unknown_dialog__model_picker.txt").read_text()
    result = CliRunner().invoke(agents, ["classify", "--cli", "claude", "--cli-version", "2.1.197", "-"], input=text)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["state"] == "unknown_dialog" and out["answerable"] is False and out["approve_keys"] == []


def test_classify_unknown_cli_is_a_usage_error() -> None:
    result = CliRunner().invoke(agents, ["classify", "--cli", "nope", "-"], input="x")
    assert result.exit_code == 2
    assert "unknown CLI" in result.output


def test_decide_needs_exactly_one_answer() -> None:
    runner = CliRunner()
    assert runner.invoke(decide, ["7"]).exit_code == 2
    assert runner.invoke(decide, ["7", "--approve", "--choice", "2"]).exit_code == 2

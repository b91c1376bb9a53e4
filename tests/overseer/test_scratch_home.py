"""Scratch is not home: the rules' scratch areas (``/tmp``, ``/var/tmp``, ``/dev/shm``) never
include the agent's ``$HOME``, Elowen's home, or a folder holding the project — the test
harness itself puts agent homes under ``/tmp``. Pure analysis (no I/O) plus one run through the
overseer's routing with the agent's HOME taken from its session record."""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen_builtins.overseer.policy import destructive_reasons
from elowen_sdk.destructive import check_command, check_file_write

HOME = "/tmp/h1/home"
REPO = "/tmp/h1/repo"


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf ~/somewhere",
        "rm -rf $HOME/.cache",
        f"rm -rf {HOME}",
        "rm -rf /tmp/h1",  # holds the home and the project
        "rm -rf /tmp/*",
        "find /tmp/h1/home -delete",
    ],
)
def test_home_under_tmp_is_not_scratch(command: str) -> None:
    verdict = check_command(command, cwd=REPO, checkout=REPO, home=HOME)
    assert verdict.destructive, command


def test_elowen_home_under_tmp_is_not_scratch() -> None:
    verdict = check_command("rm -rf /tmp/eh/plugins", cwd=REPO, checkout=REPO, home=HOME, elowen_home="/tmp/eh")
    assert verdict.destructive and "/tmp/eh/plugins" in verdict.reasons[0]
    assert check_file_write("/tmp/eh/admin.token", checkout=REPO, home=HOME, elowen_home="/tmp/eh").destructive
    assert check_file_write(f"{HOME}/.bashrc", checkout=REPO, home=HOME).destructive


def test_other_scratch_stays_scratch() -> None:
    for command in ("rm -rf /tmp/h1-other/build", "rm -f /tmp/out.txt", "echo hi > /tmp/h1/log.txt"):
        assert not check_command(command, cwd=REPO, checkout=REPO, home=HOME, elowen_home="/tmp/eh").destructive, command
    assert not check_file_write("/tmp/h1/notes.txt", checkout=REPO, home=HOME).destructive
    # a checkout inside the home keeps its own freedom
    inner = f"{HOME}/proj"
    assert not check_command("rm -rf build", cwd=inner, checkout=inner, home=HOME).destructive


def test_policy_passes_both_homes(tmp_path: Path) -> None:
    home, elowen = tmp_path / "home", tmp_path / "elowen"
    decision = {"payload": {"request": {"tool": "Bash", "command": f"rm -rf {elowen}/x; rm -rf ~/somewhere"}}}
    reasons = destructive_reasons(decision, checkout=str(tmp_path / "repo"), home=str(home), elowen_home=str(elowen))
    assert any(f"{home}/somewhere" in r for r in reasons), reasons
    assert any(f"{elowen}/x" in r for r in reasons), reasons


async def test_overseer_takes_the_agents_home_from_its_session(tmp_path: Path, socket_name: str) -> None:
    """An agent whose ``$HOME`` is under ``/tmp``: ``rm -rf ~/somewhere`` escalates as destructive
    at L3 with a model that approves everything; ``rm -rf /tmp/<elsewhere>`` does not."""
    from tests.overseer.conftest import until, verdict_script, world
    from tests.support.model_server import ModelServer

    home = tmp_path / "agent-home"
    home.mkdir()
    with ModelServer(verdict_script({"approve": True, "confidence": 1.0, "rationale": "fine"})) as model:
        async with world(tmp_path, socket_name, model=model, env={"HOME": str(home)}) as w:
            task_id = w.task(w.mission(3))
            [first] = await until(lambda: w.decisions.list_decisions(task_id=task_id) or None, what="the agent's prompt")
            session = w.service("agents").session(first["session"])
            assert (session["env"] or {}).get("HOME") == str(home), session["env"]

            async def settle(command: str) -> dict:
                request = {"kind": "bash", "tool": "Bash", "command": command, "complete": True, "missing": []}
                decision = w.decisions.create("prompt", task_id=task_id, session=first["session"], payload={**first["payload"], "request": request})
                return await until(lambda: (d := w.decisions.get(decision["id"]))["status"] not in ("pending",) and d, what=command)

            home_rm = await settle("rm -rf ~/somewhere")
            assert home_rm["status"] == "escalated" and home_rm["decided_by"] == "overseer:rules", home_rm
            assert f"{home}/somewhere" in home_rm["rationale"]
            scratch = await settle(f"rm -rf /tmp/{tmp_path.name}-elsewhere/build")
            # not the rules': the model was asked (its approval then finds the prompt already
            # answered — the first prompt was approved — and the decision expires)
            assert scratch["decided_by"] != "overseer:rules", scratch
            assert any(f"{tmp_path.name}-elsewhere" in str(r.body) for r in model.requests if r.api == "chat")
            assert not any("somewhere" in str(r.body) for r in model.requests if r.api == "chat")

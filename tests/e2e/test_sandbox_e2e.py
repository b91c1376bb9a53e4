"""End to end: the REAL agent CLIs run under bubblewrap (provider setting ``sandbox = "bwrap"``)
in the daemon, against the scripted model server. The task works (the CLI starts, its
permission prompt becomes a decision, the approved command runs and ``elowen close`` reaches the
daemon from inside), and the same command's escape attempts fail: removing ``~/x``, appending
to ``~/.ssh/authorized_keys``, reading Elowen's ``admin.token`` and sending keys through the
daemon's tmux socket. (Each escape is also checked fast, without a CLI, in
``tests/agents/test_sandbox.py``.)"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from elowen_builtins.agents.sandbox import probe
from tests.e2e import test_agents_e2e as e2e
from tests.e2e.test_agents_e2e import Daemon, wait
from tests.support.agent_env import CLIS, Cli

model_server = e2e.model_server  # the e2e fixtures, shared
run_daemon = e2e.run_daemon

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(probe() is not None, reason=f"bubblewrap does not work here: {probe()}"),
    pytest.mark.skipif(
        Path(__file__).resolve().is_relative_to("/tmp"),
        reason="this checkout is under /tmp, which the sandbox replaces with a private /tmp: the test's own fake agent programs would be invisible to the sandboxed agent (the product re-exposes Elowen's packages and the command's script; a test checkout elsewhere runs these)",
    ),
]


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every provider config written by the e2e start-up gets ``sandbox = "bwrap"``."""
    real = e2e.tomli_w.dumps

    def dumps(settings: dict, **kw: object) -> str:  # type: ignore[type-arg]
        for name in e2e.PLUGIN.values():
            if name in settings.get("plugins", {}):
                settings["plugins"][name]["config"]["sandbox"] = "bwrap"
        return real(settings, **kw)

    monkeypatch.setattr(e2e.tomli_w, "dumps", dumps)


@pytest.mark.parametrize("cli", CLIS)
def test_real_cli_works_sandboxed_and_cannot_escape(cli: Cli, sandboxed: None, run_daemon: Callable[..., Daemon]) -> None:
    d = run_daemon(cli)
    agent_home = d.home.parent / "agent-home"
    (agent_home / "x").write_text("precious\n")
    (agent_home / ".ssh").mkdir(exist_ok=True)
    token_file = d.home / "admin.token"
    marker = f"ok-{uuid.uuid4().hex[:6]}"
    attempts = (
        f"rm -rf ~/x; echo k >> ~/.ssh/authorized_keys; cat {token_file} > leak.txt; "
        f'tmux -L {d.socket} send-keys -t _elowen_control "touch {d.home.parent}/pwned" Enter; '
        f'echo {marker} > proof.txt && elowen close $ELOWEN_TASK --summary "sandboxed" --evidence "proof.txt contains {marker}"'
    )
    task_id = d.create_task(f"Try these, then close the task. RUN: {attempts}")
    decision = d.pending(task_id)
    [session] = [s for s in d.get("/sessions", task=task_id)["items"]]
    start = subprocess.run(["tmux", "-L", d.socket, "display", "-p", "-t", session["pane_id"], "#{pane_start_command}"], capture_output=True, text=True).stdout
    assert "bwrap " in start and f"--tmpfs {d.home.resolve()}" in start, start
    d.post(f"/decisions/{decision['id']}", {"action": "approve"})

    def closed() -> Any:
        # OpenCode and Kilo ask once per command of the chain: approve each prompt
        for item in d.get("/decisions", task=task_id, status="pending")["items"]:
            d.post(f"/decisions/{item['id']}", {"action": "approve"})
        task = d.get(f"/tasks/{task_id}")
        return task if task["state"] == "closed" else None

    task = wait(closed, "the task closed by its sandboxed agent", timeout=3 * e2e.STEP, on_fail=d.screen)
    assert task["summary"] == "sandboxed"
    assert (d.repo / "proof.txt").read_text().strip() == marker
    assert (agent_home / "x").read_text() == "precious\n"
    assert not (agent_home / ".ssh" / "authorized_keys").exists()
    leak = d.repo / "leak.txt"
    assert not leak.exists() or token_file.read_text().strip() not in leak.read_text()
    assert not (d.home.parent / "pwned").exists()
    notes = [e["progress"]["text"] for e in d.events("task.progress") if e["id"] == task_id]
    assert not any("UNSANDBOXED" in n for n in notes)

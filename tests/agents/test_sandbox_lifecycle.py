"""The agents plugin spawning agents in the sandbox: a real kernel, real tmux, real bubblewrap
and the fake agent CLI (``fake_agent.py``), whose log lives in the project folder (the only place
it may write when sandboxed)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import elowen_builtins.agents.sandbox as sandbox
from elowen_sdk.testing import plugin_kernel
from tests.agents.test_agents_integration import FAST, World
from tests.agents.test_sandbox import needs_bwrap
from tests.support.fake_cli import fake_claude, private_tmux_socket
from tests.support.waiting import until

pytestmark = pytest.mark.skipif(
    Path(__file__).resolve().is_relative_to("/tmp"),
    reason="this checkout is under /tmp, which the sandbox replaces with a private /tmp: the test's own fake agent programs would be invisible to the sandboxed agent (the product re-exposes Elowen's packages and the command's script; a test checkout elsewhere runs these)",
)


@pytest.fixture
def socket_name() -> Any:
    with private_tmux_socket() as name:
        yield name


@asynccontextmanager
async def sandboxed_world(tmp: Path, socket: str, *, mode: str = "bwrap", projects: dict[str, str] | None = None) -> AsyncIterator[World]:
    repo = tmp / "repo"
    repo.mkdir(exist_ok=True)
    bin_dir = tmp / "bin"  # not the folder holding Elowen's home, which stays hidden
    bin_dir.mkdir(exist_ok=True)
    config = {
        "tmux": {"socket": socket, "enter_delay": 0.05},
        "claude-code": {"binary": str(fake_claude(bin_dir)), "sandbox": mode, "env": {"FAKE_LOG": str(repo / "fake.log")}},
        "agents": {**FAST, "project_sandbox": projects or {}},
        "deriver": {"sweep_interval": 0.5},
    }
    async with plugin_kernel(tmp, enable=["agents", "deriver", "tmux", "claude-code"], config=config) as kernel:
        w = World(kernel, tmp, socket, repo / "fake.log")
        await until(lambda: w.agents.ready.is_set(), what="agents ready")
        yield w


def notes(w: World, task_id: int) -> list[str]:
    return [str(p["text"]) for p in w.tasks.progress_log(task_id, limit=50)]


@needs_bwrap
async def test_agent_runs_under_bwrap_and_its_prompt_is_answered(tmp_path: Path, socket_name: str) -> None:
    async with sandboxed_world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        [decision] = await until(lambda: w.agents.decisions.list_decisions(task_id=task_id, status="pending") or None, what="a pending decision")
        [session] = w.sessions(task_id)
        start = w.tmux("display", "-p", "-t", session["pane_id"], "#{pane_start_command}").stdout
        assert "exec bwrap " in start and " -- " in start, start
        assert f"--tmpfs {(tmp_path / 'elowen-home').resolve()}" in start  # Elowen's home is hidden
        await w.agents.decide(decision["id"], "approve")
        await until(lambda: any(e["event"] == "key" for e in w.log_events()), what="the key reached the sandboxed agent")
        assert not any("UNSANDBOXED" in n for n in notes(w, task_id))


async def test_bwrap_required_but_missing_blocks_the_task(tmp_path: Path, socket_name: str) -> None:
    # bubblewrap cannot be uninstalled for one test: the probe's answer is set instead
    sandbox._probed["bwrap"] = "bubblewrap ('bwrap') is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    try:
        async with sandboxed_world(tmp_path, socket_name, mode="bwrap") as w:
            task_id = w.create_task()
            task = await until(lambda: (lambda t: t if t["state"] == "blocked" else None)(w.tasks.get(task_id)), what="task blocked")
            assert "bwrap" in task["resume_note"] and "not installed" in task["resume_note"]
            assert w.tmux("has-session", "-t", f"=elowen-t{task_id}-a1").returncode != 0
    finally:
        sandbox.probe(refresh=True)


async def test_unsandboxed_spawn_is_warned_on_the_task(tmp_path: Path, socket_name: str) -> None:
    async with sandboxed_world(tmp_path, socket_name, mode="bwrap", projects={"demo": "none"}) as w:
        task_id = w.create_task()
        await until(lambda: w.agents.decisions.list_decisions(task_id=task_id, status="pending") or None, what="a pending decision")
        assert any("UNSANDBOXED" in n for n in notes(w, task_id))
        [session] = w.sessions(task_id)
        start = w.tmux("display", "-p", "-t", session["pane_id"], "#{pane_start_command}").stdout
        assert "bwrap" not in start


@needs_bwrap
def test_executors_route_reports_the_sandbox(tmp_path: Path) -> None:
    status = sandbox.status("none", ["website"])
    assert status["sandboxed"] is False and "website" in str(status["warning"])
    assert sandbox.status("auto") == {"mode": "auto", "sandboxed": True, "warning": None}
    assert json.dumps(status)  # JSON-ready for GET /executors
    assert subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], check=False).returncode == 0

"""A CLI that is not logged in (no login, no API key) is detected and its task is blocked.

Screens: REAL captures, ``tests/fixtures/screens/<cli>/captured/2[45]_auth_required_*``
(Claude Code 2.1.197 with a fresh HOME, pre-seeded trust and no credentials, prompt on the
command line; Codex 0.171.0 with trust pre-seeded and no auth/API key: its sign-in screen).
Look-alikes: ``tests/fixtures/screens/lookalikes/*__idle__*_prose.txt`` (an agent printing the
same words in its output above the CLI's normal composer).

The integration tests run the agents plugin in a real kernel with real tmux (private socket)
and a stand-in CLI that draws a captured screen and waits (``fake_agent.py`` only draws its
fixed working/prompt/idle sequence, so the stand-in here draws any given screen file).
"""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen.daemon.services.tasks import TaskService
from elowen_builtins.agents.screen import ANSWERABLE_STATES, STATES, classify
from elowen_builtins.claude_code.plugin import ClaudeProvider
from elowen_builtins.codex.plugin import CodexProvider
from elowen_builtins.deriver.supervisor import SIGNAL_AS
from elowen_builtins.deriver.tracking import signal_for
from elowen_builtins.opencode.plugin import OpenCodeProvider
from elowen_sdk import Service
from elowen_sdk.testing import plugin_kernel
from tests.support.executors import kernel_resolver
from tests.support.fake_cli import private_tmux_socket
from tests.support.waiting import until

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"
CAPTURES = {
    "claude": sorted((SCREENS / "claude" / "captured").glob("*_auth_required_*.txt")),
    "codex": sorted((SCREENS / "codex" / "captured").glob("*_auth_required_*.txt")),
}
LOOKALIKES = {
    "claude": SCREENS / "lookalikes" / "claude__idle__not_logged_in_prose.txt",
    "codex": SCREENS / "lookalikes" / "codex__idle__sign_in_prose.txt",
}
FAST = {
    "scheduler_interval": 0.5,
    "liveness_interval": 0.2,
    "stuck_interval": 0.2,
    "janitor_interval": 0.2,
}


def _plain(paths: list[Path]) -> list[Path]:
    return [p for p in paths if not p.name.endswith(".ansi.txt")]


# --------------------------------------------------------------------------- classifier


def test_auth_required_is_a_known_state_signalled_as_error() -> None:
    assert "auth_required" in STATES
    assert "auth_required" not in ANSWERABLE_STATES
    assert signal_for(SIGNAL_AS["auth_required"]) == "error"


@pytest.mark.parametrize("cli", sorted(CAPTURES))
def test_both_window_sizes_were_captured(cli: str) -> None:
    names = [p.name for p in _plain(CAPTURES[cli])]
    assert any("_80x24" in n for n in names) and any("_200x50" in n for n in names), names
    for p in _plain(CAPTURES[cli]):
        assert p.with_name(p.name[: -len(".txt")] + ".ansi.txt").is_file(), p


@pytest.mark.parametrize("path", [p for ps in CAPTURES.values() for p in _plain(ps)], ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_real_capture_is_auth_required(path: Path) -> None:
    cli = path.parent.parent.name
    text = path.read_text(encoding="utf-8")
    escapes = path.with_name(path.name[: -len(".txt")] + ".ansi.txt").read_text(encoding="utf-8")
    for c in (classify(cli, text), classify(cli, text, version="0.171.0" if cli == "codex" else "2.1.197"), classify(cli, escapes, escapes=escapes)):
        assert c.state == "auth_required", c.to_dict()
        assert not c.answerable and c.approve_keys == () and c.reject_keys == ()


def test_claude_needs_the_footer_not_the_transcript_line() -> None:
    """Without the live footer's "Not logged in · Run /login" the same screen is not
    auth_required (the transcript's "⎿ Not logged in · Please run /login" alone could be text
    an agent printed)."""
    path = _plain(CAPTURES["claude"])[0]
    text = path.read_text(encoding="utf-8")
    footer = next(ln for ln in text.split("\n") if "? for shortcuts" in ln)
    stripped = text.replace(footer, "  ? for shortcuts · ← for agents")
    assert classify("claude", stripped).state != "auth_required"
    assert classify("claude", stripped).state != "idle"  # the transcript's banner still reads as an error


def test_codex_needs_its_sign_in_footer() -> None:
    text = _plain(CAPTURES["codex"])[0].read_text(encoding="utf-8")
    assert classify("codex", text.replace("Press enter to continue", "")).state != "auth_required"


@pytest.mark.parametrize("cli", sorted(LOOKALIKES))
def test_lookalike_prose_is_not_auth_required(cli: str) -> None:
    c = classify(cli, LOOKALIKES[cli].read_text(encoding="utf-8"))
    assert c.state == "idle", c.to_dict()


def auth_note(provider: str) -> str:
    """The note each provider declares (``auth_hint``, or the generic one naming its plugin)."""
    cls = {"claude": ClaudeProvider, "codex": CodexProvider, "opencode": OpenCodeProvider}[provider]
    return cls(plugin={"claude": "claude-code"}.get(provider, provider)).auth_note()


def test_notes_name_the_fix() -> None:
    assert "Claude Code is not logged in" in auth_note("claude") and "/login" in auth_note("claude")
    assert "ANTHROPIC_API_KEY" in auth_note("claude") and "reopen the task" in auth_note("claude")
    assert "Codex is not logged in" in auth_note("codex")
    assert "OpenCode" in auth_note("opencode") and "opencode plugin's env" in auth_note("opencode") and "reopen the task" in auth_note("opencode")


# --------------------------------------------------------------------------- integration

_DRAW = """\
import os, sys, time
lines = open(os.environ["SCREEN_FILE"], encoding="utf-8").read().split("\\n")
while lines and not lines[-1].strip():
    lines.pop()
sys.stdout.write("\\x1b[H\\x1b[2J" + "\\r\\n".join(lines))
sys.stdout.flush()
while True:
    time.sleep(3600)
"""


def _stand_in(folder: Path) -> Path:
    """An executable that draws ``$SCREEN_FILE`` (a captured screen) and waits; its arguments
    (the provider's flags and prompt) are ignored, as the real CLI is started."""
    script = folder / "draw_screen.py"
    script.write_text(_DRAW)
    path = folder / "screen-cli"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


class World:
    def __init__(self, kernel: Any, tmp: Path) -> None:
        self.kernel = kernel
        self.store = kernel.store
        svc = kernel.contributions.all("service").get("tasks")
        self.tasks: TaskService = svc.obj.obj if svc else TaskService(kernel.store, kernel.events, kernel_resolver(kernel))
        if svc is None:
            kernel.contributions.add("kernel", "service", Service("tasks", self.tasks), [])
        repo = tmp / "repo"
        repo.mkdir(exist_ok=True)
        self.project = self.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(repo),))

    @property
    def agents(self) -> Any:
        return self.kernel.contributions.get("service", "agents").obj.obj

    def events(self, type_: str) -> list[dict[str, Any]]:
        rows = self.store.query("SELECT data FROM events WHERE type = ? ORDER BY id", (type_,))
        return [json.loads(r["data"]) for r in rows]

    def create_task(self) -> int:
        return int(self.tasks.create(title="Do it", project_id=self.project, exec="claude:fake", description="Run the thing.")["id"])


@asynccontextmanager
async def world(tmp: Path, socket: str, screen: Path) -> AsyncIterator[World]:
    config = {
        "tmux": {"socket": socket, "enter_delay": 0.05},
        "claude-code": {"binary": str(_stand_in(tmp)), "env": {"SCREEN_FILE": str(screen)}},
        "agents": FAST,
        "deriver": {"sweep_interval": 0.5},
    }
    async with plugin_kernel(tmp, enable=["agents", "deriver", "tmux", "claude-code"], config=config) as kernel:
        w = World(kernel, tmp)
        await until(lambda: w.agents.ready.is_set(), what="agents ready")
        yield w


@pytest.fixture
def socket_name() -> Any:
    with private_tmux_socket() as name:
        yield name


async def test_not_logged_in_blocks_the_task_with_a_note(tmp_path: Path, socket_name: str) -> None:
    screen = SCREENS / "claude" / "captured" / "24_auth_required_80x24_not_logged_in.txt"
    async with world(tmp_path, socket_name, screen) as w:
        task_id = w.create_task()
        task = await until(lambda: (lambda t: t if t["state"] == "blocked" else None)(w.tasks.get(task_id)), what="task blocked")
        assert task["resume_note"] == auth_note("claude")
        assert "Claude Code is not logged in" in task["resume_note"] and "/login" in task["resume_note"]
        # no decision: nothing to answer
        assert w.agents.decisions.list_decisions(task_id=task_id) == []
        # the web sees it: an error signal naming the state, the agent's exit, the task update
        signals = [e for e in w.events("signal") if e["task_id"] == task_id]
        assert any(e["signal"] == "error" and e["state"] == "auth_required" for e in signals), signals
        assert not any(e["signal"] in ("complete", "needs_input") for e in signals), signals
        # the task is blocked first; agent.exited follows once its tmux session has ended
        exited = await until(lambda: [e for e in w.events("agent.exited") if e["task_id"] == task_id], what="agent.exited")
        assert exited[-1]["reason"] == auth_note("claude")
        assert any(e.get("task", {}).get("state") == "blocked" for e in w.events("task.updated") if e.get("task", {}).get("id") == task_id)
        session = await until(
            lambda: (lambda s: s if s["state"] != "running" else None)(w.agents.session_store.by_name(f"elowen-t{task_id}-a1")), what="session ended"
        )
        assert session["state"] == "exited" and session["end_reason"] == auth_note("claude")
        # blocked stays blocked: not relaunched by the stuck detector
        await trio.sleep(1.0)  # several stuck-detector and liveness passes
        assert w.tasks.get(task_id)["state"] == "blocked" and w.tasks.get(task_id)["attempts"] == 1


async def test_agent_printing_not_logged_in_is_not_blocked(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, LOOKALIKES["claude"]) as w:
        task_id = w.create_task()
        await until(lambda: any(e["task_id"] == task_id and e["signal"] == "complete" for e in w.events("signal")), what="complete signal")
        await trio.sleep(1.0)  # several sweeps and liveness passes
        assert w.tasks.get(task_id)["state"] == "in_progress"
        assert not any(e["state"] == "auth_required" for e in w.events("signal"))
        assert w.agents.session_store.by_name(f"elowen-t{task_id}-a1")["state"] == "running"

"""Smoke test: each real agent CLI, offline in real tmux, asks permission for a shell command.

For Claude Code 2.1.197, Codex 0.171.0, OpenCode 1.18.33 and Kilo 7.7.7 (installed by
``scripts/install-test-deps``): start the CLI against the scripted model server, type a prompt that
makes the model request ``echo … > file && cat file``, wait for the permission prompt on screen,
approve it with the CLI's key, then check the file exists and the model server received the tool
result carrying the command's output.

Screen markers and keys are from the CLIs themselves (see ``tests/fixtures/screens/README.md``);
the classifier proper lives in the provider plugins and is tested there.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.agent_env import CLIS, AgentLaunch, Cli, prepare_agent
from tests.support.model_server import ModelServer

STEP_TIMEOUT = 60.0  # seconds per step; the CLIs start in 2–8 s on a 2-core machine
POLL = 0.2


@dataclass(frozen=True)
class CliScreen:
    """Fixed on-screen strings and keys of one CLI version (rendered ``capture-pane -p`` text)."""

    ready: str  # visible once the composer accepts input
    permission: str  # the permission prompt's question or header
    approve: tuple[str, ...]  # tmux key names that approve the focused "allow once" option
    reject: tuple[str, ...]


SCREENS: dict[Cli, CliScreen] = {
    "claude": CliScreen("? for shortcuts", "Do you want to proceed?", ("1",), ("Escape",)),
    "codex": CliScreen("? for shortcuts", "Would you like to run the following command?", ("y",), ("Escape",)),
    "opencode": CliScreen("ctrl+p commands", "Permission required", ("Enter",), ("Escape",)),
    "kilo": CliScreen("ctrl+p commands", "Permission required", ("Enter",), ("Escape",)),
}


class TmuxPane:
    """One tmux session on a private server (``-L elowen-test-<random>``), targeted exactly."""

    def __init__(self, socket: str, session: str = "agent") -> None:
        self.socket = socket
        self.target = f"={session}:"
        self.session = session

    def tmux(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False)
        if check and result.returncode != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {result.stderr.strip()}")
        return result.stdout

    def start(self, launch: AgentLaunch, width: int, height: int) -> None:
        """Start a fresh server whose global environment is exactly ``launch.env``.

        ``focus-events on`` keeps Claude Code from showing a tmux hint in its footer;
        ``remain-on-exit on`` keeps an exited CLI's last screen readable.
        """
        subprocess.run(
            [
                "tmux",
                "-L",
                self.socket,
                "-f",
                "/dev/null",
                "start-server",
                ";",
                "set-option",
                "-g",
                "focus-events",
                "on",
                ";",
                "set-option",
                "-g",
                "remain-on-exit",
                "on",
                ";",
                "new-session",
                "-d",
                "-s",
                self.session,
                "-x",
                str(width),
                "-y",
                str(height),
                "-c",
                str(launch.repo),
                *launch.argv,
            ],
            env=launch.env,
            check=True,
            capture_output=True,
        )

    def capture(self, ansi: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if ansi else []), "-t", self.target)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.target, *keys)

    def type_line(self, text: str) -> None:
        """Type ``text`` literally, pause (Enter right after fast typing can be dropped), Enter."""
        self.tmux("send-keys", "-t", self.target, "-l", "--", text)
        time.sleep(0.6)
        self.keys("Enter")

    def wait_for(self, predicate: Callable[[str], bool], what: str) -> str:
        """Poll the rendered screen every 0.2 s until ``predicate`` holds; fail after 60 s."""
        deadline = time.monotonic() + STEP_TIMEOUT
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if predicate(screen):
                return screen
            time.sleep(POLL)
        raise AssertionError(f"timed out waiting for {what}; screen was:\n{screen}")

    def wait_text(self, text: str) -> str:
        return self.wait_for(lambda screen: text in screen, repr(text))

    def kill(self) -> None:
        self.tmux("kill-server", check=False)


@pytest.fixture
def pane() -> Iterator[TmuxPane]:
    pane = TmuxPane(f"elowen-test-{uuid.uuid4().hex[:10]}")
    try:
        yield pane
    finally:
        pane.kill()


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def make_world(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh fake HOME and a git repository to work in (OpenCode/Kilo show its branch)."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return home, repo


@pytest.mark.slow
@pytest.mark.parametrize("cli", CLIS)
def test_permission_prompt_approve_runs_command(cli: Cli, tmp_path: Path, pane: TmuxPane, model_server: ModelServer) -> None:
    home, repo = make_world(tmp_path)
    screen = SCREENS[cli]
    launch = prepare_agent(cli, home, repo, model_server.url)
    pane.start(launch, width=200, height=50)
    pane.wait_text(screen.ready)

    marker = f"smoke-{cli}-{uuid.uuid4().hex[:6]}"
    pane.type_line(f"Please create a file. RUN: echo {marker} > smoke.txt && cat smoke.txt")
    prompt_screen = pane.wait_text(screen.permission)
    assert "smoke.txt" in prompt_screen
    assert not (repo / "smoke.txt").exists(), "command ran before it was approved"

    pane.keys(*screen.approve)
    result = model_server.wait_for(lambda r: any(marker in t.output for t in r.tool_results), timeout=STEP_TIMEOUT)
    assert (repo / "smoke.txt").read_text().strip() == marker
    assert result.prompt.startswith("Please create a file.")
    pane.wait_text("FAKE: done.")

"""The REAL CLIs in real tmux panes (200x50) against the scripted model server: each makes one
tool call, and the prompt it draws must classify as a permission prompt whose normalised
request names the exact action (the same path the deriver takes: ``provider classify`` then
``normalize_request`` with the session's cwd). Skipped when a CLI is not installed."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from elowen_builtins.agents.screen import classify
from elowen_sdk.screen import normalize_request
from tests.support.agent_env import MissingCliError, cli_binary, prepare_agent
from tests.support.model_server import ModelServer, ParsedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

PATCH = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {home}/.ssh/authorized_keys\n+ssh-ed25519 AAAAC3Nza fake@host\n*** End Patch\nEOF\n"


def _drive(tmp_path: Path, cli: str, tool: str, args: Mapping[str, Any], marker: str, wait_ready: float) -> tuple[str, Path, Path]:
    """Start ``cli``, ask it to go, let the model call ``tool``; returns (screen, repo, home)."""
    try:
        cli_binary(cli)  # type: ignore[arg-type]
    except MissingCliError as exc:
        pytest.skip(f"{cli} is not installed here ({exc})")
    home, repo = tmp_path / "home", tmp_path / "work" / "repo"
    home.mkdir()
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("demo\n")
    filled = {k: (v.format(home=home) if isinstance(v, str) else v) for k, v in args.items()}

    def script(req: ParsedRequest) -> Reply:
        if not req.has_tools:
            return Reply(text="Fake session title")
        if req.tool_results:
            return Reply(text="FAKE: done.")
        return Reply(text="FAKE: I will use a tool.", tool_calls=(ToolCall(tool, filled),))

    sock = str(tmp_path / "tmux.sock")
    with ModelServer(script=script) as srv:
        launch = prepare_agent(cli, home, repo, srv.url)  # type: ignore[arg-type]
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.env.items())
        cmd = f"cd {shlex.quote(str(repo))} && exec env -i {envs} {' '.join(map(shlex.quote, launch.argv))}"
        tmux = ["tmux", "-S", sock]
        subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", "-s", "live", cmd], check=True, env={**os.environ, "TMUX": ""})
        try:
            _submit(tmux, cli, srv, "please go", wait_ready)
            screen = ""
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", "live"], capture_output=True, text=True).stdout
                if marker in screen:
                    time.sleep(1.5)  # let the prompt finish drawing
                    screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", "live"], capture_output=True, text=True).stdout
                    break
                time.sleep(0.5)
            assert marker in screen, screen
            return screen, repo, home
        finally:
            pid = subprocess.run([*tmux, "display", "-p", "-t", "live", "#{pane_pid}"], capture_output=True, text=True).stdout.strip()
            if pid.isdigit():
                try:
                    os.killpg(int(pid), signal.SIGTERM)  # some CLIs outlive kill-server at a prompt
                except ProcessLookupError:
                    pass
            subprocess.run([*tmux, "kill-server"], capture_output=True)


def _submit(tmux: list[str], cli: str, srv: ModelServer, text: str, wait_ready: float) -> None:
    """Type ``text`` into the CLI's composer and submit it, checking each step on screen.

    A fixed start-up sleep was not enough: under load OpenCode and Kilo draw their composer
    20–40 s after start, and keys typed before it accepts input are dropped without a trace, so
    the prompt came "late" (never). Wait for the ``idle`` screen (at most ``wait_ready`` × 6 s),
    retype until the text shows, then press Enter until the model server hears the prompt."""

    def capture() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", "live"], capture_output=True, text=True).stdout

    deadline = time.monotonic() + wait_ready * 6
    while classify(cli, capture()).state != "idle":
        assert time.monotonic() < deadline, f"{cli} never showed an idle composer:\n{capture()}"
        time.sleep(0.5)
    for _ in range(5):
        subprocess.run([*tmux, "send-keys", "-t", "live", "-l", text], check=True)
        time.sleep(1)
        if text in capture():
            break
        time.sleep(2)  # dropped: the composer was not taking input yet
    assert text in capture(), f"{cli} never showed the typed text:\n{capture()}"
    subprocess.run([*tmux, "send-keys", "-t", "live", "Enter"], check=True)
    presses, deadline = 1, time.monotonic() + 120
    while time.monotonic() < deadline:
        try:  # the first request can take long: OpenCode and Kilo load their provider package first
            srv.wait_for(lambda r: r.has_tools and text in r.prompt, timeout=3)
            return
        except TimeoutError:
            pass
        if presses < 3 and text in capture() and classify(cli, capture()).state == "idle":
            subprocess.run([*tmux, "send-keys", "-t", "live", "Enter"], check=True)  # dropped, or taken as a newline
            presses += 1
    raise AssertionError(f"{cli} never sent the prompt to the model:\n{capture()}")


def _request(cli: str, screen: str, repo: Path, home: Path) -> dict[str, Any]:
    c = classify(cli, screen)
    assert c.state == "permission_prompt", screen
    return normalize_request(c.request, cwd=str(repo), home=str(home))


def test_live_claude_webfetch(tmp_path: Path) -> None:
    screen, repo, home = _drive(tmp_path, "claude", "WebFetch", {"url": "https://example.com/page", "prompt": "Summarise"}, "fetch this content", 8)
    r = _request("claude", screen, repo, home)
    assert r["kind"] == "fetch" and r["url"] == "https://example.com/page" and r["complete"]


def test_live_claude_write_outside_the_checkout(tmp_path: Path) -> None:
    target = tmp_path / "outside" / "e2e-outside-write.txt"
    screen, repo, home = _drive(tmp_path, "claude", "Write", {"file_path": str(target), "content": "hello\n"}, "Do you want to create", 8)
    r = _request("claude", screen, repo, home)
    assert r["kind"] == "write" and r["paths"] == [str(target.parent.resolve() / target.name)] and r["complete"]
    assert not target.exists()


def test_live_claude_bash_with_a_variable(tmp_path: Path) -> None:
    cmd = "elowen close $ELOWEN_TASK --summary done"
    screen, repo, home = _drive(tmp_path, "claude", "Bash", {"command": cmd, "description": "Close the task"}, "Do you want to proceed", 8)
    r = _request("claude", screen, repo, home)
    assert r["command"] == cmd and r["description"] == "Close the task" and r["complete"]


def test_live_codex_apply_patch_to_authorized_keys(tmp_path: Path) -> None:
    screen, repo, home = _drive(tmp_path, "codex", "exec_command", {"cmd": PATCH}, "Would you like to make the following edits", 10)
    r = _request("codex", screen, repo, home)
    assert r["kind"] == "patch" and r["paths"] == [str(home / ".ssh" / "authorized_keys")] and r["complete"]
    assert "+ssh-ed25519" in (r["diff"] or "")


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
def test_live_external_directory(tmp_path: Path, cli: str) -> None:
    screen, repo, home = _drive(tmp_path, cli, "read", {"filePath": "/root/.bashrc"}, "Permission required", 20)
    r = _request(cli, screen, repo, home)
    assert r["kind"] == "directory" and r["directory"] == "/root" and r["patterns"] == ["/root/*"] and r["complete"]

"""The README's "A first session", run literally, with the real Claude Code.

The commands are parsed out of ``README.md`` (the indented block under ``## A first session``),
so a change to the README is what gets tested. Each line runs unchanged in ``bash`` from a
folder holding ``.venv`` (this test's virtualenv), as a newcomer would run it from the
checkout: the first ``elowen`` command autostarts the daemon in the default home
(``~/.config/elowen``) of a fresh ``HOME``. Only what the README says to do *before* the session
is prepared here, the way docs/agents.md says: Claude Code 2.1.197 (from
``scripts/install-test-deps``) is on the ``PATH`` and pointed, through the claude-code plugin's
``env``, at the scripted model server (``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_AUTH_TOKEN``); the
brain's chat model is a provider on that server (``elowen provider add``'s result in
``config.toml``). The daemon's ports are free ones (``ELOWEN_PORT``/``ELOWEN_WEB_PORT``).

The scripted model makes the agent of "Add a README" ask to run one shell command that writes
``README.md`` and closes the task with ``elowen close``; the session's ``decide 1 --approve``
lets it run. A line the README says to run again (``agents`` until the agent shows,
``escalations`` until the prompt waits) is repeated as the user would.

A second test follows the README's paragraph on a missing CLI: the task is blocked at once with a
note, ``elowen task reopen 1`` after the CLI is set up starts it, and the relaunched agent's
prompt does not carry the stale "Cannot start" note.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import tomli_w

from tests.support.agent_env import FAKE_MODEL, cli_binary, prepare_agent
from tests.support.model_server import DefaultScript, ModelServer, ParsedRequest, Reply, shell_tool_call
from tests.support.waiting import free_port, wait

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
STEP = 90.0  # seconds a repeated line may take to show what it waits for
MARKER = "first-session-ok"
CLOSE = f'printf "# demo\\n" > README.md && elowen close $ELOWEN_TASK --summary "added README.md" --evidence "README.md says {MARKER}"'


def first_session(readme: Path = REPO / "README.md") -> list[str]:
    """The command lines of the README's ``## A first session`` (its first indented block)."""
    text = readme.read_text(encoding="utf-8")
    match = re.search(r"^## A first session\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## A first session' section"
    lines: list[str] = []
    for line in match.group(1).splitlines():
        if line.startswith("    ") and line.strip():
            lines.append(line[4:])
        elif lines and line.strip():
            break  # the block ended
    assert lines, "the first-session section has no indented command block"
    return lines


def test_the_first_session_is_parsed_from_the_readme(tmp_path: Path) -> None:
    """The parser takes the block's lines (comments and all) and stops at the block's end."""
    readme = tmp_path / "README.md"
    readme.write_text("# X\n\n## A first session\n\nSay:\n\n    a one  # c\n    b two\n\nAfter.\n\n    not this\n\n## Next\n")
    assert first_session(readme) == ["a one  # c", "b two"]
    commands = first_session()
    assert any(" task create " in c for c in commands) and any(" decide " in c for c in commands)


class Script(DefaultScript):
    """The agent of "Add a README" asks to run :data:`CLOSE`; everything else as the default
    (the brain's "hello" gets ``FAKE: ok.``)."""

    def __call__(self, request: ParsedRequest) -> Reply:
        if request.has_tools and "Add a README" in request.prompt:
            if not request.tool_results:
                return Reply(text="FAKE: I will write it.", tool_calls=(shell_tool_call(request, CLOSE),))
            return Reply(text="FAKE: done.")
        return super().__call__(request)


@dataclass
class Newcomer:
    """A fresh user account: ``HOME``, the checkout folder to run lines from, the environment."""

    home: Path
    checkout: Path
    env: dict[str, str]
    model: ModelServer
    log: list[str] = field(default_factory=list)

    @property
    def elowen_home(self) -> Path:
        return self.home / ".config" / "elowen"

    def run(self, line: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run one README line in bash, as typed; record it for failure reports."""
        proc = subprocess.run(["bash", "-c", line], cwd=self.checkout, env=self.env, capture_output=True, text=True, timeout=timeout)
        self.log.append(f"$ {line}\n→ {proc.returncode}\n{proc.stdout}{proc.stderr}")
        return proc

    def ok(self, line: str) -> str:
        proc = self.run(line)
        assert proc.returncode == 0, self.report()
        assert "Traceback" not in proc.stderr, self.report()
        return proc.stdout

    def until(self, line: str, seen: str) -> str:
        """Run ``line`` again until its output matches the regex ``seen`` (each run must succeed)."""
        return str(
            wait(lambda: (lambda out: out if re.search(seen, out) else None)(self.ok(line)), f"{line!r} to show {seen!r}", STEP, self.report, interval=1.0)
        )

    def socket(self) -> str:
        return "elowen-" + hashlib.sha256(str(self.elowen_home.resolve()).encode()).hexdigest()[:8]

    def report(self) -> str:
        log = self.elowen_home / "logs" / "daemon.log"
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no daemon log)"
        screens = subprocess.run(["tmux", "-L", self.socket(), "list-panes", "-a", "-F", "#{session_name}"], capture_output=True, text=True).stdout.split()
        caps = [subprocess.run(["tmux", "-L", self.socket(), "capture-pane", "-p", "-t", f"={s}:"], capture_output=True, text=True).stdout for s in screens]
        return "\n".join([*self.log[-12:], "--- screens", *caps, "--- daemon log", tail])


@pytest.fixture
def newcomer(tmp_path: Path) -> Iterator[Newcomer]:
    try:
        cli_binary("claude")
    except Exception as exc:
        pytest.skip(str(exc))
    home = tmp_path / "home"
    home.mkdir()
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(Path(sys.executable).parent.parent)  # .venv/bin/elowen is this test's
    with ModelServer(Script()) as model:
        # the agent's world, as docs/agents.md sets it up: its config under HOME, the endpoint in env
        (home / "src" / "demo").mkdir(parents=True)
        launch = prepare_agent("claude", home, home / "src" / "demo", model.url)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ELOWEN_", "ANTHROPIC_"))}
        env.update(HOME=str(home), PATH=launch.env["PATH"], ELOWEN_PORT=str(free_port()), ELOWEN_WEB_PORT=str(free_port()))
        user = Newcomer(home, checkout, env, model)
        user.elowen_home.mkdir(parents=True)
        settings = {
            "plugins": {
                "claude-code": {"config": {"env": {k: v for k, v in launch.env.items() if k != "PATH"}}},
                "inference": {"config": {"default_model": f"fake/{FAKE_MODEL}"}},
            },
            "inference": {"providers": {"fake": {"kind": "openai", "base_url": model.url + "/v1", "max_retries": 0, "timeout": 20}}},
        }
        (user.elowen_home / "config.toml").write_text(tomli_w.dumps(settings))
        try:
            yield user
        finally:
            subprocess.run([str(checkout / ".venv" / "bin" / "elowen"), "down", "--agents", "--force"], env=env, capture_output=True, timeout=60)
            subprocess.run(["tmux", "-L", user.socket(), "kill-server"], capture_output=True)


def test_the_readme_first_session_works_as_written(newcomer: Newcomer) -> None:
    commands = first_session()
    for line in commands:
        command = line.split("#", 1)[0].split()
        if command[1:2] == ["agents"]:
            out = newcomer.until(line, "elowen-t1-a1")  # the agent shows once the scheduler started it
            assert "claude" in out
        elif command[1:2] == ["escalations"]:
            newcomer.until(line, "elowen close")  # its permission prompt (the command it asks to run), once it asks
            assert not (newcomer.home / "src" / "demo" / "README.md").exists(), "the command ran before it was approved"
        elif command[1:2] == ["task"] and command[2:3] == ["show"]:
            out = newcomer.until(line, r"state:\s+closed")  # the agent closes it after the approval
            assert "added README.md" in out and MARKER in out, newcomer.report()
        elif command[1:2] == ["executors"]:
            out = newcomer.ok(line)
            row = next(r for r in out.splitlines() if r.startswith("claude "))
            assert str(cli_binary("claude")) in row and "NOT FOUND" not in row, out
        elif command[1:2] == ["chat"]:
            out = newcomer.ok(line)
            assert "FAKE: ok." in out, newcomer.report()
        elif command[1:2] == ["down"]:
            out = newcomer.ok(line)
            assert "daemon: stopped" in out
        else:
            newcomer.ok(line)
        if command[1:2] == ["task"] and command[2:3] == ["create"]:
            # the README's statement about the socket: the agent runs on tmux -L elowen-<hash of the home>
            wait(
                lambda: "elowen-t1-a1" in subprocess.run(["tmux", "-L", newcomer.socket(), "ls"], capture_output=True, text=True).stdout,
                "the agent on the home's tmux server",
                STEP,
                newcomer.report,
            )
    assert (newcomer.home / "src" / "demo" / "README.md").read_text() == "# demo\n"
    # `down --agents` ended the home's tmux server with its agents
    assert subprocess.run(["tmux", "-L", newcomer.socket(), "ls"], capture_output=True).returncode != 0
    assert any(" down --agents" in c for c in commands), "the session ends by stopping Elowen and its agents"


def test_a_missing_cli_blocks_the_task_and_reopen_starts_it_without_the_stale_note(newcomer: Newcomer) -> None:
    real = cli_binary("claude")
    missing = f"/nonexistent-{uuid.uuid4().hex[:6]}/claude"
    elowen = ".venv/bin/elowen"
    newcomer.ok(f"{elowen} plugin config claude-code binary={missing}")
    newcomer.ok(f"{elowen} project add demo ~/src/demo")
    out = newcomer.ok(f"{elowen} executors")
    assert "NOT FOUND" in next(r for r in out.splitlines() if r.startswith("claude ")), out
    created = newcomer.run(f'{elowen} task create "Add a README" --project demo --exec claude')
    assert created.returncode == 0 and "task will be blocked" in created.stderr, newcomer.report()  # warned
    shown = newcomer.until(f"{elowen} task show 1", r"state:\s+blocked")
    assert "Cannot start claude" in shown and "elowen task reopen 1" in shown, shown
    assert not newcomer.model.requests, "nothing was started"
    newcomer.ok(f"{elowen} plugin config claude-code binary={real}")
    assert "task 1: open" in newcomer.ok(f"{elowen} task reopen 1")
    newcomer.until(f"{elowen} escalations", "elowen close")
    prompts = [r.prompt for r in newcomer.model.requests if r.has_tools and "Add a README" in r.prompt]
    assert prompts, newcomer.report()
    assert all("Cannot start" not in p and "relaunch" not in p for p in prompts), prompts[0]
    # reopening a task that is already running is refused (non-zero)
    again = newcomer.run(f"{elowen} task reopen 1")
    assert again.returncode == 1 and "already in progress" in again.stderr, newcomer.report()

"""Fixtures for the CLI tests: the real ``elowen`` console script run as a subprocess against
a real daemon subprocess on a free loopback port, each with its own ``ELOWEN_HOME``.

The builtin tmux plugin is pointed at a private socket (``elowen-test-<random>``) that is
killed afterwards, so no test touches a real tmux server; the builtin ``agents`` plugin is
disabled so that creating a task does not start a coding agent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import free_port

ELOWEN = Path(sys.executable).parent / "elowen"
RUN_TIMEOUT = 60.0


@dataclass
class Home:
    """One Elowen home: its folder, port, tmux socket, and the environment to run the CLI in."""

    path: Path
    port: int
    tmux_socket: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``elowen ARGS`` to completion (text output captured)."""
        return subprocess.run([str(ELOWEN), *args], env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout, cwd=cwd)

    def ok(self, *args: str, **kwargs: Any) -> str:
        """Run ``elowen ARGS``, assert exit status 0, return stdout."""
        proc = self.run(*args, **kwargs)
        assert proc.returncode == 0, f"elowen {' '.join(args)} → {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.stdout

    def json(self, *args: str, **kwargs: Any) -> Any:
        """Run ``elowen ARGS --json`` and parse stdout."""
        return json.loads(self.ok(*args, "--json", **kwargs))

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([str(ELOWEN), *args], env={**self.env, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def pid_info(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.path / "daemon.pid").read_text())
        except (OSError, ValueError):
            return None

    def token(self) -> str:
        return (self.path / "admin.token").read_text().strip()


def make_home(root: Path) -> Home:
    path = root / "elowen-home"
    path.mkdir(parents=True, exist_ok=True)
    tmux_socket = f"elowen-test-{uuid.uuid4().hex[:10]}"
    # agents off: a created task must stay open instead of spawning a coding agent
    (path / "config.toml").write_text(f'[plugins.tmux.config]\nsocket = "{tmux_socket}"\n\n[plugins.agents]\nenabled = false\n')
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELOWEN_")}
    env.update(ELOWEN_HOME=str(path), ELOWEN_HOST="127.0.0.1", ELOWEN_PORT=str(port), ELOWEN_WEB_PORT=str(free_port()))
    return Home(path=path, port=port, tmux_socket=tmux_socket, env=env)


def cleanup_home(home: Home) -> None:
    """Stop the home's daemon (SIGKILL if it will not stop) and its tmux server."""
    info = home.pid_info()
    subprocess.run([str(ELOWEN), "web", "stop"], env=home.env, capture_output=True, timeout=30)
    subprocess.run([str(ELOWEN), "daemon", "stop", "--force", "--timeout", "10"], env=home.env, capture_output=True, timeout=30)
    if info and isinstance(info.get("pid"), int):
        try:
            os.kill(info["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["tmux", "-L", home.tmux_socket, "kill-server"], capture_output=True)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    """A fresh home with no daemon running (a test may start one; it is stopped afterwards)."""
    h = make_home(tmp_path)
    try:
        yield h
    finally:
        cleanup_home(h)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """A home with a daemon started by ``elowen daemon start``, shared by a test module."""
    h = make_home(tmp_path_factory.mktemp("cli"))
    try:
        h.ok("daemon", "start")
        yield h
    finally:
        cleanup_home(h)


@pytest.fixture(scope="module")
def project(daemon: Home, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A project registered in the shared daemon (a fresh folder)."""
    folder = tmp_path_factory.mktemp("project")
    return daemon.json("project", "add", "demo", str(folder))


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")

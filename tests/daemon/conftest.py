"""A real daemon subprocess on a free loopback port with its own ELOWEN_HOME."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

START_TIMEOUT = 45.0  # a deadline, not an expectation: a loaded CI machine starts slower


@dataclass
class DaemonProc:
    """A running ``python -m elowen.daemon``."""

    home: Path
    proc: subprocess.Popen[bytes]
    port: int
    admin_token: str
    log_path: Path
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = None, **kwargs: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10.0, **kwargs)  # type: ignore[arg-type]

    def admin(self) -> httpx.Client:
        return self.client(self.admin_token)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def spawn(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start the daemon process (stderr to ``home/stderr.txt``)."""
    home.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "ELOWEN_SSE_HEARTBEAT": "0.5", **(env or {})}
    full_env.pop("ELOWEN_DB", None)
    stderr = open(home.parent / f"{home.name}-stderr.txt", "ab")  # noqa: SIM115 - owned by the process
    return subprocess.Popen(
        [sys.executable, "-m", "elowen.daemon", "--home", str(home), "--port", "0", *args],
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def wait_ready(home: Path, proc: subprocess.Popen[bytes], timeout: float = START_TIMEOUT) -> int:
    """Wait for this process's pid file and a 200 from /health; returns the port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited with {proc.returncode}: {(home.parent / f'{home.name}-stderr.txt').read_text()}")
        try:
            info = json.loads((home / "daemon.pid").read_text())
        except (OSError, ValueError):
            info = None
        if info and info.get("pid") == proc.pid:
            try:
                r = httpx.get(f"http://127.0.0.1:{info['port']}/health", timeout=1)
                if r.status_code == 200 and r.json().get("plugins") == "ready":
                    return int(info["port"])
            except httpx.HTTPError:
                pass
        time.sleep(0.02)
    raise RuntimeError("daemon did not become ready")


def start_daemon(home: Path, *args: str, env: dict[str, str] | None = None) -> DaemonProc:
    proc = spawn(home, *args, env=env)
    try:
        port = wait_ready(home, proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    token = (home / "admin.token").read_text().strip()
    return DaemonProc(home, proc, port, token, home.parent / f"{home.name}-stderr.txt")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProc]:
    """A fresh daemon per test (no plugins from entry points)."""
    d = start_daemon(tmp_path / "home", "--no-plugins")
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    """One daemon for a whole test module (with the builtin plugins)."""
    d = start_daemon(tmp_path_factory.mktemp("daemon") / "home")
    try:
        yield d
    finally:
        d.stop()

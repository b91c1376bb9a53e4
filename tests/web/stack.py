"""A real daemon process and a real web process on free loopback ports, for the web tests.

The daemon runs with the builtin plugins; its ``config.toml`` points tmux at a private socket,
Claude Code at the fake agent (``tests/agents/fake_agent.py``: real captured Claude Code
screens, real keys from its tty), makes the agents plugin's loops fast, disables the
overseer (so a decision waits for a human) and parks tasks without an executor (their
fallback, kilo, is off). Heartbeats are fast: daemon 0.5 s, web stream
window 3 s.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import tomli_w

from tests.support.waiting import free_port

ROOT = Path(__file__).resolve().parents[2]
FAKE_AGENT = ROOT / "tests" / "agents" / "fake_agent.py"
START_TIMEOUT = 20.0
FAST_AGENTS = {"scheduler_interval": 0.3, "sweep_interval": 0.3, "liveness_interval": 0.2, "stuck_interval": 0.5, "janitor_interval": 0.5}


def _wait_health(url: str, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            r = httpx.get(f"{url}/health", timeout=1)
            if r.status_code == 200 and r.json().get("plugins", "ready") == "ready":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not become ready:\n{log.read_text(errors='replace')[-3000:]}")


@dataclass
class Stack:
    """Both processes, their home and helpers."""

    root: Path
    daemon_port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    socket_name: str = field(default_factory=lambda: f"elowen-test-{uuid.uuid4().hex[:10]}")
    daemon: subprocess.Popen[bytes] | None = None
    web: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def daemon_url(self) -> str:
        return f"http://127.0.0.1:{self.daemon_port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def fake_log(self) -> Path:
        return self.root / "fake.log"

    @property
    def admin_token(self) -> str:
        return (self.home / "admin.token").read_text().strip()

    def admin(self) -> httpx.Client:
        """A client of the daemon (for arranging data, never for the checks themselves)."""
        return httpx.Client(base_url=self.daemon_url, headers={"Authorization": f"Bearer {self.admin_token}"}, timeout=10)

    def fake_events(self) -> list[dict[str, object]]:
        if not self.fake_log.exists():
            return []
        return [json.loads(line) for line in self.fake_log.read_text().splitlines() if line.strip()]

    def write_config(self) -> None:
        wrapper = self.root / "fake-claude"
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
        self.home.mkdir(parents=True, exist_ok=True)
        config = {
            "plugins": {
                "tmux": {"config": {"socket": self.socket_name, "enter_delay": 0.05}},
                "claude-code": {"config": {"binary": str(wrapper), "env": {"FAKE_LOG": str(self.fake_log)}}},
                "agents": {"config": FAST_AGENTS},
                "overseer": {"enabled": False},
                # tasks without an executor fall back to kilo, which is off here: they stay
                # open (only tasks naming claude:… get the fake agent)
                "kilo": {"enabled": False},
            },
            "execs": {"fallback": "kilo:parked"},
        }
        (self.home / "config.toml").write_text(tomli_w.dumps(config))

    def start_daemon(self) -> None:
        log = self.root / "daemon.out"
        env = {**os.environ, "ELOWEN_SSE_HEARTBEAT": "0.5", "ELOWEN_HOME": str(self.home)}
        for key in ("ELOWEN_URL", "ELOWEN_TOKEN", "ELOWEN_DB"):
            env.pop(key, None)
        with open(log, "ab") as out:
            self.daemon = subprocess.Popen(
                [sys.executable, "-m", "elowen.daemon", "--home", str(self.home), "--port", str(self.daemon_port)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        _wait_health(self.daemon_url, self.daemon, "daemon", log)

    def stop_daemon(self, sig: int = signal.SIGTERM) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(sig)
            try:
                self.daemon.wait(15)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()

    def start_web(self) -> None:
        log = self.root / "web.out"
        env = {
            **os.environ,
            "ELOWEN_HOME": str(self.home),
            "ELOWEN_URL": self.daemon_url,
            "ELOWEN_WEB_PORT": str(self.web_port),
            "ELOWEN_WEB_STREAM_WINDOW": "3",
        }
        with open(log, "ab") as out:
            self.web = subprocess.Popen([sys.executable, "-m", "elowen.web"], env=env, stdout=out, stderr=subprocess.STDOUT)
        _wait_health(self.web_url, self.web, "web", log)

    def stop(self) -> None:
        if self.web is not None and self.web.poll() is None:
            self.web.terminate()
            try:
                self.web.wait(10)
            except subprocess.TimeoutExpired:
                self.web.kill()
                self.web.wait()
        self.stop_daemon()
        subprocess.run(["tmux", "-L", self.socket_name, "kill-server"], capture_output=True, check=False)

    def project(self) -> int:
        """The id of project ``demo`` (created on first use, folder ``root/repo``)."""
        with self.admin() as c:
            for p in c.get("/projects").json()["items"]:
                if p["name"] == "demo":
                    return int(p["id"])
            repo = self.root / "repo"
            repo.mkdir(exist_ok=True)
            r = c.post("/projects", json={"name": "demo", "path": str(repo)})
            r.raise_for_status()
            return int(r.json()["id"])


def start_stack(root: Path) -> Stack:
    stack = Stack(root)
    stack.write_config()
    try:
        stack.start_daemon()
        stack.start_web()
    except BaseException:
        stack.stop()
        raise
    return stack

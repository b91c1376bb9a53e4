"""The web test stack (``tests/web/stack.py``: a real daemon and web process, real tmux) with a
small recording agent in place of Claude Code: it draws a screen with underscores
(``fake_created.txt`` and a full row of ``_``), puts its tty in raw mode, appends every byte it
reads to a file and echoes each line it reads (``read: <line>``)."""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.waiting import wait
from tests.web.stack import Stack

UNDERSCORES = "_" * 40
SCREEN_MARK = "Create file fake_created.txt"

AGENT = r"""
import os, sys, tty
log = sys.argv[1]
tty.setraw(0)
out = sys.stdout.buffer
out.write(b"\x1b[H\x1b[2J Create file fake_created.txt\r\n" + b"_" * 40 + b"\r\n ? for shortcuts\r\n")
out.flush()
line = b""
with open(log, "ab", buffering=0) as rec:
    while True:
        data = os.read(0, 4096)
        if not data:
            break
        rec.write(data)
        for b in data:
            if b == 13:
                out.write(b"\r\nread: " + line + b"\r\n")
                line = b""
            elif b >= 32 or b == 9:
                out.write(bytes([b]))
                line += bytes([b])
        out.flush()
"""


@dataclass
class AgentStack(Stack):
    """The web stack whose Claude Code is the recording agent above."""

    @property
    def recorded(self) -> Path:
        return self.root / "recorded.bin"

    def write_config(self) -> None:
        super().write_config()
        script = self.root / "agent.py"
        script.write_text(AGENT)
        wrapper = self.root / "fake-claude"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} {self.recorded}\n")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)

    def typed(self) -> bytes:
        """Every byte the agent has read from its terminal so far."""
        return self.recorded.read_bytes() if self.recorded.exists() else b""

    def pane(self, session: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket_name, "capture-pane", "-p", "-t", f"={session}:"], capture_output=True, text=True, check=False)
        return out.stdout

    def start_agent(self, title: str) -> tuple[int, str]:
        """A task of the admin's run by the recording agent: ``(task id, tmux session)``."""
        project = self.project()
        with self.admin() as c:
            task = c.post("/tasks", json={"title": title, "project_id": project, "exec": "claude:fake"}).json()

            def running() -> str | None:
                items = c.get("/sessions", params={"task": task["id"], "state": "running"}).json()["items"]
                return items[0]["session"] if items else None

            session = wait(running, "the agent session", timeout=30)
        wait(lambda: SCREEN_MARK in self.pane(session), "the agent's screen", timeout=20)
        return int(task["id"]), str(session)


@pytest.fixture(scope="module")
def astack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentStack]:
    s = AgentStack(tmp_path_factory.mktemp("mission-control"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()

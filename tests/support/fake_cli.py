"""The scripted stand-in agent CLI (``tests/agents/fake_agent.py``) and private tmux servers
for the integration tests that drive it."""

from __future__ import annotations

import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FAKE_AGENT", "fake_claude", "private_tmux_socket"]

FAKE_AGENT = Path(__file__).resolve().parents[1] / "agents" / "fake_agent.py"


def fake_claude(folder: Path) -> Path:
    """An executable ``folder/fake-claude`` that starts the fake agent (a provider puts its
    flags after argv[0], as with the real CLI)."""
    path = folder / "fake-claude"
    path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@contextmanager
def private_tmux_socket() -> Iterator[str]:
    """A fresh ``elowen-test-<hex>`` tmux socket name; its server is killed afterwards."""
    name = f"elowen-test-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)

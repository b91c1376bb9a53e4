"""``zombie_exit_status``: the exit status of a pane's exited but not yet reaped program, read
from ``/proc`` (tmux 3.3a can miss a SIGCHLD when two panes exit together and then reports a
dead pane with no status until another child exits)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from elowen_builtins.tmux.server import zombie_exit_status


def _until_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        if state == b"Z":
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not become a zombie")


def test_an_unreaped_exit_status_is_read_and_gone_once_reaped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    _until_zombie(proc.pid)
    assert zombie_exit_status(proc.pid) == 3
    assert proc.wait() == 3
    assert zombie_exit_status(proc.pid) is None  # reaped: no such process


def test_a_running_or_signalled_process_has_no_status() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert zombie_exit_status(proc.pid) is None  # alive
        os.kill(proc.pid, signal.SIGKILL)
        _until_zombie(proc.pid)
        assert zombie_exit_status(proc.pid) is None  # killed by a signal: no exit status
    finally:
        proc.kill()
        proc.wait()
    assert zombie_exit_status(os.getpid()) is None  # running
    assert zombie_exit_status(2**22 + 12345) is None  # beyond pid_max: no /proc entry

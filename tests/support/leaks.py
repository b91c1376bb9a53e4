"""What a test run leaves behind: tmux servers, Elowen daemons and web front ends, scripted
model servers and agent CLIs still alive after the run.

:func:`snapshot` lists such processes (by ``/proc/<pid>/cmdline``) that carry the run's
marker in their environment (:data:`RUN_MARKER`, set by ``tests/conftest.py`` and inherited by
every process the run starts, tmux servers and their panes included), so other runs on the same
machine are never counted. The session check compares the set at the end of the run with the
one at its start and fails, listing each process, when something new is still alive.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RUN_MARKER", "Leak", "leaks_since", "snapshot"]

RUN_MARKER = "PYTEST_ELOWEN_RUN"
"""Environment variable holding the run's id (not ``ELOWEN_*``: test homes drop those)."""

_MARKERS = ("elowen.daemon", "elowen.web", "model_server", "fake_cli")
_CLI_NAMES = frozenset({"claude", "codex", "opencode", "kilo", "gemini", "qwen"})


@dataclass(frozen=True, slots=True)
class Leak:
    """A process still alive: ``pid``, ``kind`` (``tmux``, ``elowen``, ``agent``) and its
    command line (cut to 200 characters)."""

    pid: int
    kind: str
    cmdline: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.kind}): {self.cmdline}"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _kind(argv: list[str]) -> str | None:
    if not argv:
        return None
    program = os.path.basename(argv[0])
    if program == "tmux" or program.startswith("tmux:"):
        # a server (or a control client) of a private socket; personal servers have no -L
        return "tmux" if "-L" in argv else None
    joined = " ".join(argv)
    if "python" in program and any(m in joined for m in _MARKERS):
        return "elowen"
    if program in _CLI_NAMES or (program == "node" and any(f"/{name}" in joined for name in _CLI_NAMES)):
        return "agent"
    return None


def _marked(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def snapshot(run_id: str | None = None) -> dict[int, Leak]:
    """Every live process of the kinds above (of run ``run_id`` when given), by pid (zombies
    left out)."""
    marker = f"{RUN_MARKER}={run_id}".encode() if run_id else None
    found: dict[int, Leak] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z":
            continue
        argv = _cmdline(pid)
        kind = _kind(argv)
        if kind is not None and (marker is None or _marked(pid, marker)):
            found[pid] = Leak(pid, kind, " ".join(argv)[:200])
    return found


def leaks_since(before: dict[int, Leak], run_id: str | None = None, *, grace: float = 5.0) -> list[Leak]:
    """Processes (of run ``run_id``) alive now that were not in ``before``, after waiting up to
    ``grace`` seconds for them to exit on their own (a server ends shortly after its last
    session)."""
    deadline = time.monotonic() + grace
    while True:
        new = [leak for pid, leak in sorted(snapshot(run_id).items()) if pid not in before or before[pid].cmdline != leak.cmdline]
        if not new or time.monotonic() >= deadline:
            return new
        time.sleep(0.2)

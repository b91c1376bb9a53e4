"""The CLI version probe of setup health (``builtin_plugins/agents/clicheck.py``) with real
programs: it reads the version a CLI prints, and a program that ignores ``--version`` and starts
working (a wrapper script, a misconfigured binary) writes nothing where the daemon runs and is
ended, with the children it started, at the bound."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from elowen_builtins.agents import clicheck


def _program(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_version_a_cli_prints_is_read(tmp_path: Path) -> None:
    prog = _program(tmp_path / "cli", 'echo "2.1.197 (Claude Code)"\n')
    assert clicheck.program_version(prog) == "2.1.197"


def test_a_program_ignoring_version_writes_nowhere_and_is_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "daemon-cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(clicheck, "VERSION_TIMEOUT", 1.0)
    pids = tmp_path / "pids"
    # writes into its working folder and leaves a child sleeping, as an agent would start working
    prog = _program(tmp_path / "busy", f"echo started > agent_output.txt\nsleep 60 &\necho $! >> {pids}\nsleep 60\n")
    t0 = time.monotonic()
    assert clicheck.program_version(prog) is None
    assert time.monotonic() - t0 < 10
    assert list(work.iterdir()) == [], "the probe ran in the daemon's working folder"
    child = int(pids.read_text().split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # a zombie still answers kill(0): check its state
        try:
            if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the probe's child kept running")

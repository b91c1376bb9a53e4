"""Start a real daemon subprocess for a test: ``launch_daemon`` writes nothing itself; the
caller prepares ``home`` (e.g. its ``config.toml``) first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from .waiting import wait

__all__ = ["launch_daemon"]


def launch_daemon(home: Path, port: int, stderr_path: Path, *, timeout: float = 30.0) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``python -m elowen.daemon --home HOME --port PORT`` (``ELOWEN_HOME`` = ``home``,
    stderr appended to ``stderr_path``) and wait until ``/health`` says its plugins are ready.

    Returns ``(process, base URL)``; the caller stops the process.

    Raises:
        AssertionError: the daemon exited (with its stderr) or was not ready in ``timeout`` s.
    """
    env = {**os.environ, "ELOWEN_HOME": str(home)}
    env.pop("ELOWEN_DB", None)
    with open(stderr_path, "ab") as stderr:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "elowen.daemon", "--home", str(home), "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            raise AssertionError(stderr_path.read_text(errors="replace"))
        try:
            r = httpx.get(url + "/health", timeout=1)
            return r.status_code == 200 and r.json().get("plugins") == "ready"
        except httpx.HTTPError:
            return False

    try:
        wait(healthy, "the daemon", timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, url

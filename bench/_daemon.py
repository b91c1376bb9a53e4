"""Start a throwaway daemon subprocess for the benchmarks (its own ELOWEN_HOME, a free port)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass
class Daemon:
    url: str
    token: str
    home: Path
    project_id: int


@contextmanager
def running_daemon() -> Iterator[Daemon]:
    """A daemon without entry-point plugins, with one project, stopped (SIGTERM) on exit."""
    with tempfile.TemporaryDirectory(prefix="elowen-bench-") as tmp:
        home = Path(tmp) / "home"
        (Path(tmp) / "proj").mkdir()
        env = {**os.environ, "ELOWEN_LOG_LEVEL": "WARNING"}
        env.pop("ELOWEN_DB", None)
        proc = subprocess.Popen([sys.executable, "-m", "elowen.daemon", "--home", str(home), "--port", "0", "--no-plugins"], env=env, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 15
            while True:
                with contextlib.suppress(OSError, ValueError, httpx.HTTPError):
                    info = json.loads((home / "daemon.pid").read_text())
                    url = f"http://127.0.0.1:{info['port']}"
                    if httpx.get(f"{url}/health").status_code == 200:
                        break
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the daemon did not start")
                time.sleep(0.05)
            token = (home / "admin.token").read_text().strip()
            r = httpx.post(f"{url}/projects", json={"name": "bench", "path": str(Path(tmp) / "proj")}, headers={"Authorization": f"Bearer {token}"})
            r.raise_for_status()
            yield Daemon(url, token, home, r.json()["id"])
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()

"""Cold start: process start → first ``200`` from ``GET /health``, and → plugins ready.

Runs ``python -m elowen.daemon`` in fresh homes, 5 times each: without plugins
(``--no-plugins``) and with every installed plugin (they load after the daemon serves;
``/health`` says ``"plugins": "ready"`` when they have). Prints best, median and worst in ms.

Run: ``.venv/bin/python bench/coldstart.py [runs]``
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def one(home: Path, *args: str) -> tuple[float, float]:
    """Seconds to the first 200 from /health, and to ``plugins: ready``."""
    env = {**os.environ, "ELOWEN_LOG_LEVEL": "WARNING"}
    env.pop("ELOWEN_DB", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "elowen.daemon", "--home", str(home), "--port", "0", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    first = ready = None
    try:
        while ready is None:
            if proc.poll() is not None or time.perf_counter() - t0 > 30:
                raise RuntimeError("the daemon did not start")
            with contextlib.suppress(OSError, ValueError, httpx.HTTPError):
                port = json.loads((home / "daemon.pid").read_text())["port"]
                r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                if r.status_code == 200:
                    first = first or time.perf_counter() - t0
                    if r.json().get("plugins") in ("ready", None):
                        ready = time.perf_counter() - t0
            time.sleep(0.005)
        return first or ready, ready
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="elowen-bench-") as tmp:
        for label, args in (("no plugins", ("--no-plugins",)), ("all plugins", ())):
            times = [one(Path(tmp) / f"{label.replace(' ', '-')}-{i}", *args) for i in range(runs)]
            health = sorted(t[0] * 1000 for t in times)
            ready = sorted(t[1] * 1000 for t in times)
            print(
                f"{label:>11}: /health 200 best {health[0]:.0f} ms, median {statistics.median(health):.0f} ms, worst {health[-1]:.0f} ms; "
                f"plugins ready median {statistics.median(ready):.0f} ms"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)

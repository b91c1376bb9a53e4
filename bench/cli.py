"""CLI start-up benchmark: wall time of ``elowen task list`` against a running daemon.

Starts a daemon in a temporary ``ELOWEN_HOME`` on a free port (``elowen daemon start``), adds a
project and 20 tasks, then runs each measured command as a fresh subprocess (the way a user or
an agent runs it) and prints median and p90 wall time in ms, and the mean CPU time (user +
system) per run, which a busy machine inflates far less than wall time; the load average is
printed with the figures. For scale it also measures a bare ``python -c pass`` of the same
interpreter. Target: ``elowen task list`` median wall time ≤ 120 ms.

Run: ``.venv/bin/python bench/cli.py [--runs N]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ELOWEN = str(Path(sys.executable).parent / "elowen")
TARGET_MS = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], float]:
    """Wall times in ms of ``runs`` runs of ``argv`` (after 3 warm-up runs), and the mean CPU
    time per run in ms."""
    times = []
    cpu = 0.0
    for i in range(runs + 3):
        cpu_before = _child_cpu()
        began = time.perf_counter()
        proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = (time.perf_counter() - began) * 1000
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode()}")
        if i >= 3:
            times.append(elapsed)
            cpu += (_child_cpu() - cpu_before) * 1000
    return times, cpu / runs


def report(label: str, measured: tuple[list[float], float]) -> float:
    times, cpu = sorted(measured[0]), measured[1]
    median = statistics.median(times)
    p90 = times[min(len(times) - 1, round(0.9 * (len(times) - 1)))]
    print(f"{label:<30} median {median:6.1f} ms   p90 {p90:6.1f} ms   min {times[0]:6.1f} ms   cpu {cpu:6.1f} ms   (n={len(times)})")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        tmux_socket = f"elowen-bench-{uuid.uuid4().hex[:8]}"
        (home / "config.toml").write_text(f'[plugins.tmux.config]\nsocket = "{tmux_socket}"\n\n[plugins.agents]\nenabled = false\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("ELOWEN_")}
        env.update(ELOWEN_HOME=str(home), ELOWEN_PORT=str(free_port()))
        subprocess.run([ELOWEN, "daemon", "start"], env=env, check=True, capture_output=True)
        try:
            project = Path(tmp) / "project"
            project.mkdir()
            out = subprocess.run([ELOWEN, "project", "add", "bench", str(project), "--json"], env=env, check=True, capture_output=True, text=True)
            project_id = json.loads(out.stdout)["id"]
            for i in range(20):
                subprocess.run([ELOWEN, "task", "create", f"bench task {i}", "--project", str(project_id)], env=env, check=True, capture_output=True)
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"elowen CLI start-up, {args.runs} runs each, {os.cpu_count()} CPUs, load average {load}, Python {sys.version.split()[0]}")
            report("python -c pass", measure([sys.executable, "-c", "pass"], env, args.runs))
            report("elowen --help", measure([ELOWEN, "--help"], env, args.runs))
            median = report("elowen task list  (20 tasks)", measure([ELOWEN, "task", "list"], env, args.runs))
            report("elowen task list --json", measure([ELOWEN, "task", "list", "--json"], env, args.runs))
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"target: elowen task list median <= {TARGET_MS:.0f} ms: {'met' if median <= TARGET_MS else 'NOT met'} (load average now {load})")
        finally:
            subprocess.run([ELOWEN, "daemon", "stop", "--force"], env=env, capture_output=True)
            subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], capture_output=True)


if __name__ == "__main__":
    main()

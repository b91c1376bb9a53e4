"""Benchmark: how fast the deriver turns a permission prompt into a decision, with 50 agents.

Runs a real kernel (tmux, claude-code, agents, deriver plugins) on a private tmux socket. 50 tasks each
get a small agent program that prints working lines and, at random moments, draws a real
Claude Code 2.1.197 permission prompt (``tests/fixtures/screens/claude/06_permission_prompt.txt``),
logging the wall time it finished drawing it; it waits for a key, then goes on. The benchmark
approves every decision as soon as it exists (through the same path as ``POST /decisions``).

Measured: prompt drawn → decision created (the decision's ``detected_at``), median and p99;
the CPU time of this process (kernel + plugins; tmux's own processes are not counted) over the
measurement window as a share of one core. Targets: median ≤ 150 ms, p99 ≤ 500 ms, ≤ 15 %.

Usage: ``python bench/deriver.py [--panes 50] [--seconds 60] [--prompt-every 0.5 3] [--print-every 0.02 0.2] [--profile PATH]``
(defaults: a prompt every 0.5–3 s per pane and a printed line every 20–200 ms while working —
a heavy load: ~25 prompts/s and ~450 lines/s over 50 panes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = ROOT / "tests" / "fixtures" / "screens" / "claude" / "06_permission_prompt.txt"

AGENT = r"""
import json, os, random, sys, termios, time, tty
lines = open(os.environ["BENCH_PROMPT"], encoding="utf-8").read().split("\n")
while lines and not lines[-1].strip():
    lines.pop()
prompt = "\x1b[H\x1b[2J" + "\r\n".join(lines)
log = os.environ["BENCH_LOG"]
task = os.environ.get("ELOWEN_TASK", "?")
fd = sys.stdin.fileno()
tty.setraw(fd)
rng = random.Random()
PROMPT_EVERY = tuple(json.loads(os.environ["BENCH_PROMPT_EVERY"]))
PRINT_EVERY = tuple(json.loads(os.environ["BENCH_PRINT_EVERY"]))
n = 0
while True:
    end = time.monotonic() + rng.uniform(*PROMPT_EVERY)
    sys.stdout.write("\x1b[H\x1b[2J")
    while time.monotonic() < end:
        sys.stdout.write(f"working on step {rng.randrange(10**6)} " + "." * rng.randrange(60) + "\r\n")
        sys.stdout.flush()
        time.sleep(rng.uniform(*PRINT_EVERY))
    n += 1
    sys.stdout.write(prompt)
    sys.stdout.flush()
    with open(log, "a") as fh:
        fh.write(json.dumps({"task": task, "n": n, "wall": time.time()}) + "\n")
    os.read(fd, 16)
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


async def run(
    panes: int, seconds: float, prompt_every: tuple[float, float] = (0.5, 3.0), print_every: tuple[float, float] = (0.02, 0.2), profile: str | None = None
) -> dict[str, Any]:
    from elowen.daemon.services.tasks import TaskService
    from elowen_sdk import Service
    from elowen_sdk.testing import plugin_kernel
    from tests.support.executors import kernel_resolver

    tmp = Path(tempfile.mkdtemp(prefix="elowen-bench-"))
    socket = f"elowen-bench-{uuid.uuid4().hex[:8]}"
    log = tmp / "prompts.log"
    agent = tmp / "agent.py"
    agent.write_text(AGENT)
    wrapper = tmp / "fake-claude"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {agent}\n")
    wrapper.chmod(0o755)
    repo = tmp / "repo"
    repo.mkdir()
    config = {
        "tmux": {"socket": socket, "width": 200, "height": 50, "pause_after": 0},
        # sandbox off: the agents log to this process's temporary folder, which a sandbox hides
        "claude-code": {
            "binary": str(wrapper),
            "sandbox": "none",
            "env": {
                "BENCH_LOG": str(log),
                "BENCH_PROMPT": str(PROMPT),
                "BENCH_PROMPT_EVERY": json.dumps(list(prompt_every)),
                "BENCH_PRINT_EVERY": json.dumps(list(print_every)),
            },
        },
        "agents": {"max_agents": panes, "scheduler_interval": 1.0, "preseed_trust": False},
    }
    try:
        async with plugin_kernel(tmp, enable=["agents", "deriver", "tmux", "claude-code"], config=config) as kernel:
            tasks = TaskService(kernel.store, kernel.events, kernel_resolver(kernel))
            kernel.contributions.add("kernel", "service", Service("tasks", tasks), [])
            svc = kernel.contributions.get("service", "agents").obj.obj
            while not svc.ready.is_set():
                await trio.sleep(0.05)
            project = kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('bench', ?, '2026-01-01T00:00:00.000Z')", (str(repo),))
            for i in range(panes):
                tasks.create(title=f"bench {i}", project_id=project, exec="claude:bench")
            svc.wake()
            while svc.session_store.count_running() < panes:
                await trio.sleep(0.1)
            await trio.sleep(2.0)  # let every agent start

            async def approve(decision_id: int) -> None:
                with contextlib.suppress(Exception):
                    await svc.decide(decision_id, "approve", decided_by="bench")

            async def approver() -> None:
                async with kernel.events.subscribe(types=["decision.created"]) as events, trio.open_nursery() as inner:
                    for d in svc.decisions.list_decisions(status="pending", limit=500):
                        inner.start_soon(approve, d["id"])
                    async for event in events:
                        inner.start_soon(approve, event.data["decision"]["id"])

            async with trio.open_nursery() as nursery:
                nursery.start_soon(approver)
                start_wall = time.time()
                spy = None
                if profile:  # sample this process over the measurement window only
                    spy = subprocess.Popen(
                        [
                            str(Path(sys.executable).with_name("py-spy")),
                            "record",
                            "--pid",
                            str(os.getpid()),
                            "--gil",
                            "--rate",
                            "250",
                            "--duration",
                            str(max(1, int(seconds))),
                            "--format",
                            "raw",
                            "--output",
                            profile,
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                cpu0 = resource.getrusage(resource.RUSAGE_SELF)
                t0 = time.monotonic()
                await trio.sleep(seconds)
                cpu1 = resource.getrusage(resource.RUSAGE_SELF)
                elapsed = time.monotonic() - t0
                nursery.cancel_scope.cancel()
            if spy is not None:
                await trio.to_thread.run_sync(spy.wait)
            cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
            prompts: dict[str, list[float]] = {}
            for line in log.read_text().splitlines():
                rec = json.loads(line)
                prompts.setdefault(str(rec["task"]), []).append(rec["wall"])
            latencies: list[float] = []
            missed = 0
            for task_key, walls in prompts.items():
                decisions = [d for d in svc.decisions.list_decisions(task_id=int(task_key), limit=10_000) if d["kind"] == "prompt"]
                for i, wall in enumerate(walls):
                    if wall < start_wall:
                        continue
                    if i < len(decisions):
                        latencies.append((decisions[i]["payload"]["detected_at"] - wall) * 1000)
                    elif wall < start_wall + seconds - 1:
                        missed += 1
            deriver = kernel.contributions.get("service", "deriver").obj.obj
            derived = sum(p.derived for p in deriver.supervisor.panes.values())
            for s in svc.session_store.running():
                with contextlib.suppress(Exception):  # the server exits with its last session
                    await svc.tmux().kill(s["session"])
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)
    return {
        "panes": panes,
        "prompt_every_s": list(prompt_every),
        "print_every_s": list(print_every),
        "seconds": round(elapsed, 1),
        "prompts": len(latencies),
        "missed": missed,
        "median_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p99_ms": round(percentile(latencies, 99), 1) if latencies else None,
        "max_ms": round(max(latencies), 1) if latencies else None,
        "cpu_percent_of_one_core": round(100 * cpu / elapsed, 1),
        "cpu_user_percent": round(100 * (cpu1.ru_utime - cpu0.ru_utime) / elapsed, 1),
        "cpu_system_percent": round(100 * (cpu1.ru_stime - cpu0.ru_stime) / elapsed, 1),
        "classifications_per_s": round(derived / elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panes", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--prompt-every", type=float, nargs=2, default=(0.5, 3.0), metavar=("MIN", "MAX"), help="seconds of work between prompts (uniform)")
    parser.add_argument("--print-every", type=float, nargs=2, default=(0.02, 0.2), metavar=("MIN", "MAX"), help="seconds between printed lines while working")
    parser.add_argument("--profile", metavar="PATH", help="sample the measurement window with py-spy (collapsed stacks to PATH; needs py-spy in the venv)")
    args = parser.parse_args()
    os.environ.setdefault("ELOWEN_NO_AUTOSTART", "1")
    result = trio.run(run, args.panes, args.seconds, tuple(args.prompt_every), tuple(args.print_every), args.profile)
    print(json.dumps(result, indent=2))
    print(
        f"prompt -> decision over {result['prompts']} prompts from {result['panes']} panes: "
        f"median {result['median_ms']} ms, p99 {result['p99_ms']} ms (targets 150 / 500); "
        f"CPU {result['cpu_percent_of_one_core']} % of one core (target 15 %)"
    )


if __name__ == "__main__":
    main()

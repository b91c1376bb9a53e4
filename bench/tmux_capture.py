"""Benchmark: screen captures through the tmux control client vs a ``tmux capture-pane``
process, and ``%output`` notification latency.

Run: ``.venv/bin/python bench/tmux_capture.py [--n 1000]``. Uses a private tmux server
(``-L elowen-bench-<pid>``) that is killed at the end. Times are in milliseconds.

``%output`` latency: the pane prints ``time.monotonic()`` (CLOCK_MONOTONIC, shared by all
processes on Linux) every 10 ms; the latency is arrival time at the subscriber minus that stamp.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

from elowen_builtins.tmux import open_tmux

PRINTER = "import time\nfor i in range({n}):\n    print(f'stamp {{time.monotonic():.6f}}', flush=True); time.sleep(0.01)\nimport time; time.sleep(60)"
FILLER = "import time\nfor i in range(48): print(f'line {i:02d} ' + 'x' * 150)\ntime.sleep(600)"


def _summary(label: str, samples_ms: list[float]) -> str:
    s = sorted(samples_ms)
    p99 = s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]
    return f"{label:<44} n={len(s):<5} median {statistics.median(s):7.3f} ms   p99 {p99:7.3f} ms"


async def main(n: int) -> None:
    socket = f"elowen-bench-{os.getpid()}"
    try:
        async with open_tmux(socket, width=200, height=50) as tmux:
            await tmux.spawn("bench-cap", [sys.executable, "-c", FILLER])
            await trio.sleep(0.5)
            for _ in range(50):  # warm up
                await tmux.capture("bench-cap")

            control: list[float] = []
            for _ in range(n):
                t0 = time.perf_counter()
                await tmux.capture("bench-cap")
                control.append((time.perf_counter() - t0) * 1000)
            print(_summary("capture via control mode", control))

            control_e: list[float] = []
            for _ in range(n):
                t0 = time.perf_counter()
                await tmux.capture("bench-cap", escapes=True)
                control_e.append((time.perf_counter() - t0) * 1000)
            print(_summary("capture -e via control mode", control_e))

            proc: list[float] = []
            argv = ["tmux", "-L", socket, "capture-pane", "-p", "-t", "=bench-cap:"]
            for _ in range(max(50, n // 5)):
                t0 = time.perf_counter()
                subprocess.run(argv, capture_output=True, check=True)
                proc.append((time.perf_counter() - t0) * 1000)
            print(_summary("capture via `tmux capture-pane` process", proc))

            trio_proc: list[float] = []
            for _ in range(max(50, n // 5)):
                t0 = time.perf_counter()
                await trio.run_process(argv, capture_stdout=True)
                trio_proc.append((time.perf_counter() - t0) * 1000)
            print(_summary("capture via trio.run_process(tmux ...)", trio_proc))

            for i in range(49):
                await tmux.spawn(f"bench-p{i}", [sys.executable, "-c", FILLER])
            await trio.sleep(1.0)
            names = ["bench-cap", *(f"bench-p{i}" for i in range(49))]
            batch: list[float] = []
            for _ in range(max(20, n // 20)):
                t0 = time.perf_counter()
                async with trio.open_nursery() as nursery:
                    for name in names:
                        nursery.start_soon(tmux.capture, name)
                batch.append((time.perf_counter() - t0) * 1000)
            print(_summary("50 panes captured concurrently (pipelined)", batch))

            samples = max(100, n // 5)
            await tmux.spawn("bench-out", [sys.executable, "-c", PRINTER.format(n=samples + 20)])
            latency: list[float] = []
            async with tmux.subscribe("bench-out") as stream:
                pending = b""
                with trio.move_on_after(30):
                    async for event in stream:
                        now = time.monotonic()
                        pending += event.data
                        *lines, pending = pending.split(b"\r\n")
                        for line in lines:
                            if line.startswith(b"stamp "):
                                latency.append((now - float(line.split()[1])) * 1000)
                        if len(latency) >= samples:
                            break
            print(_summary("%output latency (pane print -> subscriber)", latency))
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)
        # tmux 3.3a leaves the socket file behind.
        (Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / socket).unlink(missing_ok=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="captures per control-mode series")
    trio.run(main, parser.parse_args().n)

"""Benchmark and figures for the overseer's destructive-action rules.

Runs every command of tests/overseer/corpus/{destructive,benign}.txt through
``check_command`` and prints recall on the destructive corpus, the false-escalation rate on the
benign one, and the time per check (mean and p50/p99 over several rounds, in µs).

    .venv/bin/python bench/destructive.py [--rounds N]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from elowen_builtins.overseer.destructive import check_command, load_rules

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "overseer" / "corpus"
_ANNOTATION = re.compile(r"\s+#\s*((?:(?:cwd|checkout|home)=\S+\s*)+)$")


def load(name: str) -> list[tuple[str, dict[str, str]]]:
    cases = []
    for line in (CORPUS / f"{name}.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kwargs = {"cwd": "/srv/repo", "checkout": "/srv/repo", "home": "/home/dev"}
        match = _ANNOTATION.search(line)
        if match:
            kwargs.update(pair.split("=", 1) for pair in match.group(1).split())
            line = line[: match.start()]
        cases.append((line, kwargs))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    load_rules()
    print(f"rules loaded in {(time.perf_counter() - started) * 1e3:.1f} ms")
    destructive, benign = load("destructive"), load("benign")
    missed = [cmd for cmd, kw in destructive if not check_command(cmd, **kw).destructive]
    escalated = [cmd for cmd, kw in benign if check_command(cmd, **kw).destructive]
    timings: list[float] = []
    for _ in range(args.rounds):
        for cmd, kw in destructive + benign:
            t0 = time.perf_counter()
            check_command(cmd, **kw)
            timings.append((time.perf_counter() - t0) * 1e6)
    timings.sort()
    print(f"destructive corpus: {len(destructive)} commands, recall {1 - len(missed) / len(destructive):.1%}")
    print(f"benign corpus:      {len(benign)} commands, false-escalation rate {len(escalated) / len(benign):.1%}")
    print(
        f"time per check:     mean {statistics.fmean(timings):.0f} µs, "
        f"p50 {timings[len(timings) // 2]:.0f} µs, p99 {timings[int(len(timings) * 0.99)]:.0f} µs"
    )
    for cmd in missed:
        print(f"  MISSED     {cmd}")
    for cmd in escalated:
        print(f"  ESCALATED  {cmd}")


if __name__ == "__main__":
    main()

"""What the one-time CLI set-up (``Provider.init_command``, run by the agents plugin before the
first spawn of an OpenCode-family CLI per state folder) costs a first spawn, with the real CLIs.

For each of OpenCode and Kilo, ``RUNS`` times: the set-up on a fresh data folder (the database
created and migrated), then again on the folder it left (what a daemon restart pays), both
through :class:`StateInit` as the plugin runs it. Baseline in the same run: the CLI's own
``--version`` (process start alone).

Needs the CLIs of ``scripts/install-test-deps``. Run: ``.venv/bin/python bench/cli_setup.py [RUNS]``
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elowen_builtins.agents.stateinit import StateInit  # noqa: E402
from elowen_builtins.kilo.plugin import KiloProvider  # noqa: E402
from elowen_builtins.opencode.plugin import OpenCodeProvider  # noqa: E402
from tests.support.agent_env import prepare_agent  # noqa: E402


def timed_ensure(provider: Any, env: dict[str, str]) -> float:
    init = StateInit()
    started = time.perf_counter()
    trio.run(init.ensure, provider, env)
    took = time.perf_counter() - started
    assert init.runs == 1, "the set-up did not run"
    return took


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"CLI set-up before a first spawn, {runs} runs each (seconds, median / max)")
    print(f"{'cli':10} {'--version':>14} {'fresh folder':>16} {'set up already':>16}")
    for cli, cls in (("opencode", OpenCodeProvider), ("kilo", KiloProvider)):
        version: list[float] = []
        fresh: list[float] = []
        again: list[float] = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="elowen-bench-") as tmp:
                home, repo = Path(tmp, "home"), Path(tmp, "repo")
                home.mkdir()
                repo.mkdir()
                launch = prepare_agent(cli, home, repo, "http://127.0.0.1:9")  # type: ignore[arg-type]
                provider = cls({"binary": launch.argv[0], "env": launch.env})
                started = time.perf_counter()
                subprocess.run([launch.argv[0], "--version"], env=launch.env, capture_output=True, check=True)
                version.append(time.perf_counter() - started)
                fresh.append(timed_ensure(provider, launch.env))
                assert provider.database(launch.env).is_file(), "no database after the set-up"
                again.append(timed_ensure(provider, launch.env))

        def fmt(xs: list[float]) -> str:
            return f"{statistics.median(xs):.2f} / {max(xs):.2f}"

        print(f"{cli:10} {fmt(version):>14} {fmt(fresh):>16} {fmt(again):>16}")


if __name__ == "__main__":
    main()

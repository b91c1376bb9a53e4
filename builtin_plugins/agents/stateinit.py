"""The CLI state set-up run before an agent's first spawn (:meth:`Provider.init_command`).

Some CLIs migrate their own database at start-up and are not safe when two first starts race:
OpenCode 1.18.33 started twice at once on a fresh data folder left one instance hanging at
start-up for good (2 of 8 pairs measured; 0 of 12 once the database had been created). A task
agent and a mission's parked overseer, or two tasks, start together on a fresh install. So
before the first spawn of each (binary, state folder) in this plugin's life, the provider's
set-up command runs, one at a time, and the spawns behind it wait for it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any

import trio

from elowen_sdk.providers import home_dir, xdg_data_home

__all__ = ["StateInit"]

log = logging.getLogger("elowen.plugin.agents")

_Key = tuple[str, int, str, str]


class StateInit:
    """Runs each provider's set-up command once per (resolved binary and its mtime, ``HOME``,
    ``$XDG_DATA_HOME``), at most ``timeout`` seconds; a command that fails or runs over is
    logged and counts as run (the spawn goes on: the CLI then sets itself up)."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._locks: dict[_Key, trio.Lock] = {}
        self._done: set[_Key] = set()
        self.runs = 0
        """Set-up commands started (for tests and diagnostics)."""

    async def ensure(self, provider: Any, env: Mapping[str, str]) -> None:
        """Run ``provider``'s set-up command for the pane environment ``env`` unless it ran
        already; never raises (bar cancellation)."""
        make = getattr(provider, "init_command", None)
        if make is None:
            return
        try:
            argv = make(env=env)
        except Exception:
            log.exception("the set-up command of %s could not be built", getattr(provider, "name", provider))
            return
        if not argv:
            return
        full = {**os.environ, **env}
        found = _resolve(argv[0], full)
        if found is None:
            return  # no such program: the spawn itself says so
        program, key = found
        if key in self._done:
            return
        async with self._locks.setdefault(key, trio.Lock()):
            if key in self._done:
                return
            try:
                await self._run([program, *argv[1:]], full)
            finally:
                self._done.add(key)

    async def _run(self, argv: list[str], env: dict[str, str]) -> None:
        self.runs += 1
        started = trio.current_time()
        with tempfile.TemporaryDirectory(prefix="elowen-cli-init-") as cwd:  # no project config applies
            result = None
            with trio.move_on_after(self.timeout):
                try:
                    result = await trio.run_process(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True, check=False)
                except OSError as exc:
                    log.warning("CLI set-up %s could not start: %s", argv, exc)
                    return
        took = trio.current_time() - started
        if result is None:
            log.warning("CLI set-up %s ran over %.0f s and was stopped; spawning anyway", argv, self.timeout)
        elif result.returncode != 0:
            tail = (result.stderr or b"").decode(errors="replace").strip()[-300:]
            log.warning("CLI set-up %s exited with status %s in %.1f s: %s", argv, result.returncode, took, tail)
        else:
            log.info("CLI set-up %s done in %.1f s", argv, took)


def _resolve(program: str, env: Mapping[str, str]) -> tuple[str, _Key] | None:
    """``program`` as found on the pane's ``PATH`` and its key, or ``None`` if not found."""
    path = program if "/" in program else shutil.which(program, path=env.get("PATH"))
    if not path:
        return None
    real = os.path.realpath(path)
    try:
        mtime = os.stat(real).st_mtime_ns
    except OSError:
        return None
    return path, (real, mtime, str(home_dir(env)), str(xdg_data_home(env)))

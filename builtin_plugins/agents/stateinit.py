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
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from elowen_sdk.providers import home_dir, xdg_data_home

__all__ = ["StateInit"]

log = logging.getLogger("elowen.plugin.agents")

_Key = tuple[str, int, tuple[str, ...]]


class StateInit:
    """Runs each provider's set-up command once per (resolved binary and its mtime, the
    provider's state folders for the pane environment — :meth:`Provider.state_paths`), at most
    ``timeout`` seconds, its whole process group killed past that; a command that fails or runs
    over is logged (its status, never its output: a CLI may echo its config, keys included) and
    counts as run — the spawn goes on and the CLI sets itself up. A set-up that is cancelled
    (the task or the plugin stopped) does not count: the next spawn runs it.

    ``workdir``: the folder the command runs in a fresh empty subfolder of (default: the
    system's temporary folder). The agents plugin passes its own data folder, so no config file
    in a shared folder above it (``/tmp/opencode.json``) applies to this unsandboxed run.
    """

    def __init__(self, timeout: float = 30.0, *, workdir: Path | None = None) -> None:
        self.timeout = timeout
        self.workdir = workdir
        self._locks: dict[_Key, trio.Lock] = {}
        self._done: set[_Key] = set()
        self.runs = 0
        """Set-up commands started (for tests and diagnostics)."""

    async def ensure(self, provider: Any, env: Mapping[str, str]) -> None:
        """Run ``provider``'s set-up command for the pane environment ``env`` unless it ran
        already; never raises (bar cancellation)."""
        try:
            found = _plan(provider, env)
        except Exception:
            log.exception("the set-up command of %s could not be built", getattr(provider, "name", provider))
            return
        if found is None:
            return
        argv, full, key = found
        if key in self._done:
            return
        async with self._locks.setdefault(key, trio.Lock()):
            if key in self._done:
                return
            try:
                await self._run(argv, full)
            except Exception:
                log.exception("CLI set-up %s failed; spawning anyway", argv)
            self._done.add(key)  # not when cancelled: the next spawn runs it

    async def _run(self, argv: list[str], env: dict[str, str]) -> None:
        self.runs += 1
        started = trio.current_time()
        if self.workdir is not None:
            self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryDirectory(prefix="elowen-cli-init-", dir=self.workdir) as cwd:
            result = None
            with trio.move_on_after(self.timeout):
                try:
                    result = await trio.run_process(
                        argv,
                        cwd=cwd,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        check=False,
                        start_new_session=True,  # its own process group, killed whole
                        deliver_cancel=_kill_group,
                    )
                except OSError as exc:
                    log.warning("CLI set-up %s could not start: %s", argv, exc)
                    return
        took = trio.current_time() - started
        if result is None:
            log.warning("CLI set-up %s ran over %.0f s and was stopped; spawning anyway", argv, self.timeout)
        elif result.returncode != 0:
            log.warning("CLI set-up %s exited with status %s in %.1f s; spawning anyway (run it by hand to see why)", argv, result.returncode, took)
        else:
            log.info("CLI set-up %s done in %.1f s", argv, took)


async def _kill_group(process: trio.Process) -> None:
    """Cancellation of a set-up: SIGKILL to its whole process group (a CLI's wrapper and the
    program it started alike), at once — the set-up is a migration the next spawn redoes."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _plan(provider: Any, env: Mapping[str, str]) -> tuple[list[str], dict[str, str], _Key] | None:
    """The command (its program resolved to an absolute path), its environment and its key, or
    ``None`` (no set-up, or no such program: the spawn itself says so)."""
    make = getattr(provider, "init_command", None)
    if make is None:
        return None
    argv = make(env=env)
    if not argv:
        return None
    # the pane's environment over the daemon's, without the daemon's own tmux client variables
    full = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    full.update(env)
    program = argv[0]
    path = program if "/" in program else shutil.which(program, path=full.get("PATH"))
    if not path:
        return None
    path = os.path.abspath(path)  # it runs in another folder
    try:
        mtime = os.stat(os.path.realpath(path)).st_mtime_ns
    except OSError:
        return None
    state = getattr(provider, "state_paths", None)
    folders = [str(p) for p in state(env=env)] if state is not None else [str(home_dir(env)), str(xdg_data_home(env))]
    return [path, *argv[1:]], full, (os.path.realpath(path), mtime, tuple(folders))

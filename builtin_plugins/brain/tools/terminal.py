"""The terminal tool: run a shell command in a project folder, with approval (the turn
pipeline asks the user unless YOLO is on; destructive commands always ask — see
``..approvals``). Output is bounded, the run is time-limited and killed on timeout or abort."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import trio

from elowen_sdk import PathGuardError, Tool

from .env import ToolError, require_env, require_guard

__all__ = ["run", "run_command", "tools"]

_DROP_ENV = ("ELOWEN_TOKEN",)


async def _kill_group(proc: trio.Process) -> None:
    """Kill the command's whole process group (it runs in its own session), so a timeout or an
    abort also ends what the shell started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


async def run_command(command: str, cwd: str, *, timeout: float, max_output: int) -> dict[str, Any]:
    """Run ``/bin/sh -c command`` in ``cwd``.

    Returns:
        ``{"exit_code": int | None, "output": str (stdout and stderr interleaved, at most
        max_output bytes), "dropped_bytes": int, "timed_out": bool}``.
    """
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    kept = bytearray()
    dropped = 0
    timed_out = False
    exit_code: int | None = None
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(
            lambda task_status=trio.TASK_STATUS_IGNORED: trio.run_process(
                ["/bin/sh", "-c", command],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
                start_new_session=True,
                deliver_cancel=_kill_group,
                task_status=task_status,
            )
        )
        with trio.move_on_after(timeout) as scope:
            assert proc.stdout is not None
            while True:
                chunk = await proc.stdout.receive_some(65536)
                if not chunk:
                    break
                room = max_output - len(kept)
                kept += chunk[:room]
                dropped += max(0, len(chunk) - room)
            await proc.wait()
        if scope.cancelled_caught:
            timed_out = True
            nursery.cancel_scope.cancel()  # run_process calls _kill_group
        else:
            exit_code = proc.returncode
    return {"exit_code": exit_code, "output": kept.decode("utf-8", "replace"), "dropped_bytes": dropped, "timed_out": timed_out}


async def run(command: str, cwd: str = ".", timeout: float | None = None) -> dict[str, Any]:
    """The ``terminal.run`` handler (see :func:`run_command`)."""
    env = require_env()
    guard = require_guard(env)
    try:
        folder = guard.resolve(cwd)
    except PathGuardError as exc:
        raise ToolError(f"refused: {exc}") from None
    if not folder.is_dir():
        raise ToolError(f"{cwd} is not a folder")
    config = env.service.config
    limit = float(config.get("terminal_timeout", 120))
    timeout = min(float(timeout), limit) if timeout else limit
    result = await run_command(command, str(folder), timeout=timeout, max_output=int(config.get("terminal_max_output", 16000)))
    result["cwd"] = str(folder)
    return result


def tools() -> list[Tool]:
    """The terminal tool (needs approval)."""
    return [
        Tool(
            "terminal.run",
            "Run a shell command in a project folder (sh -c). Returns exit code and output.",
            run,
            {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the shell command"},
                    "cwd": {"type": "string", "description": "folder, relative to the project folder (default: the project folder)"},
                    "timeout": {"type": "number", "description": "seconds (capped by the terminal_timeout setting)"},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            needs_approval=True,
        )
    ]

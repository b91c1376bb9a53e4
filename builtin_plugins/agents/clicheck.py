"""Setup health of the coding-agent CLIs: is each CLI executor's program found, where, and
which version it reports.

The program is looked up the way the agent's pane will look for it (:func:`.lifecycle.missing_program`:
an absolute ``binary`` must be executable; a bare name is searched on the provider's ``PATH``,
else the daemon's). The version is the first ``N.N[.N]`` in what ``<program> --version``
prints (stdout, then stderr), run once per program path and modification time (cached) with a
:data:`VERSION_TIMEOUT` bound; ``None`` when the CLI prints none or does not answer in time.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any

__all__ = ["VERSION_TIMEOUT", "cli_status", "find_program", "program_version"]

VERSION_TIMEOUT = 10.0
"""Seconds ``<program> --version`` may take."""

_VERSION_RE = re.compile(r"\b(\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.]+)?)\b")
_cache: dict[tuple[str, int], str | None] = {}


def find_program(program: str, env: Mapping[str, str]) -> str | None:
    """The absolute path the pane would run for ``program`` (``None``: not found or not
    executable)."""
    if "/" in program:
        return os.path.abspath(program) if os.path.isfile(program) and os.access(program, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH") or os.environ.get("PATH"))


def program_version(path: str, env: Mapping[str, str] | None = None) -> str | None:
    """The version ``path --version`` reports (cached per path and mtime), or ``None``."""
    try:
        key = (path, os.stat(path).st_mtime_ns)
    except OSError:
        return None
    if key in _cache:
        return _cache[key]
    version: str | None = None
    # In an empty scratch folder of its own, in its own process group: a program that ignores
    # ``--version`` and starts working (a wrapper, a misconfigured binary) writes nowhere that
    # matters, and it is ended with everything it started when the bound is reached.
    with tempfile.TemporaryDirectory(prefix="elowen-version-") as scratch:
        try:
            proc = subprocess.Popen(
                [path, "--version"],
                cwd=scratch,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        except OSError:
            proc = None
        if proc is not None:
            try:
                out, err = proc.communicate(timeout=VERSION_TIMEOUT)
                match = _VERSION_RE.search(out) or _VERSION_RE.search(err)
                version = match.group(1) if match else None
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    _cache[key] = version
    return version


def cli_status(provider: Any) -> dict[str, Any]:
    """``{"program", "found", "path", "version"}`` for a CLI ``provider`` (its
    ``settings.binary`` looked up in the environment its agents get); ``found`` is ``False``
    and ``path``/``version`` are ``None`` when the program is missing. Blocks up to
    :data:`VERSION_TIMEOUT` seconds the first time a program is seen (run it in a thread)."""
    program = str(provider.settings.binary)
    env = dict(provider.env_for())
    path = find_program(program, env)
    return {"program": program, "found": path is not None, "path": path, "version": program_version(path, env) if path else None}

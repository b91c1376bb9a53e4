"""The home's private tmux server, as ``elowen daemon stop`` / ``elowen down`` leave it.

Each Elowen home runs its agents on a tmux server of its own (``tmux -L <socket>``; the socket
is the tmux plugin's ``socket`` setting, else ``elowen-`` + 8 hex digits of the home's resolved
path — the same rule as ``elowen_builtins.tmux.plugin.default_socket``). When the daemon stops,
a server that holds no agent session is ended (the daemon's tmux plugin does it on a clean
stop; this is the backstop after a crash); a server with agents is kept so they are re-adopted
at the next start, unless the user asks to end them too (``elowen down --agents``).

Stdlib only: this runs on the CLI's fast path.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HUB_SESSION", "ServerState", "end_server", "home_socket", "server_state"]

HUB_SESSION = "_elowen_control"
"""The session the tmux plugin keeps for its control client (holds no agent)."""


def home_socket(home: Path) -> str:
    """The tmux socket name of ``home``: ``plugins.tmux.config.socket`` from its
    ``config.toml`` when set, else ``elowen-`` + the first 8 hex digits of the SHA-256 of the
    resolved home path."""
    try:
        with open(home / "config.toml", "rb") as f:
            data = tomllib.load(f)
        socket = data.get("plugins", {}).get("tmux", {}).get("config", {}).get("socket")
        if isinstance(socket, str) and socket:
            return socket
    except (OSError, tomllib.TOMLDecodeError, AttributeError):
        pass
    return "elowen-" + hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class ServerState:
    """``running``: a server answers on ``socket``; ``agents``: its sessions other than the
    control session (sorted)."""

    socket: str
    running: bool
    agents: tuple[str, ...]


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str] | None:
    binary = shutil.which("tmux")
    if binary is None:
        return None
    try:
        return subprocess.run([binary, "-L", socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def server_state(home: Path) -> ServerState:
    """What the home's tmux server holds now (``running`` False when none answers or tmux is
    not installed)."""
    socket = home_socket(home)
    result = _tmux(socket, "list-sessions", "-F", "#{session_name}")
    if result is None or result.returncode != 0:
        return ServerState(socket, False, ())
    names = sorted(n for n in result.stdout.split() if n and n != HUB_SESSION)
    return ServerState(socket, True, tuple(names))


def end_server(socket: str) -> bool:
    """``kill-server`` on ``socket`` (its sessions end with it); True if a server was ended."""
    result = _tmux(socket, "kill-server")
    return result is not None and result.returncode == 0

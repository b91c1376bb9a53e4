"""Where the web front end listens and where it finds the daemon.

Environment (read once at start):

* ``ELOWEN_WEB_HOST`` / ``ELOWEN_WEB_PORT`` — where to listen (default ``127.0.0.1:4500``).
* ``ELOWEN_URL`` — the daemon's base URL; when unset ``http://$ELOWEN_HOST:$ELOWEN_PORT``
  (defaults ``127.0.0.1`` and ``4400``), the same rule as the CLI.
* ``ELOWEN_HOME`` — for the pid file ``web.pid`` and the log ``logs/web.log``.
* ``ELOWEN_WEB_STREAM_WINDOW`` — seconds an event stream may stay silent before it counts as
  dropped (default 35: the daemon sends a heartbeat at least every 15 s).
* ``ELOWEN_WEB_SESSION_IDLE`` — seconds a login stays valid without use (default 12 h).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_WEB_HOST", "DEFAULT_WEB_PORT", "WebConfig", "load_web_config"]

DEFAULT_WEB_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 4500


@dataclass(frozen=True, slots=True)
class WebConfig:
    """The web process's settings.

    Attributes:
        host, port: where it listens (port 0: any free port).
        daemon_url: the daemon's base URL without a trailing slash.
        home: Elowen's home folder (pid file, log).
        stream_window: seconds of silence after which an event stream counts as dropped.
        session_idle: seconds a login stays valid without a request.
    """

    host: str = DEFAULT_WEB_HOST
    port: int = DEFAULT_WEB_PORT
    daemon_url: str = "http://127.0.0.1:4400"
    home: Path = Path("~/.config/elowen").expanduser()
    stream_window: float = 35.0
    session_idle: float = 12 * 3600.0


def _number(env: Mapping[str, str], key: str, default: float) -> float:
    raw = env.get(key)
    if not raw:
        return default
    value = float(raw)
    if value <= 0:
        raise ValueError(f"{key} must be a positive number of seconds, got {raw!r}")
    return value


def load_web_config(environ: Mapping[str, str] | None = None) -> WebConfig:
    """Build a :class:`WebConfig` from ``environ`` (default ``os.environ``).

    Raises:
        ValueError: a port or a number of seconds is malformed.
    """
    env = os.environ if environ is None else environ
    home = Path(env.get("ELOWEN_HOME") or "~/.config/elowen").expanduser().absolute()
    daemon_url = env.get("ELOWEN_URL") or f"http://{env.get('ELOWEN_HOST') or '127.0.0.1'}:{env.get('ELOWEN_PORT') or 4400}"
    port = int(env.get("ELOWEN_WEB_PORT") or DEFAULT_WEB_PORT)
    if not 0 <= port <= 65535:
        raise ValueError(f"ELOWEN_WEB_PORT must be a port number, got {port}")
    return WebConfig(
        host=env.get("ELOWEN_WEB_HOST") or DEFAULT_WEB_HOST,
        port=port,
        daemon_url=daemon_url.rstrip("/"),
        home=home,
        stream_window=_number(env, "ELOWEN_WEB_STREAM_WINDOW", 35.0),
        session_idle=_number(env, "ELOWEN_WEB_SESSION_IDLE", 12 * 3600.0),
    )

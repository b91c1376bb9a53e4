"""Where the CLI finds the daemon and its token.

Environment (read once per command):

* ``ELOWEN_URL`` — the daemon's base URL. When unset it is ``http://$ELOWEN_HOST:$ELOWEN_PORT``
  (defaults ``127.0.0.1`` and ``4400``), and only then may the CLI start the daemon itself.
* ``ELOWEN_TOKEN`` — the bearer token; when unset, the contents of ``$ELOWEN_HOME/admin.token``
  (written by the daemon on its first start, mode 0600).
* ``ELOWEN_HOME`` — default ``~/.config/elowen``.
* ``ELOWEN_NO_AUTOSTART`` — set to ``1`` to never start the daemon implicitly.

This module stays import-light (stdlib only): it is on every command's path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "Config", "load_config"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4400
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True, slots=True)
class Config:
    """The CLI's view of the environment.

    Attributes:
        url: the daemon's base URL without a trailing slash, e.g. ``http://127.0.0.1:4400``.
        home: Elowen's home folder (not created here).
        explicit_token: ``$ELOWEN_TOKEN`` if set.
        autostart: whether a command may start the daemon when nothing answers.
        explicit_url: whether ``url`` came from ``$ELOWEN_URL``.
    """

    url: str
    home: Path
    explicit_token: str | None
    autostart: bool
    explicit_url: bool = False

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or DEFAULT_HOST

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def token_file(self) -> Path:
        return self.home / "admin.token"

    def token(self) -> str | None:
        """``$ELOWEN_TOKEN``, else the admin token file's contents, else ``None``.

        Read on demand: the daemon writes the file on its first start, which may be the
        autostart this very command triggered.
        """
        if self.explicit_token:
            return self.explicit_token
        try:
            return self.token_file.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None


def load_config(environ: dict[str, str] | None = None) -> Config:
    """Build a :class:`Config` from ``environ`` (default ``os.environ``).

    Raises:
        ValueError: ``ELOWEN_URL`` is not an ``http(s)://host[:port]`` URL, or ``ELOWEN_PORT``
            is not a port number.
    """
    env = os.environ if environ is None else environ
    raw_home = env.get("ELOWEN_HOME")
    home = (Path(raw_home).expanduser() if raw_home else Path.home() / ".config" / "elowen").absolute()
    explicit_url = env.get("ELOWEN_URL", "").strip()
    if explicit_url:
        parts = urlsplit(explicit_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"ELOWEN_URL must look like http://host:port, got {explicit_url!r}")
        url = explicit_url.rstrip("/")
        autostart = False
    else:
        host = env.get("ELOWEN_HOST", "").strip() or DEFAULT_HOST
        raw_port = env.get("ELOWEN_PORT", "").strip() or str(DEFAULT_PORT)
        if not raw_port.isdigit() or not 0 < int(raw_port) < 65536:
            raise ValueError(f"ELOWEN_PORT must be a port number, got {raw_port!r}")
        url = f"http://{'[' + host + ']' if ':' in host else host}:{int(raw_port)}"
        autostart = host in _LOOPBACK
    if env.get("ELOWEN_NO_AUTOSTART", "").strip() not in ("", "0"):
        autostart = False
    return Config(url=url, home=home, explicit_token=env.get("ELOWEN_TOKEN") or None, autostart=autostart, explicit_url=bool(explicit_url))

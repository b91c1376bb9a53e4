"""Per-run state shared by the commands: the configuration and a lazily built API client."""

from __future__ import annotations

from dataclasses import dataclass, field

from .client import Client
from .config import Config
from .errors import Failure
from .output import note

__all__ = ["App", "Failure", "json_id"]


@dataclass
class App:
    """What a command needs: ``cfg`` and :attr:`api`, the daemon client (built on first use;
    it starts the daemon on a refused connection when ``cfg.autostart``)."""

    cfg: Config
    autostarting: bool = False
    _client: Client | None = field(default=None, repr=False)

    @property
    def api(self) -> Client:
        if self._client is None:
            self._client = Client(self.cfg.url, self.cfg.token, autostart=self._autostart if self.cfg.autostart else None)
        return self._client

    def _autostart(self) -> bool:
        from . import daemonctl  # only when nothing answered: keeps subprocess off the hot path

        self.autostarting = True
        daemonctl.start(daemonctl.DAEMON, self.cfg, progress=note)
        self.autostarting = False
        return True


def json_id(value: str | int) -> str | int:
    """An id typed on the command line as the API expects it: digits become an ``int``."""
    if isinstance(value, int):
        return value
    text = value.strip()
    return int(text) if text.isdigit() else text

"""Per-run state shared by the commands: the configuration and a lazily built API client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

import click

from . import daemonctl
from .client import Client
from .config import Config
from .output import note

__all__ = ["App", "Failure", "json_id"]


class Failure(click.ClickException):
    """An expected failure: prints ``error: <message>`` on stderr and exits ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


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

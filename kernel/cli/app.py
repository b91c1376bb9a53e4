"""Per-run state shared by the commands: the configuration and a lazily built API client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import click

from .client import Client
from .config import Config
from .errors import Failure
from .output import note

__all__ = ["ID", "App", "Failure", "IdType", "answer_decision", "json_id"]


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


class IdType(click.ParamType):
    """A record id on the command line: a whole number from 1 to 10^18 - 1 (what the API's
    ``{id}`` paths accept). Anything else (``abc``, ``-1``, ``1.5``, ``0``) is a usage error
    (exit status 2) instead of a confusing ``no route`` from the daemon."""

    name = "ID"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**18:
            return value
        text = str(value).strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 18 and int(text) > 0):
            self.fail(f"{value!r} is not an id (a positive whole number)", param, ctx)
        return int(text)


#: The click type of every id argument and option (tasks, projects, users…).
ID = IdType()


def answer_decision(app: App, path: str, action: str, *, choice: int | None, text: str | None, rationale: str | None, as_json: bool) -> None:
    """POST an answer (``action`` with its ``choice`` / ``text`` / ``rationale``) to a decision
    route (``/decisions/ID``, ``/escalations/ID``) and print the result."""
    from .output import echo_json

    body: dict[str, object] = {"action": action}
    if choice is not None:
        body["choice"] = choice
    if text is not None:
        body["text"] = text
    if rationale:
        body["rationale"] = rationale
    result = app.api.post(path, body)
    if as_json:
        echo_json(result)
    else:
        click.echo(f"decision {result.get('id', '?')}: {result.get('status', '?')}")

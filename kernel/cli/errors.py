"""The CLI's expected failures (anything else is a bug and may show a traceback)."""

from __future__ import annotations

from typing import IO, Any

import click

from elowen_sdk import ElowenError

__all__ = ["ControlError", "Failure"]


class Failure(ElowenError, click.ClickException):
    """An expected failure: prints ``error: <message>`` on stderr and exits ``exit_code``
    (1 refused or failed, 2 usage or configuration, 3 daemon unreachable)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class ControlError(ElowenError):
    """Starting or stopping a background process did not succeed; the message says why and
    what to look at."""

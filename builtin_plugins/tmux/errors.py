"""Errors raised by the tmux plugin; all derive from :class:`TmuxError`."""

from __future__ import annotations

from elowen_sdk import ElowenError

__all__ = [
    "ControlClientClosed",
    "InvalidNameError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SubmitNotConfirmed",
    "TmuxCommandError",
    "TmuxError",
]


class TmuxError(ElowenError):
    """Base of every tmux plugin error (tmux missing, server not reachable, …)."""


class InvalidNameError(TmuxError, ValueError):
    """A session name is not from the safe alphabet ``[A-Za-z0-9_-]``."""


class TmuxCommandError(TmuxError):
    """tmux answered a command with ``%error``.

    Attributes:
        command: the command line as sent (argument vector).
        message: tmux's error text, e.g. ``"can't find session: x"``.
    """

    def __init__(self, command: tuple[str, ...], message: str) -> None:
        self.command = command
        self.message = message
        super().__init__(f"tmux {command[0] if command else '?'}: {message}")


class SessionExistsError(TmuxError):
    """``spawn`` was asked for a session name that already exists."""


class SessionNotFoundError(TmuxError, LookupError):
    """The target session or pane does not exist."""


class ControlClientClosed(TmuxError):
    """The control-mode client exited (server killed, session gone) before replying."""


class SubmitNotConfirmed(TmuxError):
    """``send_text(verify=True)``: the text still showed in the composer after Enter was
    pressed twice, so submission could not be confirmed."""

"""Errors raised by the tmux plugin; all derive from :class:`TmuxError`. Defined in
:mod:`elowen_sdk.errors` (consumers catch them without importing this plugin) and re-exported
here for the plugin's own modules."""

from __future__ import annotations

from elowen_sdk.errors import (
    ControlClientClosed,
    InvalidNameError,
    SessionExistsError,
    SessionNotFoundError,
    SubmitNotConfirmed,
    TmuxCommandError,
    TmuxError,
)

__all__ = [
    "ControlClientClosed",
    "InvalidNameError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SubmitNotConfirmed",
    "TmuxCommandError",
    "TmuxError",
]

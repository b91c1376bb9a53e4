"""Elowen's tmux plugin: a private tmux server driven through control mode.

Other plugins use it as the ``"tmux"`` service through its contract
(``ctx.service(elowen_sdk.services.TmuxService)``), never by importing this package; the
records and errors it exchanges are the SDK's. It also runs standalone
(``async with open_tmux("sock") as tmux: ...``).
"""

from .errors import (
    ControlClientClosed,
    InvalidNameError,
    SessionExistsError,
    SessionNotFoundError,
    SubmitNotConfirmed,
    TmuxCommandError,
    TmuxError,
)
from .names import check_name, pane_target, sanitize_name, session_target
from .output import OutputEvent, OutputStream
from .send import SendResult, composer_emptied
from .server import HUB_SESSION, PaneInfo, Spawned, TmuxService, open_tmux

__all__ = [
    "HUB_SESSION",
    "ControlClientClosed",
    "InvalidNameError",
    "OutputEvent",
    "OutputStream",
    "PaneInfo",
    "SendResult",
    "SessionExistsError",
    "SessionNotFoundError",
    "Spawned",
    "SubmitNotConfirmed",
    "TmuxCommandError",
    "TmuxError",
    "TmuxService",
    "check_name",
    "composer_emptied",
    "open_tmux",
    "pane_target",
    "sanitize_name",
    "session_target",
]

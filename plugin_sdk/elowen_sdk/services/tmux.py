"""The ``tmux`` service: Elowen's private tmux server (offered by the builtin ``tmux`` plugin).

A consumer declares ``service:tmux`` and asks ``tmux = ctx.service(TmuxService)``. Targets are
exact: a session name (``[A-Za-z0-9_-]``, its active pane) or a pane id ``%N``; the service
adds tmux's ``=name:`` exact-match syntax itself, so ``elowen-t1`` never matches ``elowen-t10``.
Every coroutine waits for the server to be ready (bounded) and then raises
:class:`~elowen_sdk.errors.TmuxError` if it is not.

The records it returns and the errors it raises are defined here and in
:mod:`elowen_sdk.errors`; the plugin returns and raises these same classes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..contracts import service_contract
from ..errors import (
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
]


@dataclass(frozen=True, slots=True)
class Spawned:
    """A session created by :meth:`TmuxService.spawn`: its name, pane id (``%N``) and the
    pane's process id (the program itself: it is started with ``exec``)."""

    name: str
    pane_id: str
    pid: int


@dataclass(frozen=True, slots=True)
class PaneInfo:
    """Liveness of one pane (tmux formats ``#{pane_dead}``, ``#{pane_dead_status}``,
    ``#{pane_current_command}``, ``#{pane_pid}``).

    Attributes:
        session: the session the pane belongs to.
        pane_id: ``%N``.
        dead: the program exited (the pane is kept by ``remain-on-exit``).
        dead_status: its exit status when dead (127 = command not found); ``None`` while alive,
            when a signal killed it, and for a moment after death until the process is reaped
            (on Linux a zombie's status is read from ``/proc``, so it does not wait on tmux).
        current_command: the foreground process name (the last one when dead).
        pid: the pane's process id (0 if tmux did not report one).
        width, height: pane size in cells.
    """

    session: str
    pane_id: str
    dead: bool
    dead_status: int | None
    current_command: str
    pid: int
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class SendResult:
    """What :meth:`TmuxService.send_text` did.

    Attributes:
        pasted: a paste buffer was used (the text held a line break or a control character).
        enters: Enter presses: 0 when ``submit=False``, 2 when the first was not taken.
        verified: the composer check ran and passed.
    """

    pasted: bool
    enters: int
    verified: bool


@dataclass(frozen=True, slots=True)
class OutputEvent:
    """Bytes one pane wrote since the previous event of its stream.

    Attributes:
        pane_id: ``%N``.
        data: raw terminal bytes (UTF-8 may be split across events; escape sequences included).
        lost: output before ``data`` was dropped (slow consumer, or tmux paused the pane): take
            a fresh :meth:`TmuxService.capture` instead of replaying bytes.
        ts: ``time.monotonic()`` when the first byte of ``data`` reached Elowen (seconds).
    """

    pane_id: str
    data: bytes
    lost: bool = False
    ts: float = 0.0


class OutputStream(Protocol):
    """The output of one session's panes, from :meth:`TmuxService.open_stream`: an async
    iterator of :class:`OutputEvent` (coalesced, bounded memory) that ends when the session
    ends or the stream is closed.

    Attributes:
        session: the session name.
        pushes: how many times output was queued (a consumer that only needs to know *that*
            output happened compares it instead of reading every event).
        last_push: ``time.monotonic()`` of the latest queued output (seconds); 0.0 before any.
    """

    session: str
    pushes: int
    last_push: float

    async def receive(self) -> OutputEvent:
        """The next event.

        Raises:
            trio.EndOfChannel: the session ended or the stream was closed, and nothing is left.
        """
        ...

    def discard_pending(self) -> None:
        """Drop what is queued without reading it (the next event is not flagged ``lost``)."""
        ...

    def close(self) -> None:
        """Stop this subscription now (idempotent). The consumer must call it."""
        ...

    def __aiter__(self) -> AsyncIterator[OutputEvent]: ...


@service_contract("tmux")
class TmuxService(Protocol):
    """Elowen's private tmux server (service ``"tmux"``).

    Attributes:
        socket: the tmux socket name (``tmux -L <socket>``), for a human to attach with
            ``tmux -L <socket> attach -t =<session>:``.
    """

    socket: str

    async def command(self, *argv: str) -> list[str]:
        """Run any tmux command (argument vector, e.g. ``("send-keys", "-t", "%3", "-H", "1b")``)
        through the control client; its output lines as text (UTF-8, undecodable bytes
        replaced). Targets must be exact.

        Raises:
            TmuxCommandError: tmux replied with an error.
            TmuxError: the service is not running.
        """
        ...

    async def spawn(
        self,
        name: str,
        command: Sequence[str],
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        *,
        width: int | None = None,
        height: int | None = None,
    ) -> Spawned:
        """Create detached session ``name`` running ``command`` (argv, run with ``exec`` by
        ``/bin/sh``: a program missing from PATH leaves a dead pane with status 127).

        ``env`` is set in the session (``new-session -e``), never typed and never in a process's
        argv. The pane is ``width`` × ``height`` cells (default: the service's) and keeps that
        size; a dead program's pane stays (``remain-on-exit``) so its exit can be observed.

        Raises:
            InvalidNameError: ``name`` is not a safe name (or is reserved).
            SessionExistsError: a session of that name exists.
            ValueError: empty command, an argument or env value with a newline/NUL, a bad env key.
            FileNotFoundError: ``cwd`` is not a directory.
            TmuxCommandError: tmux refused otherwise.
        """
        ...

    async def list_sessions(self, prefix: str = "") -> list[str]:
        """Names of the sessions starting with ``prefix``, sorted (the service's own control
        session is left out)."""
        ...

    async def kill(self, name: str) -> bool:
        """Kill session ``name`` and its program; ``False`` when it did not exist."""
        ...

    async def pane_info(self, target: str) -> PaneInfo:
        """Liveness of the pane at ``target`` (session name → its active pane, or ``%N``).

        Raises:
            SessionNotFoundError: no such session or pane.
        """
        ...

    async def is_alive(self, name: str) -> bool:
        """The session exists and its program has not exited (a live program may still be a
        shell the CLI fell back to: check ``pane_info().current_command`` too)."""
        ...

    async def capture(self, target: str, *, escapes: bool = False, history: int = 0) -> str:
        """The rendered visible screen of ``target`` as ``tmux capture-pane -p`` prints it (one
        ``\\n`` after every line); ``escapes=True`` keeps SGR colours (``-e``); ``history`` > 0
        starts that many lines up in the scrollback (a dead pane's last screen is there).

        Raises:
            SessionNotFoundError: no such session or pane.
        """
        ...

    async def send_keys(self, target: str, *keys: str) -> None:
        """Press named keys (``"Enter"``, ``"Escape"``, ``"Up"``, ``"C-c"``, ``"1"``…).

        Raises:
            ValueError: not a key name (text goes through :meth:`send_text`).
            TmuxCommandError: no such pane.
        """
        ...

    async def send_text(
        self,
        target: str,
        text: str,
        submit: bool = True,
        *,
        verify: bool = False,
        enter_delay: float | None = None,
        verify_timeout: float = 2.0,
        submitted: Callable[[str], bool] | None = None,
    ) -> SendResult:
        """Type ``text`` literally (multi-line text through a bracketed paste buffer), wait
        ``enter_delay`` seconds (default: the service's), press Enter when ``submit``; with
        ``verify``, check within ``verify_timeout`` seconds that the composer emptied (or that
        ``submitted(screen)`` holds), pressing Enter once more if not.

        Raises:
            SubmitNotConfirmed: ``verify`` failed after the second Enter.
            TmuxCommandError: no such pane.
        """
        ...

    async def open_stream(self, name: str) -> OutputStream:
        """Subscribe to the output of session ``name``'s panes (also a session from before a
        restart); the caller must ``close()`` the stream.

        Raises:
            SessionNotFoundError: no such session.
        """
        ...

"""A tmux control-mode client (``tmux -C attach-session``) run as a trio task.

One :class:`ControlClient` is one ``tmux -C`` process talking over pipes. Commands may be issued
from many tasks at once; they are pipelined (written back to back) and each caller awaits its own
``%begin``/``%end`` reply. Notifications are handed, in order, to a synchronous callback that
must not block (the reader never waits on consumers, so tmux never has to buffer for us).
"""

from __future__ import annotations

import collections
import logging
import os
import subprocess
from collections.abc import Callable, Sequence

import trio

from .errors import ControlClientClosed, TmuxCommandError, TmuxError
from .protocol import Notification, Output, format_command, parse_block_line, parse_notification

__all__ = ["ControlClient", "NotificationHandler", "tmux_env"]

log = logging.getLogger(__name__)

NotificationHandler = Callable[[Output | Notification], None]
"""Called from the reader task for every notification; must return quickly and not raise."""

_CLOSE_GRACE = 2.0  # seconds to wait for tmux to exit after stdin is closed


def tmux_env() -> dict[str, str]:
    """The environment for tmux client processes: ours without ``TMUX``/``TMUX_PANE``, so a
    daemon started inside someone's tmux does not talk to (or nest in) their server."""
    return {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}


class _Reply:
    __slots__ = ("argv", "done", "error", "lines")

    def __init__(self, argv: tuple[str, ...]) -> None:
        self.argv = argv
        self.done = trio.Event()
        self.lines: list[bytes] = []
        self.error: BaseException | None = None


class ControlClient:
    """One ``tmux -C`` client process.

    Args:
        argv: the full command, e.g. ``["tmux", "-L", "elowen", "-f", "/dev/null", "-C",
            "attach-session", "-t", "=name:"]``.
        on_notification: see :data:`NotificationHandler`.
        label: a name for logs.

    Use ``await nursery.start(client.run)``; ``run`` returns once the client has attached
    (raising :class:`TmuxError` if it could not) and keeps running in the background until the
    process exits or the task is cancelled.
    """

    def __init__(self, argv: Sequence[str], on_notification: NotificationHandler | None = None, *, label: str = "tmux") -> None:
        self._argv = list(argv)
        self._on_notification = on_notification or (lambda _n: None)
        self.label = label
        self._proc: trio.Process | None = None
        self._pending: collections.deque[_Reply] = collections.deque()
        self._send_lock = trio.Lock()
        self._attached = trio.Event()
        self._closed = trio.Event()
        self._attach_error = ""
        self.exit_reason = ""

    @property
    def closed(self) -> bool:
        """True once the process has exited (or never started)."""
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        """Return when the client process has exited."""
        await self._closed.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the process, attach, then read until it exits.

        Raises:
            TmuxError: tmux could not be started or could not attach (the message says why).
        """
        try:
            proc = await trio.lowlevel.open_process(
                self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tmux_env()
            )
        except OSError as exc:
            self._closed.set()
            raise TmuxError(f"cannot start tmux ({self._argv[0]}): {exc}") from exc
        self._proc = proc
        stderr = bytearray()
        failure: TmuxError | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_stderr, proc, stderr)
                nursery.start_soon(self._read_stdout, proc)
                with trio.CancelScope() as wait_scope:
                    nursery.start_soon(self._cancel_when_closed, wait_scope)
                    await self._attached.wait()
                if self._attached.is_set():
                    task_status.started()
                else:
                    # Raised after the nursery so callers see a plain error, not a group.
                    await trio.sleep(0.05)  # let stderr arrive for the message
                    why = self._attach_error or bytes(stderr).decode("utf-8", "replace").strip() or self.exit_reason or "exited"
                    failure = TmuxError(f"tmux control client {self.label}: cannot attach: {why}")
                    nursery.cancel_scope.cancel()
        finally:
            self._fail_pending(ControlClientClosed(f"tmux control client {self.label} closed"))
            await self._stop_process(proc)
            self._closed.set()
        if failure is not None:
            raise failure

    async def _cancel_when_closed(self, scope: trio.CancelScope) -> None:
        await self._closed.wait()
        scope.cancel()

    async def aclose(self) -> None:
        """Detach: close stdin and let tmux exit (killed after 2 s). Idempotent."""
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            with trio.CancelScope(shield=True):
                try:
                    await proc.stdin.aclose()
                except trio.ClosedResourceError:
                    pass
        if proc is not None:
            with trio.move_on_after(_CLOSE_GRACE):
                await self._closed.wait()

    async def command(self, *argv: str) -> list[bytes]:
        """Run one tmux command; return its output lines (raw bytes, no ``\\n``).

        Raises:
            TmuxCommandError: tmux replied ``%error`` (``.message`` holds its text).
            ControlClientClosed: the client exited before the reply.
            ValueError: an argument cannot be carried on a command line (see ``quote_arg``).
        """
        return (await self.commands([argv]))[0]

    async def commands(self, argvs: Sequence[Sequence[str]]) -> list[list[bytes]]:
        """Pipeline several commands in one write; return every reply's lines in order.

        Raises:
            TmuxCommandError: the first command that failed (the others still ran).
            ControlClientClosed: the client exited before all replies arrived.
        """
        lines = [format_command(list(a)) for a in argvs]
        replies = [_Reply(tuple(a)) for a in argvs]
        proc = self._proc
        if self.closed or proc is None or proc.stdin is None:
            raise ControlClientClosed(f"tmux control client {self.label} is not running")
        async with self._send_lock:
            self._pending.extend(replies)
            # A half-written line would desynchronise the reply queue: never cancel mid-write.
            with trio.CancelScope(shield=True):
                try:
                    await proc.stdin.send_all(b"".join(lines))
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    for r in replies:
                        if r in self._pending:
                            self._pending.remove(r)
                    raise ControlClientClosed(f"tmux control client {self.label} closed: {exc}") from None
        for r in replies:
            await r.done.wait()
        for r in replies:
            if r.error is not None:
                raise r.error
        return [r.lines for r in replies]

    # ------------------------------------------------------------------ reading

    async def _read_stdout(self, proc: trio.Process) -> None:
        assert proc.stdout is not None
        buf = bytearray()
        block: tuple[bytes, int, list[bytes]] | None = None  # (key, flags, lines)
        try:
            while True:
                chunk = await proc.stdout.receive_some(65536)
                if not chunk:
                    break
                buf += chunk
                start = 0
                while (nl := buf.find(b"\n", start)) >= 0:
                    line = bytes(buf[start:nl])
                    start = nl + 1
                    block = self._handle_line(line, block)
                del buf[:start]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._closed.set()

    def _handle_line(self, line: bytes, block: tuple[bytes, int, list[bytes]] | None) -> tuple[bytes, int, list[bytes]] | None:
        if block is not None:
            framed = parse_block_line(line) if line.startswith(b"%e") else None
            if framed is None or framed[0] == "begin" or framed[1] != block[0]:
                block[2].append(line)
                return block
            self._finish_block(framed[0] == "error", block[1], block[2])
            return None
        framed = parse_block_line(line) if line.startswith(b"%begin ") else None
        if framed is not None:
            return (framed[1], framed[2], [])
        if not line:
            return None
        note = parse_notification(line)
        if isinstance(note, Notification):
            if note.name == "exit":
                self.exit_reason = " ".join(note.args)
            elif note.name == "session-changed":
                self._attached.set()
        try:
            self._on_notification(note)
        except Exception:  # fail-open: a bad consumer must not stop the reader
            log.exception("tmux %s: notification handler failed", self.label)
        return None

    def _finish_block(self, is_error: bool, flags: int, lines: list[bytes]) -> None:
        if not flags & 1:
            # Not ours (the attach itself, hooks). An error before attaching explains a failure.
            if is_error and not self._attached.is_set():
                self._attach_error = b" ".join(lines).decode("utf-8", "replace")
            return
        if not self._pending:
            log.warning("tmux %s: reply with no pending command", self.label)
            return
        reply = self._pending.popleft()
        if is_error:
            reply.error = TmuxCommandError(reply.argv, b" ".join(lines).decode("utf-8", "replace"))
        else:
            reply.lines = lines
        reply.done.set()

    async def _read_stderr(self, proc: trio.Process, sink: bytearray) -> None:
        assert proc.stderr is not None
        try:
            while chunk := await proc.stderr.receive_some(4096):
                if len(sink) < 4096:
                    sink += chunk
                log.debug("tmux %s stderr: %r", self.label, chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def _fail_pending(self, error: BaseException) -> None:
        while self._pending:
            reply = self._pending.popleft()
            reply.error = error
            reply.done.set()

    async def _stop_process(self, proc: trio.Process) -> None:
        with trio.CancelScope(shield=True):
            if proc.stdin is not None:
                try:
                    await proc.stdin.aclose()
                except trio.ClosedResourceError:
                    pass
            with trio.move_on_after(_CLOSE_GRACE):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    await stream.aclose()

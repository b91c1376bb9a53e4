"""A tmux control-mode client (``tmux -C attach-session``) run as a trio task.

One :class:`ControlClient` is one ``tmux -C`` process talking over pipes. Commands may be issued
from many tasks at once; they are pipelined (written back to back) and each caller awaits its own
``%begin``/``%end`` reply. Notifications are handed, in order, to a synchronous callback that
must not block (the reader never waits on consumers, so tmux never has to buffer for us).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import subprocess
from collections.abc import Callable, Sequence

import trio

from .errors import ControlClientClosed, TmuxCommandError, TmuxError
from .protocol import Notification, Output, decode_octal, format_command, parse_block_line, parse_notification

__all__ = ["CI_MARKERS", "ControlClient", "NotificationHandler", "OutputHandler", "tmux_env"]

log = logging.getLogger("elowen.plugin.tmux")

NotificationHandler = Callable[[Output | Notification], None]
"""Called from the reader task for every notification; must return quickly and not raise."""

OutputHandler = Callable[[str, bytes], None]
"""Called from the reader task with ``(pane_id, decoded bytes)`` for every ``%output`` line;
same rules as :data:`NotificationHandler`."""

_OCTAL = {f"{i:03o}".encode(): bytes((i & 0xFF,)) for i in range(512)}

_CLOSE_GRACE = 2.0  # seconds to wait for tmux to exit after stdin is closed


CI_MARKERS = frozenset(
    {"CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "TRAVIS", "TF_BUILD", "JENKINS_URL", "TEAMCITY_VERSION"}
)
"""Variables by which terminal programs decide they run in a CI job rather than a terminal, and
then go headless. Sources: Gemini CLI 0.61.0 ``isHeadlessMode`` (``CI=true`` or
``GITHUB_ACTIONS=true`` → headless, and an untrusted folder exits with status 55); the npm
package ``is-in-ci`` used by Ink, the TUI library of several agent CLIs (``CI``,
``CONTINUOUS_INTEGRATION`` or any ``CI_*`` name → CI); ``ci-info``'s vendor names. A tmux pane
*is* a terminal, so none of them reach it (:func:`tmux_env`), even when the daemon itself runs
inside a CI job."""


def _ci_marker(name: str) -> bool:
    return name in CI_MARKERS or name.startswith("CI_")


def tmux_env() -> dict[str, str]:
    """The environment for tmux client processes (and so the tmux server's global environment,
    which every pane inherits): ours without ``TMUX``/``TMUX_PANE``, so a daemon started inside
    someone's tmux does not talk to (or nest in) their server, and without the
    :data:`CI_MARKERS`, so an agent CLI in a pane stays interactive when the daemon runs in CI."""
    return {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE") and not _ci_marker(k)}


def _decode_output(data: bytes) -> bytes:
    """:func:`~.protocol.decode_octal` for ``%output`` data, without a regex callback per
    escape: tmux writes every ``\\`` in the data as ``\\134``, so each ``\\`` starts a
    three-digit escape (anything else falls back to the general decoder)."""
    if b"\\" not in data:
        return data
    parts = data.split(b"\\")
    out = [parts[0]]
    for part in parts[1:]:
        byte = _OCTAL.get(part[:3])
        if byte is None:
            return decode_octal(data)
        out.append(byte)
        out.append(part[3:])
    return b"".join(out)


@functools.lru_cache(maxsize=512)
def _cached_format(argv: tuple[str, ...]) -> bytes:
    return format_command(argv)


def _format(argv: tuple[str, ...]) -> bytes:
    """:func:`format_command`, memoised for short command lines (the same few ``capture-pane``
    / ``display-message`` lines are sent hundreds of times a second)."""
    if sum(len(a) for a in argv) <= 256:
        return _cached_format(argv)
    return format_command(argv)


def _find_block_end(buf: bytearray, start: int, key: bytes) -> tuple[int, int, bool] | None:
    """Find the ``%end KEY FLAGS`` / ``%error KEY FLAGS`` line closing the reply block whose
    body starts at ``buf[start]``: ``(line start, index after its \\n, is_error)``, or ``None``
    while it has not fully arrived. Only a complete line at a line start whose ``TIME NUM``
    equals ``key`` closes the block (the same rule as line-by-line parsing)."""
    best: tuple[int, int, bool] | None = None
    for prefix, is_error in ((b"%end ", False), (b"%error ", True)):
        pattern = prefix + key + b" "
        pos = buf.find(pattern, start)
        while pos >= 0 and (best is None or pos < best[0]):
            if pos == start or buf[pos - 1] == 0x0A:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    break  # the candidate line is incomplete: wait for more bytes
                framed = parse_block_line(bytes(buf[pos:nl]))
                if framed is not None and framed[1] == key:
                    best = (pos, nl + 1, is_error)
                    break
            pos = buf.find(pattern, pos + 1)
    if best is not None:
        return best
    return None


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
        on_output: when given, ``%output`` lines go to it as ``(pane_id, data)`` instead of to
            ``on_notification`` as :class:`Output` (the busy path: no object per line).

    Use ``await nursery.start(client.run)``; ``run`` returns once the client has attached
    (raising :class:`TmuxError` if it could not) and keeps running in the background until the
    process exits or the task is cancelled.
    """

    def __init__(
        self,
        argv: Sequence[str],
        on_notification: NotificationHandler | None = None,
        *,
        label: str = "tmux",
        on_output: OutputHandler | None = None,
    ) -> None:
        self._argv = list(argv)
        self._on_notification = on_notification or (lambda _n: None)
        self._on_output = on_output
        self.label = label
        self._proc: trio.Process | None = None
        self._pending: collections.deque[_Reply] = collections.deque()
        self._outbox: list[bytes] = []
        self._flushing = False
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
            proc = await trio.lowlevel.open_process(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tmux_env())
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
                with contextlib.suppress(trio.ClosedResourceError):
                    await proc.stdin.aclose()
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
        lines = [_format(tuple(a)) for a in argvs]
        replies = [_Reply(tuple(a)) for a in argvs]
        proc = self._proc
        if self.closed or proc is None or proc.stdin is None:
            raise ControlClientClosed(f"tmux control client {self.label} is not running")
        # Queued synchronously, so the reply queue has the order of the written lines.
        self._outbox.extend(lines)
        self._pending.extend(replies)
        if not self._flushing:
            await self._flush(proc)
        for r in replies:
            await r.done.wait()
        for r in replies:
            if r.error is not None:
                raise r.error
        return [r.lines for r in replies]

    async def _flush(self, proc: trio.Process) -> None:
        """Write the outbox. The first caller of a scheduler batch flushes for everyone queued
        meanwhile (commands from panes woken together go out in one write)."""
        assert proc.stdin is not None
        self._flushing = True
        try:
            # A half-written line would desynchronise the reply queue: never cancel mid-write.
            with trio.CancelScope(shield=True):
                await trio.lowlevel.cancel_shielded_checkpoint()  # let the batch queue theirs
                while self._outbox:
                    data = b"".join(self._outbox)
                    self._outbox.clear()
                    await proc.stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._outbox.clear()
            # Nothing more can be answered: fail every waiting command (ours included).
            self._fail_pending(ControlClientClosed(f"tmux control client {self.label} closed: {exc}"))
        finally:
            self._flushing = False

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
                while True:
                    if block is not None:
                        # A reply body is taken whole: one search for its terminator instead of
                        # one Python call per line (a screen capture is ~50 lines).
                        found = _find_block_end(buf, start, block[0])
                        if found is None:
                            break
                        term, after, is_error = found
                        lines = bytes(buf[start : term - 1]).split(b"\n") if term > start else []
                        start = after
                        self._finish_block(is_error, block[1], lines)
                        block = None
                        continue
                    nl = buf.find(b"\n", start)
                    if nl < 0:
                        break
                    line = bytes(buf[start:nl])
                    start = nl + 1
                    block = self._handle_line(line, block)
                del buf[:start]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # tmux closed the pipe: the client is done (finally marks it closed)
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
        if line.startswith((b"%output ", b"%extended-output ")):  # the common case first
            try:
                if self._on_output is not None:
                    if line[1] == 0x6F:  # %output %PANE DATA
                        _, pane, data = (line.split(b" ", 2) + [b""])[:3]
                    else:  # %extended-output %PANE AGE ... : DATA
                        head, _, data = line.partition(b" : ")
                        parts = head.split(b" ")
                        pane = parts[1] if len(parts) > 1 else b""
                    self._on_output(pane.decode("ascii", "replace"), _decode_output(data))
                else:
                    self._on_notification(parse_notification(line))
            except Exception:  # fail-open: a bad consumer must not stop the reader
                log.exception("control client %s: notification handler failed", self.label)
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
            log.exception("control client %s: notification handler failed", self.label)
        return None

    def _finish_block(self, is_error: bool, flags: int, lines: list[bytes]) -> None:
        if not flags & 1:
            # Not ours (the attach itself, hooks). An error before attaching explains a failure.
            if is_error and not self._attached.is_set():
                self._attach_error = b" ".join(lines).decode("utf-8", "replace")
            return
        if not self._pending:
            log.warning("control client %s: reply with no pending command", self.label)
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
                log.debug("control client %s stderr: %r", self.label, chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # tmux closed its stderr: nothing more to read

    def _fail_pending(self, error: BaseException) -> None:
        while self._pending:
            reply = self._pending.popleft()
            reply.error = error
            reply.done.set()

    async def _stop_process(self, proc: trio.Process) -> None:
        with trio.CancelScope(shield=True):
            if proc.stdin is not None:
                with contextlib.suppress(trio.ClosedResourceError):
                    await proc.stdin.aclose()
            with trio.move_on_after(_CLOSE_GRACE):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    await stream.aclose()

"""``TmuxService``: Elowen's private tmux server, driven through control mode.

Layout on the server (socket ``-L <socket>``, started with ``-f /dev/null`` so no personal
config applies, PITFALLS 14):

* a hub session :data:`HUB_SESSION` running ``cat``, to which one control client stays attached
  (``-f no-output``); every command — spawn, capture, send, liveness — goes through it;
* one session per agent, one window, one pane, fixed size (per-window ``window-size manual``;
  the global option crashes tmux 3.3a on ``new-session -d -x -y``), ``remain-on-exit on`` so a
  dead program stays observable (PITFALLS 13);
* a watcher control client per *subscribed* session (``%output`` only covers the attached
  session), with ``pause-after`` flow control; it exits when the session ends.

Control clients never send ``refresh-client -C``: a control client has no size until it does,
and measured on 3.3a a ``-C WxH`` resized the window even with ``-f ignore-size``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from elowen_sdk.services.tmux import PaneInfo, Spawned

from . import send as _send
from .control import ControlClient, tmux_env
from .errors import InvalidNameError, SessionExistsError, SessionNotFoundError, TmuxCommandError, TmuxError
from .names import check_name, is_pane_id, pane_target, session_target
from .output import DEFAULT_LIMIT, OutputStream
from .protocol import Notification, Output

__all__ = ["HUB_SESSION", "PaneInfo", "Spawned", "TmuxService", "open_tmux"]

log = logging.getLogger("elowen.plugin.tmux")

HUB_SESSION = "_elowen_control"
"""The session the command client attaches to; hidden from :meth:`TmuxService.list_sessions`."""

_ENV_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_PANE_FORMAT = "#{pane_id}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_pid}\t#{pane_width}\t#{pane_height}\t#{session_name}\t#{pane_current_command}"
_NOT_FOUND = ("can't find", "no such", "not found", "no server")


def zombie_exit_status(pid: int) -> int | None:
    """The exit status of process ``pid`` if it is a zombie (exited, not yet reaped), else None.

    tmux 3.3a sets ``#{pane_dead_status}`` only once it has reaped the pane's process, and when
    two panes' programs exit at nearly the same moment it can miss one SIGCHLD: that process
    stays a zombie (and the status empty) until another child of the server exits. Linux keeps
    a zombie's wait status in field 52 (``exit_code``) of ``/proc/PID/stat`` (proc(5), since
    Linux 3.5), and a zombie's pid cannot be reused, so the value is the pane's own. A status
    of a process killed by a signal is None (as ``#{pane_dead_status}`` is).
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # fields 3… (the name may hold spaces or ")")
    if len(fields) < 50 or fields[0] != b"Z" or not fields[49].isdigit():
        return None
    wait_status = int(fields[49])
    return os.waitstatus_to_exitcode(wait_status) if os.WIFEXITED(wait_status) else None


def _is_not_found(exc: TmuxCommandError) -> bool:
    return any(s in exc.message for s in _NOT_FOUND)


class _Watcher:
    """A control client attached to one session, fanning its ``%output`` out to streams."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.streams: set[OutputStream] = set()
        self.client: ControlClient | None = None
        self.paused: list[str] = []  # panes tmux paused for this client, to continue
        self.closing = False
        self.wake = trio.Event()

    def on_output(self, pane_id: str, data: bytes) -> None:
        for s in self.streams:
            s.push(pane_id, data)

    def on_notification(self, note: Output | Notification) -> None:
        if isinstance(note, Output):
            self.on_output(note.pane_id, note.data)
        elif note.name == "pause" and note.args:
            for s in self.streams:
                s.mark_lost()
            self.paused.append(note.args[0])
            self.wake.set()
        else:
            log.debug("tmux watcher %s: %%%s %s", self.session, note.name, " ".join(note.args))


class TmuxService:
    """The tmux abstraction other plugins use (service name ``"tmux"``).

    Args:
        socket: tmux socket name (``tmux -L``); ``[A-Za-z0-9_-]``.
        width, height: default pane size for :meth:`spawn` (cells).
        enter_delay: seconds between typed text and Enter in :meth:`send_text`.
        pause_after: flow control for watchers (``refresh-client -f pause-after=N``, seconds);
            ``None`` turns it off.
        output_limit: backlog per output stream before it drops (bytes).
        tmux: the tmux binary (3.2 or later).

    Start it with ``await nursery.start(service.run)`` or ``async with open_tmux(...)``; every
    other coroutine waits up to ``ready_timeout`` seconds for it to be ready, then raises
    :class:`TmuxError`. Standalone use needs no kernel.
    """

    def __init__(
        self,
        socket: str = "elowen",
        *,
        width: int = 200,
        height: int = 50,
        enter_delay: float = 0.5,
        pause_after: float | None = 5.0,
        output_limit: int = DEFAULT_LIMIT,
        tmux: str = "tmux",
        ready_timeout: float = 10.0,
    ) -> None:
        try:
            check_name(socket)
        except InvalidNameError:
            raise InvalidNameError(f"invalid tmux socket name {socket!r}") from None
        self.socket = socket
        self.width = width
        self.height = height
        self.enter_delay = enter_delay
        self.pause_after = pause_after
        self.output_limit = output_limit
        self.tmux = tmux
        self.ready_timeout = ready_timeout
        self._hub: ControlClient | None = None
        self._ready = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._watchers: dict[str, _Watcher] = {}
        self._create_lock = trio.Lock()
        """Held around ``new-session`` and every control-client attach: tmux 3.3a's server
        segfaults when a control client attaches while another session is being created
        (reproduced with 50 agents in ``bench/deriver.py``). Every caller (agents, overseer,
        terminals) gets it here, so none can forget it."""
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def base_argv(self) -> list[str]:
        """``[tmux, "-L", socket, "-f", "/dev/null"]``: the prefix of every tmux invocation."""
        return [self.tmux, "-L", self.socket, "-f", "/dev/null"]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start (or join) the server, attach the command client, and keep it attached until
        cancelled; if the client dies (server killed, client detached) it is restarted after
        1 s, and calls wait for it meanwhile.

        Raises:
            TmuxError: the first start failed (tmux missing, socket unusable).
        """
        failure: TmuxError | None = None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                hub = await self._start_hub(nursery)
            except TmuxError as exc:
                failure = exc  # raised after the nursery: callers get it plain, not grouped
                nursery.cancel_scope.cancel()
            else:
                task_status.started()
                try:
                    await self._keep_hub(nursery, hub)
                finally:
                    self._ready = trio.Event()
                    self._hub = None
                    nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _keep_hub(self, nursery: trio.Nursery, hub: ControlClient) -> None:
        while True:
            self._ready.set()
            await hub.wait_closed()
            self._ready = trio.Event()
            if self._stopping:
                return
            log.warning("control client exited (%s); restarting", hub.exit_reason or "eof")
            while True:
                await trio.sleep(1.0)
                try:
                    hub = await self._start_hub(nursery)
                    break
                except TmuxError:
                    log.exception("restarting the control client failed")

    async def aclose(self, *, end_idle_server: bool = True) -> None:
        """Detach every control client (sessions keep running). Idempotent.

        With ``end_idle_server`` (the default), a server that holds no session but the hub is
        ended too (``kill-server``), so a stopped daemon leaves no tmux process or socket
        behind; a server with agent sessions is kept for re-adoption at the next start.
        """
        first = not self._stopping
        self._stopping = True  # before kill-server: the hub's keeper must not restart the server
        if end_idle_server and first:
            # its own tmux processes, not the hub: the plugin's scope (and the hub) may be
            # cancelled already when this runs
            with trio.move_on_after(3):
                try:
                    listed = await trio.run_process(
                        [*self.base_argv(), "list-sessions", "-F", "#{session_name}"], check=False, capture_stdout=True, capture_stderr=True, env=tmux_env()
                    )
                    names = [n for n in listed.stdout.decode("utf-8", "replace").split() if n != HUB_SESSION]
                    if listed.returncode == 0 and not names:
                        await trio.run_process([*self.base_argv(), "kill-server"], check=False, capture_stdout=True, capture_stderr=True, env=tmux_env())
                except OSError:
                    log.debug("checking for an idle server failed", exc_info=True)
        for w in list(self._watchers.values()):
            if w.client is not None:
                await w.client.aclose()
        if self._hub is not None:
            await self._hub.aclose()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _start_hub(self, nursery: trio.Nursery) -> ControlClient:
        try:
            result = await trio.run_process(
                [*self.base_argv(), "new-session", "-d", "-s", HUB_SESSION, "-x", "80", "-y", "24", "cat"],
                check=False,
                capture_stdout=True,
                capture_stderr=True,
                env=tmux_env(),
            )
        except OSError as exc:
            raise TmuxError(f"cannot run tmux ({self.tmux}): {exc}") from exc
        if result.returncode != 0 and b"duplicate session" not in result.stderr:
            raise TmuxError(f"cannot start tmux server {self.socket!r}: {result.stderr.decode('utf-8', 'replace').strip()}")
        hub = ControlClient([*self.base_argv(), "-C", "attach-session", "-t", session_target(HUB_SESSION)], label=f"{self.socket}/hub")
        await nursery.start(hub.run)
        await hub.commands(
            [
                ["refresh-client", "-f", "no-output"],
                ["set-option", "-g", "remain-on-exit", "on"],
                ["set-option", "-g", "default-shell", "/bin/sh"],
                ["set-option", "-w", "-t", session_target(HUB_SESSION), "window-size", "manual"],
            ]
        )
        self._hub = hub
        return hub

    async def _client(self) -> ControlClient:
        if not self._ready.is_set():
            with trio.move_on_after(self.ready_timeout):
                await self._ready.wait()
        if self._hub is None or self._hub.closed or not self._ready.is_set():
            raise TmuxError(f"tmux service {self.socket!r} is not running")
        return self._hub

    # ------------------------------------------------------------------ commands

    async def command(self, *argv: str) -> list[str]:
        """Run any tmux command through the control client; its output lines as text
        (UTF-8, undecodable bytes replaced). Targets must be exact (see :mod:`.names`).

        Raises:
            TmuxCommandError: tmux replied with an error.
            TmuxError: the service is not running.
        """
        client = await self._client()
        return [ln.decode("utf-8", "replace") for ln in await client.command(*argv)]

    async def load_buffer(self, name: str, data: bytes) -> None:
        """Put ``data`` into paste buffer ``name`` with a ``tmux load-buffer -`` process (stdin
        cannot be used through the control client, whose stdin is the protocol).

        Raises:
            TmuxError: tmux failed.
        """
        try:
            result = await trio.run_process([*self.base_argv(), "load-buffer", "-b", name, "-"], stdin=data, check=False, capture_stderr=True, env=tmux_env())
        except OSError as exc:
            raise TmuxError(f"cannot run tmux ({self.tmux}): {exc}") from exc
        if result.returncode != 0:
            raise TmuxError(f"tmux load-buffer: {result.stderr.decode('utf-8', 'replace').strip()}")

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

        ``env`` goes in as ``new-session -e KEY=VALUE`` over the control pipe: never typed, never
        in a process's argv. The pane is ``width`` × ``height`` cells and keeps that size.

        Raises:
            InvalidNameError: ``name`` is not a safe name (or is the hub's).
            SessionExistsError: a session of that name exists.
            ValueError: empty command, an argument or env value with a newline/NUL, a bad env key.
            FileNotFoundError: ``cwd`` is not a directory.
            TmuxCommandError: tmux refused otherwise.
        """
        check_name(name)
        if name == HUB_SESSION:
            raise InvalidNameError(f"{name!r} is reserved")
        if not command:
            raise ValueError("empty command")
        w, h = width or self.width, height or self.height
        argv = ["new-session", "-d", "-s", name, "-x", str(w), "-y", str(h), "-P", "-F", "#{pane_id}\t#{pane_pid}"]
        if cwd is not None:
            if not Path(cwd).is_dir():
                raise FileNotFoundError(f"working directory {os.fspath(cwd)!r} does not exist")
            argv += ["-c", os.fspath(cwd)]
        for key, value in (env or {}).items():
            if not key or key[0].isdigit() or not set(key) <= _ENV_KEY_CHARS:
                raise ValueError(f"bad environment variable name {key!r}")
            argv += ["-e", f"{key}={value}"]
        argv += ["exec " + shlex.join(list(command))]
        # The window options go in the same write as new-session: tmux runs the queued lines
        # before it handles the child's exit, so a program that exits at once (status 127 for
        # a missing one) still leaves its dead pane (remain-on-exit) instead of no session.
        window = session_target(name)  # "=name:": the session's current window
        client = await self._client()
        async with self._create_lock:
            try:
                replies = await client.commands(
                    [
                        argv,
                        ["set-option", "-w", "-t", window, "window-size", "manual"],
                        ["set-option", "-w", "-t", window, "remain-on-exit", "on"],
                    ]
                )
            except TmuxCommandError as exc:  # the first failure: new-session's, if it failed
                if "duplicate session" in exc.message:
                    raise SessionExistsError(f"tmux session {name!r} already exists") from None
                raise
            pane_id, pid = replies[0][0].decode().split("\t")
        log.info("spawned %s (%s, pid %s)", name, pane_id, pid)
        return Spawned(name, pane_id, int(pid))

    async def has_session(self, name: str) -> bool:
        """Whether session ``name`` exists (exact match)."""
        try:
            await self.command("has-session", "-t", session_target(name))
        except TmuxCommandError:
            return False
        return True

    async def list_sessions(self, prefix: str = "") -> list[str]:
        """Names of the sessions starting with ``prefix`` (sorted; the hub is left out)."""
        names = await self.command("list-sessions", "-F", "#{session_name}")
        return sorted(n for n in names if n.startswith(prefix) and n != HUB_SESSION)

    async def kill(self, name: str) -> bool:
        """Kill session ``name`` and its program; ``False`` when it did not exist.

        The pane's process group gets SIGTERM first: a program may outlive ``kill-session``'s
        SIGHUP (Gemini CLI 0.61.0 at a permission prompt keeps a child running with no tty).
        The pane program leads its own group (tmux starts it with ``setsid``).
        """
        try:
            info = await self.pane_info(name)
        except SessionNotFoundError:
            return False
        if not info.dead and info.pid > 1:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(info.pid, signal.SIGTERM)
        try:
            await self.command("kill-session", "-t", session_target(name))
        except TmuxCommandError as exc:
            if _is_not_found(exc):
                return False
            raise
        return True

    async def pane_info(self, target: str) -> PaneInfo:
        """Liveness of the pane at ``target`` (session name → its active pane, or ``%N``).

        Raises:
            SessionNotFoundError: no such session or pane.
        """
        try:
            lines = await self.command("display-message", "-p", "-t", pane_target(target), "-F", _PANE_FORMAT)
        except TmuxCommandError as exc:
            if _is_not_found(exc):
                raise SessionNotFoundError(f"no tmux pane {target!r}") from None
            raise
        fields = lines[0].split("\t", 7) if lines else []
        # display-message does not fail on a missing target (tmux 3.3a prints empty formats, or
        # could fall back to the client's session): accept only the pane that was asked for.
        if len(fields) != 8 or not fields[0] or (fields[0] != target if is_pane_id(target) else fields[6] != target):
            raise SessionNotFoundError(f"no tmux pane {target!r}")
        pane_id, dead, status, pid, width, height, session, current = fields
        is_dead = dead == "1"
        dead_status = int(status) if is_dead and status.lstrip("-").isdigit() else None
        if is_dead and dead_status is None and pid.isdigit():
            dead_status = zombie_exit_status(int(pid))
        return PaneInfo(
            session=session,
            pane_id=pane_id,
            dead=is_dead,
            dead_status=dead_status,
            current_command=current,
            pid=int(pid) if pid.isdigit() else 0,
            width=int(width),
            height=int(height),
        )

    async def is_alive(self, name: str) -> bool:
        """The session exists and its program has not exited. (A live program may still be a
        shell the agent fell back to: check ``pane_info().current_command`` too.)"""
        try:
            return not (await self.pane_info(name)).dead
        except SessionNotFoundError:
            return False

    async def capture(self, target: str, *, escapes: bool = False, history: int = 0) -> str:
        """The rendered visible screen of ``target``, exactly as ``tmux capture-pane -p``
        prints it (one ``\\n`` after every line); ``escapes=True`` adds ``-e`` (SGR colours);
        ``history`` > 0 starts that many lines up in the scrollback (``-S -N``). A dead pane's
        last screen is in the scrollback: tmux 3.3a scrolls it away before it writes "Pane is
        dead".

        Raises:
            SessionNotFoundError: no such session or pane.
        """
        argv = ["capture-pane", "-p", *(["-e"] if escapes else []), *(["-S", f"-{int(history)}"] if history > 0 else []), "-t", pane_target(target)]
        client = await self._client()
        try:
            lines = await client.command(*argv)
        except TmuxCommandError as exc:
            if _is_not_found(exc):
                raise SessionNotFoundError(f"no tmux pane {target!r}") from None
            raise
        if not lines:
            return ""
        # One decode of the whole frame (each line is UTF-8 on its own, so this equals
        # decoding line by line).
        return (b"\n".join(lines) + b"\n").decode("utf-8", "replace")

    async def send_keys(self, target: str, *keys: str) -> None:
        """Press named keys (``"Enter"``, ``"Escape"``, ``"Up"``, ``"C-c"``, ``"1"``…).

        Raises:
            ValueError: not a key name (see ``send.KEY_RE``).
            TmuxCommandError: no such pane.
        """
        await _send.send_keys(self, pane_target(target), keys)

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
    ) -> _send.SendResult:
        """Type ``text`` literally (multi-line text through a paste buffer), wait
        ``enter_delay`` (default: the service's), press Enter, and with ``verify`` check the
        composer emptied (see :func:`.send.send_text`).

        Raises:
            SubmitNotConfirmed: ``verify`` failed after a second Enter.
            TmuxCommandError: no such pane.
        """
        delay = self.enter_delay if enter_delay is None else enter_delay
        return await _send.send_text(
            self, pane_target(target), text, submit=submit, enter_delay=delay, verify=verify, verify_timeout=verify_timeout, submitted=submitted
        )

    # ------------------------------------------------------------------ output events

    @asynccontextmanager
    async def subscribe(self, name: str) -> AsyncIterator[OutputStream]:
        """Stream the output of session ``name``'s panes while the block runs::

            async with tmux.subscribe("elowen-task-7") as stream:
                async for event in stream:   # OutputEvent(pane_id, data, lost, ts)
                    ...

        Attaches a watcher client on first use (also to sessions from before a restart); the
        stream ends when the session ends.

        Raises:
            SessionNotFoundError: no such session.
        """
        stream = await self.open_stream(name)
        try:
            yield stream
        finally:
            stream.close()

    async def open_stream(self, name: str) -> OutputStream:
        """Like :meth:`subscribe` for long-lived consumers: the caller must ``stream.close()``.

        Raises:
            SessionNotFoundError: no such session.
        """
        check_name(name)
        await self._client()
        watcher = self._watchers.get(name)
        if watcher is None or watcher.client is None or watcher.client.closed or watcher.closing:
            watcher = await self._start_watcher(name)
        stream = OutputStream(name, self.output_limit, on_close=lambda s: self._unsubscribe(watcher, s))
        watcher.streams.add(stream)
        return stream

    def _unsubscribe(self, watcher: _Watcher, stream: OutputStream) -> None:
        watcher.streams.discard(stream)
        if watcher.streams or watcher.client is None or watcher.closing:
            return
        watcher.closing = True  # a new subscriber starts a fresh watcher
        if self._watchers.get(watcher.session) is watcher:
            del self._watchers[watcher.session]
        if self._nursery is not None:
            with contextlib.suppress(RuntimeError):  # the service has stopped: its clients are gone already
                self._nursery.start_soon(watcher.client.aclose)

    async def _start_watcher(self, name: str) -> _Watcher:
        assert self._nursery is not None
        watcher = _Watcher(name)
        client = ControlClient(
            [*self.base_argv(), "-C", "attach-session", "-t", session_target(name)],
            watcher.on_notification,
            label=f"{self.socket}/{name}",
            on_output=watcher.on_output,
        )
        watcher.client = client
        try:
            async with self._create_lock:
                await self._nursery.start(client.run)
        except TmuxError as exc:
            if any(s in str(exc) for s in _NOT_FOUND):
                raise SessionNotFoundError(f"no tmux session {name!r}") from None
            raise
        self._watchers[name] = watcher
        self._nursery.start_soon(self._watch, watcher)
        return watcher

    async def _watch(self, watcher: _Watcher) -> None:
        """Turn on flow control, resume paused panes, end the streams when the client exits."""
        client = watcher.client
        assert client is not None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._continue_paused, watcher)
                if self.pause_after is not None:
                    try:
                        await client.command("refresh-client", "-f", f"pause-after={max(1, round(self.pause_after))}")
                    except TmuxError:
                        log.debug("tmux watcher %s: closed before flow control was set", watcher.session)
                await client.wait_closed()
                nursery.cancel_scope.cancel()
        finally:
            for s in list(watcher.streams):
                s.end()
            if self._watchers.get(watcher.session) is watcher:
                del self._watchers[watcher.session]

    async def _continue_paused(self, watcher: _Watcher) -> None:
        """tmux paused a pane for this client (we fell ``pause_after`` s behind): resume it;
        streams were flagged ``lost`` so consumers re-capture."""
        assert watcher.client is not None
        while True:
            await watcher.wake.wait()
            watcher.wake = trio.Event()
            panes, watcher.paused = watcher.paused, []
            for pane in panes:
                try:
                    await watcher.client.command("refresh-client", "-A", f"{pane}:continue")
                except TmuxError:
                    return


@asynccontextmanager
async def open_tmux(socket: str = "elowen", **options: object) -> AsyncIterator[TmuxService]:
    """Run a :class:`TmuxService` for the duration of the block (tests, scripts)::

        async with open_tmux("elowen-test-1a2b", enter_delay=0.1) as tmux:
            await tmux.spawn("demo", ["python3", "-q"])

    Sessions survive the block; only the control clients are detached.
    """
    service = TmuxService(socket, **options)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        try:
            yield service
        finally:
            await service.aclose()
            nursery.cancel_scope.cancel()

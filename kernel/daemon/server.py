"""Running the daemon: one instance per ``ELOWEN_HOME``, hypercorn's trio worker, graceful
shutdown.

* A lock file ``$ELOWEN_HOME/daemon.lock`` (``fcntl.flock``) keeps a second instance out; the
  pid file ``$ELOWEN_HOME/daemon.pid`` holds ``{"pid", "port", "host", "started_at"}``.
* The listening socket is bound before the kernel starts, so a taken port fails fast with a
  clear message (:class:`DaemonError`, exit code 2 from :func:`main`).
* Loopback only unless ``allow_remote``.
* Shutdown (SIGTERM/SIGINT in :func:`main`, or the ``shutdown`` event): stop accepting, end
  SSE streams (the event bus closes), let in-flight requests finish (up to 60 % of
  ``shutdown_timeout``, :data:`GRACEFUL_TIMEOUT` by default), then every connection still open
  is dropped (whatever its client does) and the kernel stops (plugins disabled, audit flushed,
  store closed). A second signal drops every connection at once.
* Connections (:mod:`elowen.transport`): every write has a send deadline
  (``send_timeout``), idle keep-alive connections close after ``keep_alive_timeout``, at most
  ``max_connections`` are open; the soft open-files limit is raised to the hard one at start.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import apsw
import trio

from elowen import transport
from elowen.core.kernel import Kernel
from elowen.core.settings import Settings
from elowen.hosting import BindError, bind, is_loopback, make_reserve, raise_file_limit, remove_pid_file, write_pid_file
from elowen.hosting import read_pid_file as _read_pid
from elowen.hosting import setup_logging as _setup_logging
from elowen_sdk import ElowenError, Service

from .auth import Access, bootstrap_admin
from .origin import policy_for
from .recovery import missing_admin_token_hint
from .state import DaemonState

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DaemonError", "build_state", "main", "serve"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4400
GRACEFUL_TIMEOUT = 5.0
#: Seconds a write to a client may take before its connection is dropped.
SEND_TIMEOUT = 10.0
#: Seconds an idle keep-alive connection stays open.
KEEP_ALIVE_TIMEOUT = 5.0
#: Descriptors kept free for the store, logs, plugins and agents when sizing the connection cap.
FD_RESERVE = 256
PRUNE_INTERVAL = 60.0
LOCK_NAME = "daemon.lock"
PID_NAME = "daemon.pid"


class DaemonError(ElowenError):
    """The daemon cannot start (another instance, port taken, refused host)."""


def read_pid_file(home: Path) -> dict[str, object] | None:
    """The daemon's pid file content, or ``None`` when missing or unreadable."""
    return _read_pid(home / PID_NAME)


class _InstanceLock:
    def __init__(self, home: Path) -> None:
        self.path = home / LOCK_NAME
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            info = read_pid_file(home) or {}
            raise DaemonError(
                f"another Elowen daemon is already running for {home} (pid {info.get('pid', '?')}, port {info.get('port', '?')}); stop it first"
            ) from None

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _bind(host: str, port: int) -> socket.socket:
    try:
        return bind(host, port, port_hint="choose another port (--port or ELOWEN_PORT)")
    except BindError as exc:
        raise DaemonError(str(exc)) from None


def build_state(kernel: Kernel, heartbeat: float = 15.0) -> DaemonState:
    """The daemon's services over a running kernel. Two are offered to plugins as host
    services: ``"tasks"`` (the task service; contract :class:`elowen_sdk.services.TasksService`)
    and ``"users"`` (agent and overseer tokens; :class:`elowen_sdk.services.UsersService`)."""
    from .services.projects import ProjectService
    from .services.tasks import TaskService
    from .services.users import UserService, UsersHostService

    access = Access(kernel.store)
    state = DaemonState(
        kernel=kernel,
        tasks=None,  # type: ignore[arg-type]  # set below: it needs state.resolve_exec
        users=UserService(kernel.store, access),
        projects=ProjectService(kernel.store, kernel.events, kernel.home),
        access=access,
        heartbeat=heartbeat,
    )
    state.tasks = TaskService(kernel.store, kernel.events, state.resolve_exec)
    kernel.contributions.add("kernel", "service", Service("tasks", state.tasks), [])
    kernel.contributions.add("kernel", "service", Service("users", UsersHostService(state.users)), [])
    return state


async def _prune_events(kernel: Kernel) -> None:
    while True:
        await trio.sleep(PRUNE_INTERVAL)
        try:
            deleted = kernel.events.prune()
        except Exception:
            log.exception("pruning the events table failed")
        else:
            if deleted:
                log.debug("pruned %d old events", deleted)


async def serve(
    home: Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    allow_remote: bool = False,
    heartbeat: float = 15.0,
    discover_plugins: bool = True,
    response_timeout: float = 60.0,
    shutdown_timeout: float = GRACEFUL_TIMEOUT,
    send_timeout: float = SEND_TIMEOUT,
    keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT,
    max_connections: int | None = None,
    safe: bool = False,
    shutdown: trio.Event | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the daemon until ``shutdown`` is set (or cancellation).

    Args:
        home: ``ELOWEN_HOME`` (created if missing).
        host, port: where to listen (port 0: any free port; the pid file and ``started()``
            give the real one).
        allow_remote: permit a non-loopback ``host``.
        heartbeat: seconds between SSE heartbeat comments.
        discover_plugins: read the ``elowen.plugins`` entry points.
        response_timeout: seconds a handler may take before it is answered 504 (SSE streams
            are exempt).
        shutdown_timeout: seconds from ``shutdown`` until every connection is closed.
        send_timeout: seconds one write to a client may take; a slower client is dropped.
        keep_alive_timeout: seconds an idle keep-alive connection stays open.
        max_connections: open connections at most (``None``: 4,096, or the open-files limit
            less :data:`FD_RESERVE` when that is lower).
        safe: safe mode: plugins that failed (or were loading when the daemon died) last time
            stay off (:mod:`elowen.core.quarantine`); also on by itself after 3 unclean starts.
        shutdown: set it to shut down gracefully.
        task_status: ``started(port)`` once requests are being served.

    Raises:
        DaemonError: another instance holds the lock, the port is taken, or the host is not
            loopback without ``allow_remote``.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    from .app import create_app

    t0 = time.perf_counter()
    if not allow_remote and not is_loopback(host):
        raise DaemonError(f"refusing to listen on non-loopback host {host!r} without --allow-remote")
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    make_reserve(home)  # released when the disk fills up (the 507 handler)
    soft, _hard = raise_file_limit()
    if max_connections is None:
        max_connections = max(64, min(4_096, soft - FD_RESERVE))
    transport.install(send_timeout=send_timeout, max_connections=max_connections)
    lock = _InstanceLock(home)
    try:
        sock = _bind(host, port)
        real_port = int(sock.getsockname()[1])
        try:
            # serve at once; plugins load in the background (GET /health says when they are ready)
            async with Kernel.open(home, discover_entry_points=discover_plugins, wait_plugins=False, safe=safe) as kernel:
                if kernel.registry.quarantine.begin_start():
                    log.warning("safe mode: plugins that failed last time stay off")
                if not bootstrap_admin(kernel.store, home):
                    hint = missing_admin_token_hint(kernel.store, home)
                    if hint:
                        log.warning("%s", hint)
                state = build_state(kernel, heartbeat)
                try:
                    state.host_policy = policy_for(host, real_port, kernel.settings.get("daemon", default={}) or {})
                except ValueError as exc:
                    raise DaemonError(str(exc)) from None
                app = create_app(state, response_timeout=response_timeout)
                config = Config()
                config.bind = [f"fd://{sock.detach()}"]
                config.graceful_timeout = shutdown_timeout
                config.keep_alive_timeout = keep_alive_timeout
                config.backlog = 1_024
                config.accesslog = None
                config.errorlog = logging.getLogger("hypercorn.error")
                stop = shutdown if shutdown is not None else trio.Event()

                async def trigger() -> None:
                    await stop.wait()
                    log.info("shutting down: ending event streams, finishing in-flight requests")
                    state.stopping.set()
                    kernel.events.close()

                http_scope = trio.CancelScope()

                async def run_http(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                    with http_scope:
                        await hypercorn_serve(app, config, shutdown_trigger=trigger, task_status=task_status)
                    nursery.cancel_scope.cancel()  # the pruner

                async def drain() -> None:
                    # hypercorn keeps idle keep-alive connections until its graceful timeout;
                    # once no request is in flight there is nothing left to wait for.
                    await stop.wait()
                    grace = shutdown_timeout * 0.6
                    with trio.move_on_after(grace):
                        while state.inflight > 0:
                            await trio.sleep(0.01)
                    if state.inflight:
                        log.warning("%d requests still running after %.1f s; cancelling them", state.inflight, grace)
                    await trio.sleep(0.05)  # let the last responses reach the socket
                    dropped = transport.abort_all()
                    if dropped:
                        log.info("closed %d connections still open", dropped)
                    http_scope.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_prune_events, kernel)
                    nursery.start_soon(drain)
                    await nursery.start(run_http)
                    kernel.registry.start_loading()  # plugins load while requests are served
                    write_pid_file(home / PID_NAME, host, real_port)
                    log.info(
                        "Elowen daemon %d listening on http://%s:%d (home %s), ready in %.0f ms",
                        os.getpid(),
                        host,
                        real_port,
                        home,
                        (time.perf_counter() - t0) * 1000,
                    )
                    task_status.started(real_port)
                log.info("HTTP server stopped; stopping the kernel")
                kernel.registry.quarantine.clean_stop()
        finally:
            if sock.fileno() != -1:
                sock.close()
            remove_pid_file(home / PID_NAME)
    finally:
        lock.release()
    log.info("Elowen daemon stopped")


# ---------------------------------------------------------------------- command line


def setup_logging(home: Path, level: str = "INFO") -> Path:
    """Log to ``home/logs/daemon.log`` (rotating, 5 MiB × 3) and stderr; ``watchfiles`` (hot
    reload's file watcher logs every save at INFO) and ``httpx`` (every request's full URL at
    INFO: plugins' webhook URLs carry secrets) at WARNING. Returns the log file."""
    return _setup_logging(home, "daemon", level, quiet=("watchfiles", "httpx"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m elowen.daemon", description="Run the Elowen daemon in the foreground.")
    p.add_argument("--host", help="address to listen on (default ELOWEN_HOST, [daemon] host, or 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default ELOWEN_PORT, [daemon] port, or 4400; 0: any free port)")
    p.add_argument("--home", help="Elowen's home folder (default ELOWEN_HOME or ~/.config/elowen)")
    p.add_argument("--allow-remote", action="store_true", help="permit a non-loopback host")
    p.add_argument("--no-plugins", action="store_true", help="do not load plugins from entry points")
    p.add_argument("--safe", action="store_true", help="safe mode: plugins that failed last time stay off")
    p.add_argument("--log-level", default=os.environ.get("ELOWEN_LOG_LEVEL", "INFO"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elowen.daemon``. Exit codes: 0 after a clean shutdown, 2 when the daemon
    cannot start (:class:`DaemonError` or invalid settings), 1 on a crash."""
    from elowen.core import paths

    args = _parser().parse_args(argv)
    if args.home:
        os.environ["ELOWEN_HOME"] = str(Path(args.home).expanduser().absolute())
    home = paths.home()
    try:
        setup_logging(home, args.log_level)
    except OSError as exc:
        print(f"elowen daemon: {_storage_problem(home, exc)}", file=sys.stderr)
        return 2
    try:
        daemon_settings = Settings(home).load().get("daemon", {})
        host = args.host or os.environ.get("ELOWEN_HOST") or daemon_settings.get("host") or DEFAULT_HOST
        port = args.port if args.port is not None else int(os.environ.get("ELOWEN_PORT") or daemon_settings.get("port") or DEFAULT_PORT)
        heartbeat = float(os.environ.get("ELOWEN_SSE_HEARTBEAT", "15"))
        response_timeout = float(os.environ.get("ELOWEN_RESPONSE_TIMEOUT", "60"))
        limits = {
            "shutdown_timeout": float(os.environ.get("ELOWEN_SHUTDOWN_TIMEOUT", str(GRACEFUL_TIMEOUT))),
            "send_timeout": float(os.environ.get("ELOWEN_SEND_TIMEOUT", str(SEND_TIMEOUT))),
            "keep_alive_timeout": float(os.environ.get("ELOWEN_KEEPALIVE_TIMEOUT", str(KEEP_ALIVE_TIMEOUT))),
        }
        if os.environ.get("ELOWEN_MAX_CONNECTIONS"):
            limits["max_connections"] = int(os.environ["ELOWEN_MAX_CONNECTIONS"])
        trio.run(
            functools.partial(
                _run,
                home,
                host,
                port,
                allow_remote=args.allow_remote,
                heartbeat=heartbeat,
                discover_plugins=not args.no_plugins,
                response_timeout=response_timeout,
                safe=args.safe or os.environ.get("ELOWEN_SAFE") == "1",
                **limits,
            )
        )
    except (DaemonError, ElowenError, ValueError) as exc:
        log.error("elowen daemon: %s", exc)
        return 2
    except (OSError, apsw.Error) as exc:
        if not _is_storage_error(exc):
            log.exception("elowen daemon crashed")
            return 1
        log.error("elowen daemon: %s", _storage_problem(home, exc))
        return 2
    except KeyboardInterrupt:
        return 0
    except Exception:
        log.exception("elowen daemon crashed")
        return 1
    return 0


def _is_storage_error(exc: BaseException) -> bool:
    import errno

    if isinstance(exc, (apsw.FullError, apsw.ReadOnlyError, apsw.CantOpenError, apsw.IOError)):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT, errno.EPERM)


def _storage_problem(home: Path, exc: BaseException) -> str:
    """One line: what is wrong with the home, its path and the free space."""
    import shutil

    try:
        free = f"{shutil.disk_usage(home if home.exists() else home.parent).free / 2**20:.1f} MiB free"
    except OSError:
        free = "free space unknown"
    what = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"cannot start: the home {home} is not writable or its disk is full ({what}; {free})"


async def _run(home: Path, host: str, port: int, **kwargs: object) -> None:
    stop = trio.Event()
    failure: list[DaemonError] = []

    async def on_signals(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                if stop.is_set():
                    log.warning("second %s: stopping now", signal.Signals(signum).name)
                    transport.abort_all("second signal")
                    nursery.cancel_scope.cancel()
                    return
                log.info("%s received: shutting down gracefully", signal.Signals(signum).name)
                stop.set()

    async def run() -> None:
        try:
            await serve(home, host, port, shutdown=stop, **kwargs)  # type: ignore[arg-type]
        except DaemonError as exc:
            failure.append(exc)
        except (OSError, apsw.Error) as exc:
            if not _is_storage_error(exc):
                raise
            failure.append(DaemonError(_storage_problem(home, exc)))
        finally:
            nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        await nursery.start(on_signals)
        nursery.start_soon(run)
    if failure:
        raise failure[0]

"""Running the web front end: hypercorn's trio worker, pid file, log, graceful shutdown.

Files in ``$ELOWEN_HOME``: ``web.pid`` (JSON ``{"pid", "port", "host", "started_at"}``,
written once serving, removed on exit) and ``logs/web.log`` (rotating, 5 MiB × 3).
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import trio

from elowen.hosting import BindError, bind, is_loopback, remove_pid_file, write_pid_file
from elowen.hosting import setup_logging as _setup_logging
from elowen_sdk import ElowenError

from .config import WebConfig, load_web_config

__all__ = ["PID_NAME", "WebError", "main", "serve"]

log = logging.getLogger(__name__)

PID_NAME = "web.pid"
GRACEFUL_TIMEOUT = 3.0


class WebError(ElowenError):
    """The web front end cannot start (port taken, refused host)."""


def _bind(host: str, port: int) -> socket.socket:
    try:
        return bind(host, port, port_hint="set ELOWEN_WEB_PORT")
    except BindError as exc:
        raise WebError(str(exc)) from None


async def serve(
    config: WebConfig,
    *,
    allow_remote: bool = False,
    shutdown: trio.Event | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the web front end until ``shutdown`` is set (or cancellation).

    ``task_status.started(port)`` once requests are served (the real port when ``config.port``
    is 0). Writes ``web.pid`` in ``config.home``.

    Raises:
        WebError: the port is taken, or a non-loopback host without ``allow_remote``.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    from .app import create_app

    t0 = time.perf_counter()
    if not allow_remote and not is_loopback(config.host):
        raise WebError(f"refusing to listen on non-loopback host {config.host!r} without --allow-remote")
    config.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    sock = _bind(config.host, config.port)
    port = int(sock.getsockname()[1])
    app = create_app(config)
    hc = Config()
    hc.bind = [f"fd://{sock.detach()}"]
    hc.graceful_timeout = GRACEFUL_TIMEOUT
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    from elowen import transport  # a send deadline on every write (terminal WebSocket, streams), idle close

    transport.install()
    stop = shutdown if shutdown is not None else trio.Event()
    try:
        async with trio.open_nursery() as nursery:

            async def run_http(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                await hypercorn_serve(app, hc, shutdown_trigger=stop.wait, task_status=task_status)
                nursery.cancel_scope.cancel()  # hard_stop

            await nursery.start(run_http)
            write_pid_file(config.home / PID_NAME, config.host, port)
            log.info(
                "Elowen web %d listening on http://%s:%d (daemon %s), ready in %.0f ms",
                os.getpid(),
                config.host,
                port,
                config.daemon_url,
                (time.perf_counter() - t0) * 1000,
            )
            task_status.started(port)

            async def hard_stop() -> None:
                # Event streams never end by themselves: after the graceful window, cancel.
                await stop.wait()
                await trio.sleep(GRACEFUL_TIMEOUT)
                transport.abort_all()
                nursery.cancel_scope.cancel()

            nursery.start_soon(hard_stop)
    finally:
        remove_pid_file(config.home / PID_NAME)
    log.info("Elowen web stopped")


def setup_logging(home: Path, level: str = "INFO") -> Path:
    """Log to ``home/logs/web.log`` (rotating, 5 MiB × 3) and stderr. Returns the log file."""
    return _setup_logging(home, "web", level, quiet=("httpx",))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m elowen.web", description="Run the Elowen web front end in the foreground.")
    p.add_argument("--host", help="address to listen on (default ELOWEN_WEB_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default ELOWEN_WEB_PORT or 4500; 0: any free port)")
    p.add_argument("--home", help="Elowen's home folder (default ELOWEN_HOME or ~/.config/elowen)")
    p.add_argument("--daemon-url", help="the daemon's base URL (default ELOWEN_URL or http://ELOWEN_HOST:ELOWEN_PORT)")
    p.add_argument("--allow-remote", action="store_true", help="permit a non-loopback host")
    p.add_argument("--log-level", default=os.environ.get("ELOWEN_LOG_LEVEL", "INFO"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elowen.web``. Exit codes: 0 after a clean shutdown, 2 when it cannot start,
    1 on a crash."""
    args = _parser().parse_args(argv)
    env = dict(os.environ)
    if args.home:
        env["ELOWEN_HOME"] = str(Path(args.home).expanduser().absolute())
    try:
        config = load_web_config(env)
    except ValueError as exc:
        print(f"elowen web: {exc}", file=sys.stderr)
        return 2
    overrides: dict[str, object] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    if args.daemon_url:
        overrides["daemon_url"] = args.daemon_url.rstrip("/")
    if overrides:
        import dataclasses

        config = dataclasses.replace(config, **overrides)  # type: ignore[arg-type]
    setup_logging(config.home, args.log_level)
    try:
        trio.run(functools.partial(_run, config, args.allow_remote))
    except WebError as exc:
        log.error("elowen web: %s", exc)
        return 2
    except KeyboardInterrupt:
        return 0
    except Exception:
        log.exception("elowen web crashed")
        return 1
    return 0


async def _run(config: WebConfig, allow_remote: bool) -> None:
    stop = trio.Event()

    async def on_signals(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                if stop.is_set():
                    nursery.cancel_scope.cancel()
                    return
                log.info("%s received: shutting down", signal.Signals(signum).name)
                stop.set()

    async def run() -> None:
        try:
            await serve(config, allow_remote=allow_remote, shutdown=stop)
        finally:
            nursery.cancel_scope.cancel()

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(on_signals)
            nursery.start_soon(run)
    except BaseExceptionGroup as group:
        errors = group.subgroup(WebError)
        if errors is not None:
            raise errors.exceptions[0] from None
        raise

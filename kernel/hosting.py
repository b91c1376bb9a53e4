"""What Elowen's host processes (the daemon and the web front end) share: logging set-up, the
loopback check, binding the listening socket with clear errors, and their pid files."""

from __future__ import annotations

import errno
import ipaddress
import json
import logging
import logging.handlers
import os
import socket
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from elowen_sdk import ElowenError

__all__ = [
    "RESERVE_BYTES",
    "BindError",
    "bind",
    "is_loopback",
    "make_reserve",
    "raise_file_limit",
    "release_reserve",
    "read_pid_file",
    "remove_pid_file",
    "setup_logging",
    "write_pid_file",
]


class BindError(ElowenError, OSError):
    """The listening socket cannot be had (host unknown, port taken); the message says what to do."""


def setup_logging(home: Path, name: str, level: str = "INFO", *, quiet: Iterable[str] = ()) -> Path:
    """Log to ``home/logs/<name>.log`` (rotating, 5 MiB × 3) and stderr; the loggers in
    ``quiet`` only at WARNING and above. Returns the log file."""
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = logs / f"{name}.log"
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    file_handler = logging.handlers.RotatingFileHandler(path, maxBytes=5 * 1024 * 1024, backupCount=3, encoding="utf-8")
    file_handler.setFormatter(fmt)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(fmt)
    root = logging.getLogger()
    root.handlers[:] = [file_handler, stderr]
    root.setLevel(level.upper())
    for logger in quiet:
        logging.getLogger(logger).setLevel(logging.WARNING)
    return path


#: Bytes kept in ``$ELOWEN_HOME/disk-reserve.bin``, released when the disk fills up so the log,
#: SQLite's rollback and ``/health`` keep working; made again at the next start.
RESERVE_BYTES = 4 * 2**20
RESERVE_NAME = "disk-reserve.bin"


def make_reserve(home: Path, size: int = RESERVE_BYTES) -> bool:
    """Create the disk reserve of ``home`` if it is missing and there is room for it twice
    over; returns whether it exists now. Never raises."""
    import shutil

    path = home / RESERVE_NAME
    try:
        if path.exists():
            return True
        if shutil.disk_usage(home).free < 2 * size:
            return False
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
        return True
    except OSError:
        path.unlink(missing_ok=True)
        return False


def release_reserve(home: Path) -> bool:
    """Delete the disk reserve of ``home``; returns whether there was one."""
    try:
        (home / RESERVE_NAME).unlink()
    except OSError:
        return False
    return True


def raise_file_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` (open files, sockets included) to the hard limit.
    Returns ``(soft, hard)`` after the change (unchanged where the platform refuses)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, hard
    return target, hard


def is_loopback(host: str) -> bool:
    """Whether ``host`` names the loopback interface (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int, *, port_hint: str) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free port), ready for the server.

    Raises:
        BindError: the host does not resolve, or the port is taken (the message ends with
            ``port_hint``, e.g. "choose another port (--port or ELOWEN_PORT)").
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindError(f"cannot resolve host {host!r}: {exc}") from None
    family, type_, proto, _, addr = infos[0]
    sock = socket.socket(family, type_, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BindError(f"port {port} on {host} is already in use; stop what listens there or {port_hint}") from None
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def read_pid_file(path: Path) -> dict[str, object] | None:
    """A pid file's JSON content, or ``None`` when missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_pid_file(path: Path, host: str, port: int) -> None:
    """Write ``{"pid", "port", "host", "started_at"}`` atomically, mode 0600."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"pid": os.getpid(), "port": port, "host": host, "started_at": started}, fh)
    os.replace(tmp, path)


def remove_pid_file(path: Path) -> None:
    """Remove the pid file if it is this process's."""
    info = read_pid_file(path)
    if info is not None and info.get("pid") == os.getpid():
        path.unlink(missing_ok=True)

"""Start, stop and inspect Elowen's background processes (the daemon now; the web front end
later: add a :class:`Service` to :data:`SERVICES`).

Files, per service, in ``$ELOWEN_HOME``:

* ``<name>.pid`` — written by the service itself: JSON ``{"pid": N, "port": P}``;
* ``logs/<name>.log`` — the service's own log (it writes and rotates it; ``elowen daemon logs``);
* ``logs/<name>.out`` — the detached process's stdout and stderr (appended): the same lines as
  the log while it runs, plus what it prints before its logging is set up or when it crashes.
  Kept apart so the rotating log is not written twice.

Processes are started with ``sys.executable -m <module>`` so they run in Elowen's own
environment, detached into their own session (closing the terminal does not stop them), with
the same environment as the CLI plus ``ELOWEN_HOME``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .client import ApiError, Client, Unreachable
from .config import Config
from .errors import ControlError

__all__ = [
    "DAEMON",
    "SERVICES",
    "ControlError",
    "Probe",
    "Service",
    "Status",
    "describe_exit",
    "exit_status",
    "is_alive",
    "probe",
    "read_pid_file",
    "run_foreground",
    "start",
    "status",
    "stop",
    "tail",
]

START_TIMEOUT = 20.0  # seconds; a cold start takes about 1 s, a busy 2-core machine more
STOP_TIMEOUT = 15.0  # seconds; the daemon finishes in-flight requests and flushes the store
POLL = 0.05


@dataclass(frozen=True, slots=True)
class Service:
    """One background process Elowen runs.

    Attributes:
        name: short name, used for messages and file names (``daemon``).
        module: what ``python -m`` runs (``elowen.daemon``).
        url: the service's base URL for a given config (it answers ``GET /health``).
        identified: its ``/health`` names the service and the home it serves
            (``{"service": name, "home": <id>}``), so another home's instance or a foreign
            server on the port is told apart from this home's.
        label: how messages name it (default ``name``).
    """

    name: str
    module: str
    url: Callable[[Config], str]
    identified: bool = False
    label: str = ""

    @property
    def title(self) -> str:
        return self.label or _LABELS.get(self.name, self.name)

    def pid_file(self, cfg: Config) -> Path:
        return cfg.home / f"{self.name}.pid"

    def log_file(self, cfg: Config) -> Path:
        return cfg.home / "logs" / f"{self.name}.log"

    def output_file(self, cfg: Config) -> Path:
        return cfg.home / "logs" / f"{self.name}.out"

    def health(self, cfg: Config, timeout: float = 1.0) -> dict[str, Any] | None:
        """This home's service's ``/health`` body, or ``None`` if it does not answer (or
        something else answers: see :func:`probe`)."""
        found = probe(self, cfg, timeout)
        return found.health if found.kind == "ours" else None


_LABELS = {"web": "web front end"}

DAEMON = Service("daemon", "elowen.daemon", lambda cfg: cfg.url, identified=True)
SERVICES: tuple[Service, ...] = (DAEMON,)
"""What ``elowen up`` starts (in order) and ``elowen down`` stops (in reverse order)."""


@dataclass(frozen=True, slots=True)
class Status:
    """What is known about a service: ``running`` (this home's service answers ``/health``),
    ``pid`` (from ``/health`` or the pid file), ``version``, ``url``, ``log`` (path), and
    ``conflict``: why the port is unusable when something else answers there (another
    Elowen home's daemon, or a server that is not Elowen), else ``None``."""

    name: str
    running: bool
    pid: int | None
    version: str | None
    url: str
    log: str
    conflict: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "running": self.running,
            "pid": self.pid,
            "version": self.version,
            "url": self.url,
            "log": self.log,
            "conflict": self.conflict,
        }


@dataclass(frozen=True, slots=True)
class Probe:
    """What answers a service's ``GET /health``.

    Attributes:
        kind: ``none`` (nothing answers), ``ours`` (this home's service), ``other`` (the
            same service of another Elowen home), ``foreign`` (something that is not it).
        health: the ``/health`` body for ``ours`` and ``other``.
        conflict: for ``other`` and ``foreign``, the message to show.
    """

    kind: str
    health: dict[str, Any] | None = None
    conflict: str | None = None


def _port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def probe(service: Service, cfg: Config, timeout: float = 1.0) -> Probe:
    """Ask ``GET /health`` at the service's URL and tell who answers (see :class:`Probe`).

    The daemon's ``/health`` carries ``service: "daemon"`` and ``home``, a short hash of its
    ``ELOWEN_HOME`` (:func:`elowen.daemon.identity.home_id`), compared with this home's.
    """
    url = service.url(cfg)
    port = _port(url)
    try:
        body = Client(url, lambda: None).request("GET", "/health", auth=False, timeout=timeout)
    except Unreachable:
        return Probe("none")
    except ApiError as exc:
        return Probe("foreign", conflict=f"port {port} is used by something that is not Elowen ({exc.message}); stop it, or choose another port (ELOWEN_PORT)")
    if not isinstance(body, dict) or body.get("status") != "ok" or "pid" not in body:
        return Probe(
            "foreign",
            conflict=f"port {port} is used by something that is not Elowen (its /health at {url} "
            "is not Elowen's); stop it, or choose another port (ELOWEN_PORT)",
        )
    if not service.identified:
        return Probe("ours", body)
    if body.get("service") != service.name or not isinstance(body.get("home"), str):
        return Probe(
            "foreign",
            conflict=f"port {port} is used by something that is not the Elowen {service.title} "
            f"(pid {body.get('pid')}); stop it, or choose another port (ELOWEN_PORT)",
        )
    from elowen.daemon.identity import home_id  # stdlib only; off the CLI's start-up path

    if body["home"] != home_id(cfg.home):
        return Probe(
            "other",
            body,
            conflict=(
                f"port {port} is used by another Elowen instance (home {body['home']}, pid {body.get('pid')}); "
                f"this home ({cfg.home}) is {home_id(cfg.home)}: stop that daemon, or give this home another port (ELOWEN_PORT)"
            ),
        )
    return Probe("ours", body)


# ---------------------------------------------------------------------- processes


def read_pid_file(path: Path) -> dict[str, Any] | None:
    """The pid file's JSON object (``{"pid": int, "port": int}``), or ``None`` if it is missing
    or not of that shape."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or data["pid"] <= 0:
        return None
    return data


def is_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an exited process nobody reaped, as
    happens to detached processes in containers whose init does not reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _runs_module(pid: int, module: str) -> bool:
    """Whether ``pid``'s command line runs ``module`` (true when it cannot be checked), so a
    stale pid file reused by another process is never signalled."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True
    return module.encode() in argv


def _log_tail(path: Path, since: int = 0, lines: int = 15) -> str:
    """The last ``lines`` lines written to ``path`` after byte offset ``since``."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:]) or "(nothing)"


# ---------------------------------------------------------------------- commands


def status(service: Service, cfg: Config) -> Status:
    """Ask the service's ``/health``; fall back to its pid file for the pid."""
    found = probe(service, cfg)
    health = found.health if found.kind == "ours" else None
    pid = health.get("pid") if health else None
    if pid is None:
        info = read_pid_file(service.pid_file(cfg))
        pid = info["pid"] if info and is_alive(info["pid"]) else None
    return Status(
        name=service.name,
        running=health is not None,
        pid=pid if isinstance(pid, int) else None,
        version=str(health.get("version")) if health and health.get("version") else None,
        url=service.url(cfg),
        log=str(service.log_file(cfg)),
        conflict=found.conflict,
    )


def start(service: Service, cfg: Config, *, timeout: float = START_TIMEOUT, progress: Callable[[str], None] | None = None) -> Status:
    """Start ``service`` detached unless it already answers; wait until ``/health`` answers.

    Returns its status. ``progress`` receives one line before waiting and one when ready.

    Raises:
        ControlError: something else answers at the service's address (another home's
            instance, a server that is not Elowen), or the process exited early or did not
            answer within ``timeout`` seconds (the message carries the end of its log).
    """
    current = status(service, cfg)
    if current.running:
        return current
    if current.conflict:
        raise ControlError(current.conflict)
    log_path = service.output_file(cfg)
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if progress:
        progress(f"elowen: starting the {service.name} at {service.url(cfg)} (log: {service.log_file(cfg)}) …")
    began = time.monotonic()
    env = dict(os.environ, ELOWEN_HOME=str(cfg.home))
    with open(log_path, "ab") as log:
        offset = log.tell()
        proc = subprocess.Popen(
            [sys.executable, "-m", service.module],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(cfg.home) if cfg.home.is_dir() else None,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    deadline = began + timeout
    while time.monotonic() < deadline:
        health = service.health(cfg, timeout=0.5)
        # the daemon answers at once and loads plugins in the background: wait for them too
        if health is not None and health.get("plugins", "ready") == "ready":
            if progress:
                progress(f"elowen: {service.name} ready (pid {health.get('pid', proc.pid)}, {time.monotonic() - began:.1f} s)")
            proc.returncode = 0  # detached on purpose: it outlives this process
            return status(service, cfg)
        code = proc.poll()
        if code is not None:
            raise ControlError(f"the {service.name} exited with status {code} while starting; its output ({log_path}):\n{_log_tail(log_path, offset)}")
        time.sleep(POLL)
    raise ControlError(
        f"the {service.name} (pid {proc.pid}) did not answer {service.url(cfg)}/health within {timeout:.0f} s; "
        f"its output ({log_path}):\n{_log_tail(log_path, offset)}"
    )


def stop(service: Service, cfg: Config, *, timeout: float = STOP_TIMEOUT, force: bool = False) -> int | None:
    """Send SIGTERM to the pid in the service's pid file and wait until it has exited.

    Returns the pid stopped, or ``None`` if it was not running. With ``force``, a process still
    alive after ``timeout`` seconds gets SIGKILL.

    Raises:
        ControlError: it is still running after ``timeout`` (without ``force``), it answers
            ``/health`` but has no pid file, or the pid file names another program.
    """
    pid_path = service.pid_file(cfg)
    info = read_pid_file(pid_path)
    if info is None or not is_alive(info["pid"]):
        if probe(service, cfg).kind == "ours":
            raise ControlError(f"a {service.name} answers at {service.url(cfg)} but {pid_path} names no live process; stop it by hand")
        return None
    pid = info["pid"]
    if not _runs_module(pid, service.module):
        raise ControlError(f"{pid_path} names pid {pid}, which is not an Elowen {service.name}; remove the stale file")
    os.kill(pid, signal.SIGTERM)
    if _wait_exit(pid, timeout):
        return pid
    if force:
        os.kill(pid, signal.SIGKILL)
        if _wait_exit(pid, 5.0):
            return pid
    raise ControlError(
        f"the {service.name} (pid {pid}) did not stop within {timeout:.0f} s of SIGTERM; "
        f"see {service.log_file(cfg)}, or force it with `elowen daemon stop --force`"
    )


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(POLL)
    return not is_alive(pid)


def describe_exit(returncode: int) -> str:
    """``signal 9`` for a process killed by a signal (negative ``returncode``), else
    ``status N``."""
    return f"signal {-returncode}" if returncode < 0 else f"status {returncode}"


def exit_status(returncode: int) -> int:
    """The shell convention for a child's return code: ``128 + N`` when killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_foreground(services: tuple[Service, ...], cfg: Config, *, notify: Callable[[str], None] | None = None) -> int:
    """Run ``services`` attached to this terminal (their output on it) until one exits, or
    until Ctrl-C / SIGTERM reaches this process; returns the exit status of the first service
    that exited (``128 + N`` when signal N killed it; after Ctrl-C: of the first service, 0
    when it shut down cleanly).

    When a service exits on its own, ``notify`` gets one line saying which, how, and what is
    stopped because of it (``the daemon exited (signal 9); stopping the web front end``).

    The services run in their own process group, so a terminal's Ctrl-C reaches only this
    process, which then sends each service exactly one SIGTERM (a second signal would make the
    daemon stop at once instead of gracefully) and waits ``STOP_TIMEOUT`` seconds before SIGKILL.

    Raises:
        ControlError: one of them is already running.
    """
    for service in services:
        current = status(service, cfg)
        if current.running:
            raise ControlError(f"the {service.name} is already running (pid {current.pid}) at {current.url}; `elowen down` first")
        if current.conflict:
            raise ControlError(current.conflict)
    env = dict(os.environ, ELOWEN_HOME=str(cfg.home))
    procs: list[subprocess.Popen[bytes]] = []
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for service in services:
            procs.append(subprocess.Popen([sys.executable, "-m", service.module], env=env, start_new_session=True))
        while True:
            done = [(service, p) for service, p in zip(services, procs) if p.poll() is not None]
            if done:
                service, proc = done[0]
                others = [s.title for s, p in zip(services, procs) if p.poll() is None]
                if notify is not None:
                    then = f"; stopping the {' and the '.join(others)}" if others else ""
                    notify(f"elowen: the {service.title} exited ({describe_exit(proc.returncode)}){then}")
                return exit_status(proc.returncode)
            time.sleep(0.2)
    except KeyboardInterrupt:
        _terminate(procs)
        return procs[0].returncode if procs and procs[0].returncode is not None and procs[0].returncode >= 0 else 130
    finally:
        _terminate(procs)
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _terminate(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every process still running, then SIGKILL after ``STOP_TIMEOUT``."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
        alive = [p for p in procs if p.poll() is None]
        if not alive:
            return
        for p in alive:
            p.send_signal(sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(p.poll() is None for p in alive):
            time.sleep(POLL)


def tail(path: Path, lines: int, *, follow: bool, write: Callable[[str], None]) -> None:
    """Write the last ``lines`` lines of ``path``; with ``follow``, keep writing what is
    appended (polling every 0.2 s, reopening the file if it is replaced) until Ctrl-C.

    Raises:
        FileNotFoundError: ``path`` does not exist and ``follow`` is false.
    """
    if not follow and not path.exists():
        raise FileNotFoundError(str(path))
    pos, ino = 0, None
    if path.exists():
        with open(path, "rb") as f:
            for line in _last_lines(f, lines) if lines > 0 else []:
                write(line.decode("utf-8", "replace").rstrip("\r\n"))
            pos, ino = f.seek(0, os.SEEK_END), os.fstat(f.fileno()).st_ino
    if not follow:
        return
    partial = b""
    try:
        while True:
            try:
                st = path.stat()
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_ino != ino or st.st_size < pos):
                ino, pos, partial = st.st_ino, 0, b""
            if st is not None and st.st_size > pos:
                with open(path, "rb") as f:
                    f.seek(pos)
                    chunk = f.read()
                pos += len(chunk)
                *complete, partial = (partial + chunk).split(b"\n")
                for line in complete:
                    write(line.decode("utf-8", "replace").rstrip("\r"))
            time.sleep(0.2)
    except KeyboardInterrupt:
        return


def _last_lines(f: Any, n: int, block: int = 8192) -> list[bytes]:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    data = b""
    while size > 0 and data.count(b"\n") <= n:
        step = min(block, size)
        size -= step
        f.seek(size)
        data = f.read(step) + data
    return data.splitlines(keepends=True)[-n:]

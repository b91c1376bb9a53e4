"""Settings: ``$ELOWEN_HOME/config.toml``, validated, written atomically, watched for edits.

Known shape (unknown top-level tables and unknown keys are allowed, so plugins and later
releases can add their own; the known keys are checked)::

    [daemon]
    host = "127.0.0.1"          # str
    port = 4400                 # int, 1..65535
    event_retention = 100000    # int ≥ 1

    [plugins.<name>]
    enabled = true              # bool
    granted = ["net:api.x.com"] # list of str (capabilities the user granted)
    [plugins.<name>.config]     # table, validated by the plugin's manifest elsewhere

    [execs]
    allowed = ["*"]             # list of str (glob patterns over exec specs; read by the agents plugin)
    fallback = "<executor>"     # str (an exec spec)

Our own writes are recognised by their content hash, so :meth:`Settings.watch` reports only
edits made by someone else (by hand, another process).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import logging
import os
import tempfile
import threading
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import tomli_w
import trio
import watchfiles

from elowen_sdk import ConfigError

__all__ = ["CONFIG_NAME", "OnChange", "Settings", "validate"]

log = logging.getLogger(__name__)

CONFIG_NAME = "config.toml"

OnChange = Callable[[dict[str, Any]], None | Awaitable[None]]


def _type_name(value: object) -> str:
    return f"{value!r} ({value.__class__.__name__})"


def _check_str(where: str, value: object) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {_type_name(value)}")


def _check_int(where: str, value: object, low: int, high: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{where} must be an integer, got {_type_name(value)}")
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f"≥ {low}"
        raise ConfigError(f"{where} must be {bound}, got {value}")


def _check_bool(where: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {_type_name(value)}")


def _check_str_list(where: str, value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings, got {_type_name(value)}")


def _check_table(where: str, value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table, got {_type_name(value)}")
    return value


def validate(data: object) -> dict[str, Any]:
    """Check the known parts of a settings document; returns it unchanged.

    Raises:
        ConfigError: naming the key (``plugins.hello.enabled``) and what is wrong.
    """
    doc = _check_table("the document", data)
    if "daemon" in doc:
        daemon = _check_table("[daemon]", doc["daemon"])
        if "host" in daemon:
            _check_str("daemon.host", daemon["host"])
        if "port" in daemon:
            _check_int("daemon.port", daemon["port"], 1, 65535)
        if "event_retention" in daemon:
            _check_int("daemon.event_retention", daemon["event_retention"], 1)
    if "plugins" in doc:
        plugins = _check_table("[plugins]", doc["plugins"])
        for name, section in plugins.items():
            where = f"plugins.{name}"
            table = _check_table(f"[{where}]", section)
            if "enabled" in table:
                _check_bool(f"{where}.enabled", table["enabled"])
            if "granted" in table:
                _check_str_list(f"{where}.granted", table["granted"])
            if "config" in table:
                _check_table(f"[{where}.config]", table["config"])
    if "execs" in doc:
        execs = _check_table("[execs]", doc["execs"])
        if "allowed" in execs:
            _check_str_list("execs.allowed", execs["allowed"])
        if "fallback" in execs:
            _check_str("execs.fallback", execs["fallback"])
    return doc


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


class Settings:
    """The settings file ``home/config.toml``.

    Args:
        home: Elowen's home folder (:func:`elowen.core.paths.home`).

    ``data`` is the last good snapshot (``{}`` before the first :meth:`load`); treat it as
    read-only and change settings with :meth:`update`.
    """

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.path = self.home / CONFIG_NAME
        self.data: dict[str, Any] = {}
        self._digest: str | None = None  # of the content behind ``data`` (None: no file)
        self._lock = threading.Lock()
        self._stop: trio.Event | None = None

    # -- reading -----------------------------------------------------------------------------

    def _read(self) -> tuple[dict[str, Any], str | None]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}, None
        try:
            doc = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{self.path}: not UTF-8: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{self.path}: invalid TOML: {exc}") from None
        try:
            validate(doc)
        except ConfigError as exc:
            raise ConfigError(f"{self.path}: {exc}") from None
        return doc, _digest(raw)

    def load(self) -> dict[str, Any]:
        """Read and validate the file; it becomes :attr:`data`. A missing file is ``{}``.

        Raises:
            ConfigError: invalid TOML or a wrong shape; the message names the file and the
                problem. :attr:`data` keeps the last good snapshot.
        """
        with self._lock:
            self.data, self._digest = self._read()
            return self.data

    def get(self, *keys: str, default: Any = None) -> Any:
        """``data[k1][k2]…`` from the snapshot, or ``default`` if any level is missing."""
        node: Any = self.data
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
        return node

    # -- writing -----------------------------------------------------------------------------

    def update(self, mutator: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Read the file afresh, let ``mutator`` change a copy in place, validate, and write it
        atomically (temporary file in the same folder, fsync, ``os.replace``, mode 0600).

        Thread-safe (one writer at a time). Returns the new :attr:`data`.

        Raises:
            ConfigError: the file on disk is invalid (fix it first; it is not overwritten), or
                the result does not validate or cannot be written as TOML (e.g. a ``None``).
            OSError: the write failed; the old file is intact.
        """
        with self._lock:
            current, _ = self._read()
            doc = copy.deepcopy(current)
            mutator(doc)
            validate(doc)
            try:
                raw = tomli_w.dumps(doc).encode("utf-8")
            except TypeError as exc:
                raise ConfigError(f"{self.path}: cannot write settings as TOML: {exc}") from None
            self._digest = _digest(raw)  # before the file appears, so the watcher knows it
            self._write_atomic(raw)
            self.data = doc
            return doc

    def _write_atomic(self, raw: bytes) -> None:
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{CONFIG_NAME}.", suffix=".tmp", dir=self.home)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
                fh.flush()
                os.fchmod(fh.fileno(), 0o600)
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(self.home, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # -- watching ----------------------------------------------------------------------------

    def _reread(self) -> dict[str, Any] | None:
        """The new snapshot if the file changed (not by us) and is valid; else ``None``."""
        with self._lock:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                raw = None
            digest = _digest(raw) if raw is not None else None
            if digest == self._digest:
                return None
            try:
                doc, digest = self._read()
            except ConfigError as exc:
                log.error("ignoring the edit of %s, keeping the last good settings: %s", self.path, exc)
                return None
            self.data, self._digest = doc, digest
            return doc

    async def _notify(self, on_change: OnChange, doc: dict[str, Any]) -> None:
        try:
            result = on_change(doc)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("settings change handler %r failed", on_change)

    async def watch(
        self,
        on_change: OnChange,
        *,
        step_ms: int = 20,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Call ``on_change(new_data)`` (sync or async) whenever someone else changes the file
        into valid settings; runs until :meth:`stop` or cancellation.

        Invalid content is logged and ignored (:attr:`data` keeps the last good snapshot);
        our own writes are not reported. ``started()`` is signalled once the file system watch
        is in place; a change made between the last :meth:`load` and then is reported too.
        ``step_ms``: quiet time that groups the writes of one save (watchfiles' ``step``).
        """
        stop = self._stop = trio.Event()
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)

        async def iterate(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            changes = watchfiles.awatch(
                self.home,
                watch_filter=lambda _change, path: Path(path).name == CONFIG_NAME,
                stop_event=stop,
                step=step_ms,
                recursive=False,
            )
            # started() lets this task run on to its next checkpoint, which awatch reaches only
            # after installing the watch: once the parent resumes, no edit can be missed.
            task_status.started()
            async for _ in changes:
                doc = self._reread()
                if doc is not None:
                    await self._notify(on_change, doc)

        async def stop_on_cancel() -> None:
            # awatch waits in a thread that only sees ``stop``; cancelling alone would take
            # up to watchfiles' rust_timeout (5 s).
            try:
                await trio.sleep_forever()
            finally:
                stop.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_on_cancel)
            await nursery.start(iterate)
            doc = self._reread()
            task_status.started()
            if doc is not None:
                await self._notify(on_change, doc)
            await stop.wait()
            nursery.cancel_scope.cancel()

    def stop(self) -> None:
        """End :meth:`watch` (within ``step_ms``). Trio thread only."""
        if self._stop is not None:
            self._stop.set()

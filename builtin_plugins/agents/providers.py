"""The shared base of the coding-agent CLI providers (``claude``, ``codex``, ``opencode``,
``kilo``): settings, command line, environment, trust pre-seeding, session ids, screen
classification.

A provider plugin subclasses :class:`Provider` and registers an instance as
``elowen_sdk.Executor(name, provider)``. Every file location honours the environment the CLI
will actually run with (``env`` arguments: the variables passed to tmux with ``-e``; names
missing there fall back to this process's environment), so ``HOME``, ``CLAUDE_CONFIG_DIR``,
``CODEX_HOME`` and ``XDG_DATA_HOME`` point where the spawned process looks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from .screen import Classification, classify

__all__ = [
    "SES_ID_RE",
    "UUID_RE",
    "OpenCodeFamilyProvider",
    "Provider",
    "ProviderError",
    "ProviderSettings",
    "atomic_update",
    "env_lookup",
    "home_dir",
    "read_sqlite_session",
    "xdg_data_home",
]

log = logging.getLogger(__name__)

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
"""Claude and Codex session ids (Claude: uuid4 chosen up front; Codex: uuid7)."""

SES_ID_RE = re.compile(r"^ses_[0-9A-Za-z]{20,40}$")
"""OpenCode and Kilo session ids (``ses_`` + 26 base62 characters in 1.18 / 7.7)."""


class ProviderError(RuntimeError):
    """A provider could not do what was asked (an unreadable config file it must merge into,
    a session id of the wrong shape for a resume)."""


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """Per-provider settings, from the plugin's manifest ``[config]``.

    Attributes:
        binary: the executable (name on ``PATH`` or absolute path).
        extra_args: appended to every command line before the prompt.
        skip_permissions: run without permission prompts (per CLI; a no-op for Kilo).
        resume_sessions: resume the previous conversation when an agent is relaunched.
        default_model: used when a task names no model (``""``: the CLI's own default).
        env: extra environment variables for every spawn (``[config.env]``; e.g. a ``HOME``
            pointing at a prepared offline home), merged over the provider's own.
    """

    binary: str
    extra_args: tuple[str, ...] = ()
    skip_permissions: bool = False
    resume_sessions: bool = True
    default_model: str = ""
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, *, default_binary: str) -> ProviderSettings:
        """Settings from ``ctx.config`` (missing keys take the defaults).

        Raises:
            ProviderError: ``extra_args`` is not a list of strings.
        """
        cfg = dict(config or {})
        extra = cfg.get("extra_args") or []
        if not isinstance(extra, Sequence) or isinstance(extra, str) or not all(isinstance(a, str) for a in extra):
            raise ProviderError("extra_args must be a list of strings")
        env = cfg.get("env") or {}
        if not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ProviderError("env must be a table of string values")
        return cls(
            binary=str(cfg.get("binary") or default_binary),
            extra_args=tuple(extra),
            skip_permissions=bool(cfg.get("skip_permissions", False)),
            resume_sessions=bool(cfg.get("resume_sessions", True)),
            default_model=str(cfg.get("default_model") or ""),
            env=MappingProxyType(dict(env)),
        )


# --------------------------------------------------------------------------- environment


def env_lookup(env: Mapping[str, str] | None, name: str) -> str | None:
    """``env[name]`` if set and non-empty, else this process's ``os.environ[name]``, else None."""
    if env and env.get(name):
        return env[name]
    return os.environ.get(name) or None


def home_dir(env: Mapping[str, str] | None = None) -> Path:
    """The spawned process's ``$HOME``."""
    home = env_lookup(env, "HOME")
    return Path(home) if home else Path.home()


def xdg_data_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME`` or ``$HOME/.local/share`` of the spawned process."""
    data = env_lookup(env, "XDG_DATA_HOME")
    return Path(data) if data else home_dir(env) / ".local" / "share"


# --------------------------------------------------------------------------- files


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".elowen-lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def atomic_update(path: Path, update: Any, *, load: Any, dump: Any, mode: int = 0o600) -> Any:
    """Read-modify-write ``path`` atomically under an advisory lock.

    ``load(text) -> data`` parses the current content (``{}`` when the file is missing),
    ``update(data) -> data`` changes it, ``dump(data) -> text`` serialises it; the result is
    written to a temp file in the same folder, fsynced and renamed over ``path`` (keeping the
    old file's permission bits). Returns the written data.

    Raises:
        ProviderError: the existing file cannot be parsed (it is left untouched).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            data: Any = {}
        else:
            try:
                data = load(text) if text.strip() else {}
            except ValueError as exc:
                raise ProviderError(f"{path}: cannot parse ({exc}); not overwriting it") from None
        data = update(data)
        with contextlib.suppress(FileNotFoundError):
            mode = path.stat().st_mode & 0o777
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(dump(data))
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
    return data


def read_sqlite_session(db: Path, *, session_id: str | None = None, directory: str | None = None) -> str | None:
    """Look a session up in an OpenCode/Kilo SQLite database, opened read-only with apsw.

    With ``session_id``: returns it if a row with that id exists. With ``directory``: the id of
    the most recently updated top-level session started in that folder. Schema (OpenCode's
    ``session.sql.ts``, also Kilo 7): table ``session`` with ``id``, ``directory``,
    ``parent_id``, ``time_updated``. A missing file, table or column gives ``None`` (logged),
    never an exception.
    """
    if not db.is_file():
        return None
    import apsw  # local: only these two providers need it

    try:
        conn = apsw.Connection(f"file:{db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    except apsw.Error as exc:
        log.warning("cannot open %s read-only: %s", db, exc)
        return None
    try:
        conn.set_busy_timeout(500)
        cols = {row[1] for row in conn.execute("PRAGMA table_info(session)")}
        if not {"id", "directory"} <= cols:
            log.warning("%s: no session(id, directory) table; columns %s", db, sorted(cols))
            return None
        if session_id is not None:
            row = conn.execute("SELECT id FROM session WHERE id = ?", (session_id,)).fetchone()
            return row[0] if row else None
        where = "directory = ?" + (" AND parent_id IS NULL" if "parent_id" in cols else "")
        order = "time_updated DESC, " if "time_updated" in cols else ""
        row = conn.execute(f"SELECT id FROM session WHERE {where} ORDER BY {order}rowid DESC LIMIT 1", (directory,)).fetchone()
        return row[0] if row else None
    except apsw.Error as exc:
        log.warning("%s: session lookup failed: %s", db, exc)
        return None
    finally:
        conn.close()


# --------------------------------------------------------------------------- provider


class Provider:
    """Base of one coding-agent CLI provider. Subclasses set the class variables and implement
    :meth:`_command`, and override the session and trust methods they support.

    Class variables:
        name: executor name (``exec:<name>`` specs).
        cli: key of the screen patterns (:func:`~elowen_builtins.agents.screen.classify`).
        default_binary: executable when ``binary`` is not configured.
        base_env: variables every spawn needs (updater, telemetry off…).
        id_pattern: the shape of a valid session id.
        chooses_session_id: the id is chosen up front and passed on the command line.
    """

    name: ClassVar[str] = ""
    cli: ClassVar[str] = ""
    default_binary: ClassVar[str] = ""
    base_env: ClassVar[Mapping[str, str]] = {}
    id_pattern: ClassVar[re.Pattern[str]] = UUID_RE
    chooses_session_id: ClassVar[bool] = False

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.settings = ProviderSettings.from_config(config, default_binary=self.default_binary)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings!r})"

    # ---- command line

    def build_command(
        self,
        task_prompt: str,
        *,
        model: str | None = None,
        session_id: str | None = None,
        resume: bool = False,
        extra_args: Sequence[str] = (),
        skip_permissions: bool | None = None,
        binary: str | None = None,
    ) -> list[str]:
        """The argv that starts the CLI interactively on ``task_prompt`` (``""``: no prompt).

        ``model`` / ``skip_permissions`` / ``binary`` default to the settings; ``extra_args``
        come after the configured ones. ``resume=True`` continues ``session_id``.

        Raises:
            ProviderError: ``resume`` without a session id, or an id of the wrong shape.
        """
        if resume and not session_id:
            raise ProviderError(f"{self.name}: resume needs a session id")
        if session_id is not None and not self.id_pattern.match(session_id):
            raise ProviderError(f"{self.name}: {session_id!r} is not a session id")
        return self._command(
            binary or self.settings.binary,
            task_prompt,
            model=model or self.settings.default_model or None,
            session_id=session_id,
            resume=resume,
            extra_args=[*self.settings.extra_args, *extra_args],
            skip_permissions=self.settings.skip_permissions if skip_permissions is None else skip_permissions,
        )

    def _command(
        self,
        binary: str,
        prompt: str,
        *,
        model: str | None,
        session_id: str | None,
        resume: bool,
        extra_args: list[str],
        skip_permissions: bool,
    ) -> list[str]:
        raise ProviderError(f"{type(self).__name__} does not build command lines")

    def env_for(self, *, skip_permissions: bool | None = None) -> dict[str, str]:
        """Environment variables the CLI needs (pass them with tmux ``-e``, never typed).
        Providers that grant permissions through the environment honour
        ``skip_permissions`` (default: the setting) here. The configured ``env`` is merged
        over the provider's base variables."""
        return {**self.base_env, **self.settings.env}

    # ---- trust

    def preseed_trust(self, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> Path | None:
        """Mark ``workdir`` trusted in the config file the spawned CLI reads, merging with its
        content atomically. Returns the file written, or ``None`` when the CLI has no trust
        dialog to pre-seed.

        Raises:
            ProviderError: the existing config file cannot be parsed.
        """
        return None

    # ---- sessions

    def new_session_id(self) -> str | None:
        """A fresh id to pass on the command line, or ``None`` if the CLI picks its own."""
        return None

    def find_session_id(self, workdir: str | Path, *, env: Mapping[str, str] | None = None, since: float | None = None) -> str | None:
        """The id of the newest session the CLI recorded for ``workdir`` (modified at or after
        ``since``, a Unix time, when given), read from the files the CLI writes; ``None`` if
        there is none."""
        return None

    def session_exists(self, session_id: str, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> bool:
        """Whether the CLI's transcript/record of ``session_id`` exists."""
        return False

    def validate_session_id(self, session_id: str | None, *, workdir: str | Path, env: Mapping[str, str] | None = None) -> bool:
        """``True`` only if ``session_id`` has the CLI's id shape AND its transcript exists
        (PITFALLS 18: garbage ids such as ``management`` or a stale id must start fresh)."""
        if not isinstance(session_id, str) or not self.id_pattern.match(session_id):
            return False
        return self.session_exists(session_id, workdir, env=env)

    # ---- screen

    def classify(self, screen: str, *, version: str | None = None, escapes: str | None = None) -> Classification:
        """:func:`~elowen_builtins.agents.screen.classify` with this provider's CLI."""
        return classify(self.cli, screen, version=version, escapes=escapes)


class OpenCodeFamilyProvider(Provider):
    """OpenCode and its fork Kilo: ``BIN [-s ses_…] [--model provider/model] [extra args]
    --prompt=PROMPT``; sessions in the SQLite database
    ``$XDG_DATA_HOME/<data_dir>/<data_dir>.db``; no trust dialog.

    Subclasses set ``data_dir`` and ``permission_env`` (the variable that carries an inline
    permission ruleset, or ``""`` when the CLI has none: skip-permissions is then a no-op).
    """

    id_pattern = SES_ID_RE
    data_dir: ClassVar[str] = ""
    permission_env: ClassVar[str] = ""

    def _command(self, binary: str, prompt: str, *, model: str | None, session_id: str | None, resume: bool, extra_args: list[str], skip_permissions: bool) -> list[str]:
        if session_id and not resume:
            raise ProviderError(f"{self.name} chooses its own session id; pass one only to resume")
        argv = [binary]
        if resume and session_id:
            argv += ["-s", session_id]
        if model:
            argv += ["--model", model]
        argv += extra_args
        if prompt:
            # one argv word, so a prompt starting with "-" is not read as a flag
            argv.append(f"--prompt={prompt}")
        return argv

    def env_for(self, *, skip_permissions: bool | None = None) -> dict[str, str]:
        env = {**self.base_env, **self.settings.env}
        skip = self.settings.skip_permissions if skip_permissions is None else skip_permissions
        if skip and self.permission_env:
            env[self.permission_env] = json.dumps({"*": "allow"})
        elif skip:
            log.warning("%s has no way to skip permission prompts; skip_permissions is ignored", self.name)
        return env

    def database(self, env: Mapping[str, str] | None = None) -> Path:
        """``$XDG_DATA_HOME/<data_dir>/<data_dir>.db`` of the spawned process."""
        return xdg_data_home(env) / self.data_dir / f"{self.data_dir}.db"

    def session_exists(self, session_id: str, workdir: str | Path, *, env: Mapping[str, str] | None = None) -> bool:
        return read_sqlite_session(self.database(env), session_id=session_id) == session_id

    def find_session_id(self, workdir: str | Path, *, env: Mapping[str, str] | None = None, since: float | None = None) -> str | None:
        db = self.database(env)
        if since is not None and db.is_file():
            newest = max((p.stat().st_mtime for p in db.parent.glob(db.name + "*")), default=0.0)
            if newest < since:
                return None
        for directory in dict.fromkeys([os.path.realpath(workdir), os.path.abspath(workdir)]):
            found = read_sqlite_session(db, directory=directory)
            if found and self.id_pattern.match(found):
                return found
        return None


def dump_json(data: Any) -> str:
    """JSON as the CLIs write it (2-space indent, UTF-8 kept)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def json_object(text: str) -> dict[str, Any]:
    """Parse a JSON object.

    Raises:
        ValueError: not JSON or not an object.
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("top level is not an object")
    return data

"""The executor provider contract: how a plugin adds a coding-agent CLI to Elowen.

A provider plugin subclasses :class:`Provider` (or :class:`OpenCodeFamilyProvider` for a CLI of
the OpenCode family), sets its class variables, implements :meth:`Provider._command`, overrides
the session and trust methods its CLI supports, ships its screen patterns as ``patterns.toml``
in its package, and registers one instance from its ``register_executors`` hook::

    @hookimpl
    def register_executors(ctx, register):
        register(Executor("mycli", MyCliProvider(ctx.config, plugin=ctx.name)))

Its manifest lists the name under ``[contributes] executors``. From then on the ``executors``
registry (the agents plugin, :mod:`elowen_sdk.services.executors`) resolves specs
``mycli``, ``mycli:<model>`` and the provider's :attr:`~Provider.aliases`, the web page lists it,
and the scheduler starts tasks on it. The four builtin providers (``claude``, ``codex``,
``opencode``, ``kilo``) are built exactly this way.

Every file location honours the environment the CLI will actually run with (``env``
arguments: the variables passed to tmux with ``-e``; names missing there fall back to this
process's environment), so ``HOME``, ``XDG_DATA_HOME`` and the CLI's own variables point where
the spawned process looks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import ElowenError

if TYPE_CHECKING:
    from .screen import Classification, PatternSet

__all__ = [
    "MODEL_RE",
    "PROVIDER_MEMBERS",
    "SES_ID_RE",
    "UUID_RE",
    "Channels",
    "OpenCodeFamilyProvider",
    "Provider",
    "ProviderError",
    "ProviderSettings",
    "atomic_update",
    "dump_json",
    "env_lookup",
    "home_dir",
    "json_object",
    "read_sqlite_session",
    "xdg_data_home",
]

log = logging.getLogger(__name__)

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
"""Claude and Codex session ids (Claude: uuid4 chosen up front; Codex: uuid7)."""

SES_ID_RE = re.compile(r"^ses_[0-9A-Za-z]{20,40}$")
"""OpenCode and Kilo session ids (``ses_`` + 26 base62 characters in 1.18 / 7.7)."""

MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,199}$")
"""The default shape of a model name in an exec spec (letters, digits, ``._:@+/-``)."""

PROVIDER_MEMBERS: tuple[str, ...] = (
    "name",
    "display_name",
    "aliases",
    "models",
    "slash_models",
    "plain_models",
    "model_pattern",
    "model_hint",
    "settings",
    "plugin",
    "build_command",
    "env_for",
    "preseed_trust",
    "state_paths",
    "chooses_session_id",
    "new_session_id",
    "find_session_id",
    "validate_session_id",
    "types_prompt_on_resume",
    "auth_note",
    "cli",
    "patterns_package",
    "classify",
    "detect_version",
    "permission_request",
    "permission_reply",
    "wanted_channels",
    "channel_env",
)
"""Every member the agents side reads from a CLI provider (all defined by :class:`Provider`)."""


class ProviderError(ElowenError):
    """A provider could not do what was asked (an unreadable config file it must merge into,
    a session id of the wrong shape for a resume, bad settings)."""


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """Per-provider settings, from the plugin's manifest ``[config]``.

    Attributes:
        binary: the executable (name on ``PATH`` or absolute path).
        extra_args: appended to every command line before the prompt.
        skip_permissions: run without permission prompts (per CLI; may be a no-op).
        resume_sessions: resume the previous conversation when an agent is relaunched.
        default_model: used when a task names no model (``""``: the CLI's own default).
        env: extra environment variables for every spawn (``[config.env]``; e.g. a ``HOME``
            pointing at a prepared offline home), merged over the provider's own.
        sandbox: ``"auto"`` (bubblewrap where the machine supports it), ``"bwrap"`` (bubblewrap
            or the task is blocked) or ``"none"``; a project's own setting wins.
        sandbox_network: share the host's network inside the sandbox (``False``: none at all;
            the CLI then reaches neither a remote model API nor the Elowen daemon).
        mcp: configure Elowen's MCP server (``/mcp``) in the CLI when it supports MCP and the
            ``mcp`` plugin is enabled (the agent token goes through the environment).
        permission_channel: send the CLI's permission requests to Elowen through its typed
            channel when it has one (:meth:`Provider.channel_args`); ``False``: screen reading
            only. Screen reading stays the fallback either way.
    """

    binary: str
    extra_args: tuple[str, ...] = ()
    skip_permissions: bool = False
    resume_sessions: bool = True
    default_model: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    sandbox: str = "auto"
    sandbox_network: bool = True
    mcp: bool = True
    permission_channel: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, *, default_binary: str) -> ProviderSettings:
        """Settings from ``ctx.config`` (missing keys take the defaults).

        Raises:
            ProviderError: ``extra_args`` is not a list of strings, or ``env`` not a table of
                strings.
        """
        cfg = dict(config or {})
        extra = cfg.get("extra_args") or []
        if not isinstance(extra, Sequence) or isinstance(extra, str) or not all(isinstance(a, str) for a in extra):
            raise ProviderError("extra_args must be a list of strings")
        env = cfg.get("env") or {}
        if not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ProviderError("env must be a table of string values")
        sandbox = str(cfg.get("sandbox") or "auto")
        if sandbox not in ("auto", "bwrap", "none"):
            raise ProviderError(f"sandbox must be 'auto', 'bwrap' or 'none', not {sandbox!r}")
        return cls(
            binary=str(cfg.get("binary") or default_binary),
            extra_args=tuple(extra),
            skip_permissions=bool(cfg.get("skip_permissions", False)),
            resume_sessions=bool(cfg.get("resume_sessions", True)),
            default_model=str(cfg.get("default_model") or ""),
            env=MappingProxyType(dict(env)),
            sandbox=sandbox,
            sandbox_network=bool(cfg.get("sandbox_network", True)),
            mcp=bool(cfg.get("mcp", True)),
            permission_channel=bool(cfg.get("permission_channel", True)),
        )


@dataclass(frozen=True, slots=True)
class Channels:
    """Elowen's structured channels offered to one agent launch (see
    :meth:`Provider.channel_args`).

    Attributes:
        permission_url: the URL the CLI posts a permission request to and waits on for the
            verdict (the agents plugin's ``POST /agent/permission``), or ``None`` (no channel:
            screen reading only).
        mcp_url: Elowen's MCP endpoint (``…/mcp``), or ``None`` (the ``mcp`` plugin is off).
        token_env: the environment variable holding the agent's bearer token; a provider
            refers to it by name (``$ELOWEN_TOKEN``) and never writes the token itself
            into a command line or a file.
        wait: seconds the CLI should wait for a verdict before falling back to its own
            dialog (the screen path).
    """

    permission_url: str | None = None
    mcp_url: str | None = None
    token_env: str = "ELOWEN_TOKEN"
    wait: float = 3600.0


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


def atomic_update(path: Path, update: Callable[[Any], Any], *, load: Callable[[str], Any], dump: Callable[[Any], str], mode: int = 0o600) -> Any:
    """Read-modify-write ``path`` atomically under an advisory lock.

    ``load(text) -> data`` parses the current content (``{}`` when the file is missing),
    ``update(data) -> data`` changes it, ``dump(data) -> text`` serialises it; the result is
    written to a temp file in the same folder, fsynced and renamed over ``path`` (keeping the
    old file's permission bits; ``mode`` for a new file). Returns the written data.

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


def dump_json(data: Any) -> str:
    """JSON as the CLIs write it (2-space indent, UTF-8 kept, final newline)."""
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


def read_sqlite_session(db: Path, *, session_id: str | None = None, directory: str | None = None) -> str | None:
    """Look a session up in an OpenCode-family SQLite database, opened read-only with apsw.

    With ``session_id``: returns it if a row with that id exists. With ``directory``: the id of
    the most recently updated top-level session started in that folder. Schema (OpenCode's
    ``session.sql.ts``, also Kilo 7): table ``session`` with ``id``, ``directory``,
    ``parent_id``, ``time_updated``. A missing file, table or column (or apsw not installed)
    gives ``None`` (logged), never an exception.
    """
    if not db.is_file():
        return None
    try:
        import apsw  # local: only the OpenCode family needs it (Elowen itself depends on apsw)
    except ImportError:
        log.warning("cannot read %s: apsw is not installed", db)
        return None
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
            return str(row[0]) if row else None
        where = "directory = ?" + (" AND parent_id IS NULL" if "parent_id" in cols else "")
        order = "time_updated DESC, " if "time_updated" in cols else ""
        row = conn.execute(f"SELECT id FROM session WHERE {where} ORDER BY {order}rowid DESC LIMIT 1", (directory,)).fetchone()
        return str(row[0]) if row else None
    except apsw.Error as exc:
        log.warning("%s: session lookup failed: %s", db, exc)
        return None
    finally:
        conn.close()


# --------------------------------------------------------------------------- provider


class Provider:
    """Base of one coding-agent CLI provider. Subclasses set the class variables and implement
    :meth:`_command`, and override the session and trust methods they support.

    Exec grammar (read by the ``executors`` registry):
        name: executor name: specs ``<name>`` (the default model) and ``<name>:<model>``.
        aliases: bare spec → model of this provider (Claude Code: ``{"sonnet": "sonnet",
            "opus": "opus"}``); an alias another enabled provider already claims is ignored.
        models: model names suggested by pickers (the web's executor list); not a limit.
        slash_models: a bare ``<a>/<b>`` spec means this provider with that model (OpenCode);
            when several enabled providers claim it, the first by name wins.
        plain_models: a bare name listed in settings ``[execs] plain`` means this provider
            with that model (Claude Code).
        model_pattern / model_hint: the shape a model name must have, and how to say it.

    Presentation and help:
        display_name: the CLI's name for people (``"Claude Code"``).
        auth_hint: the note for a task blocked because the CLI is not logged in (the screen
            state ``auth_required``); ``""``: a generic note naming the plugin.

    Command line, trust, sessions:
        default_binary: executable when ``binary`` is not configured.
        base_env: variables every spawn needs (updater, telemetry off…).
        id_pattern: the shape of a valid session id.
        chooses_session_id: the id is chosen up front (:meth:`new_session_id`) and passed on
            the command line; otherwise :meth:`find_session_id` captures it after the run.
        types_prompt_on_resume: the CLI ignores the prompt on its command line when resuming,
            so the agents side types it into the composer once the screen is idle.

    Screens:
        cli: the name of the CLI's screens (``[meta] cli`` of its patterns; default ``name``).
        patterns_package: the import package holding ``patterns.toml`` (default: the package
            of the subclass's module). Prompts, footers and answer keys are data there.

    Args:
        config: the plugin's ``ctx.config`` (see :class:`ProviderSettings`).
        plugin: the owning plugin's name (``ctx.name``), used in notes telling a human which
            plugin's settings to change, and for :attr:`log` (``elowen.plugin.<plugin>``).

    Raises:
        ProviderError: invalid settings.
    """

    name: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    aliases: ClassVar[Mapping[str, str]] = MappingProxyType({})
    models: ClassVar[tuple[str, ...]] = ()
    slash_models: ClassVar[bool] = False
    plain_models: ClassVar[bool] = False
    model_pattern: ClassVar[re.Pattern[str]] = MODEL_RE
    model_hint: ClassVar[str] = "a model name (letters, digits, ._:@+/-)"
    auth_hint: ClassVar[str] = ""
    cli: ClassVar[str] = ""
    patterns_package: ClassVar[str] = ""
    default_binary: ClassVar[str] = ""
    base_env: ClassVar[Mapping[str, str]] = MappingProxyType({})
    id_pattern: ClassVar[re.Pattern[str]] = UUID_RE
    chooses_session_id: ClassVar[bool] = False
    types_prompt_on_resume: ClassVar[bool] = False

    def __init__(self, config: Mapping[str, Any] | None = None, *, plugin: str = "") -> None:
        self.settings = ProviderSettings.from_config(config, default_binary=self.default_binary or self.name)
        self.plugin = plugin or self.name
        self.log = logging.getLogger(f"elowen.plugin.{self.plugin}")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("patterns_package"):
            cls.patterns_package = cls.__module__.rpartition(".")[0] or cls.__module__
        if "name" in cls.__dict__ and "cli" not in cls.__dict__:
            cls.cli = cls.name

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
        channels: Channels | None = None,
    ) -> list[str]:
        """The argv that starts the CLI interactively on ``task_prompt`` (``""``: no prompt).

        ``model`` / ``skip_permissions`` / ``binary`` default to the settings; ``extra_args``
        come after the configured ones, then :meth:`channel_args` of ``channels`` (filtered by
        the ``mcp`` / ``permission_channel`` settings). ``resume=True`` continues ``session_id``.

        Raises:
            ProviderError: ``resume`` without a session id, or an id of the wrong shape.
        """
        if resume and not session_id:
            raise ProviderError(f"{self.name}: resume needs a session id")
        if session_id is not None and not self.id_pattern.match(session_id):
            raise ProviderError(f"{self.name}: {session_id!r} is not a session id")
        skip = self.settings.skip_permissions if skip_permissions is None else skip_permissions
        wanted = self.wanted_channels(channels, skip_permissions=skip)
        wired = self.channel_args(wanted) if wanted is not None else []
        return self._command(
            binary or self.settings.binary,
            task_prompt,
            model=model or self.settings.default_model or None,
            session_id=session_id,
            resume=resume,
            extra_args=[*self.settings.extra_args, *extra_args, *wired],
            skip_permissions=skip,
        )

    # ---- structured channels (optional; screen reading is the fallback)

    def wanted_channels(self, channels: Channels | None, *, skip_permissions: bool | None = None) -> Channels | None:
        """``channels`` filtered by this provider's ``mcp`` / ``permission_channel`` settings
        (``permission_url`` dropped with ``skip_permissions``, default: the setting); ``None``
        when nothing is left (or ``channels`` is ``None``)."""
        if channels is None:
            return None
        skip = self.settings.skip_permissions if skip_permissions is None else skip_permissions
        wanted = Channels(
            permission_url=channels.permission_url if self.settings.permission_channel and not skip else None,
            mcp_url=channels.mcp_url if self.settings.mcp else None,
            token_env=channels.token_env,
            wait=channels.wait,
        )
        return wanted if wanted.permission_url or wanted.mcp_url else None

    def channel_env(self, channels: Channels | None) -> dict[str, str]:
        """Environment variables wiring ``channels`` (already filtered by
        :meth:`wanted_channels`) into the CLI, merged over :meth:`env_for` by the caller;
        ``{}`` when the CLI takes none or ``channels`` is ``None``. Never the token itself:
        refer to ``channels.token_env``."""
        return {}

    def channel_args(self, channels: Channels) -> list[str]:
        """Command-line arguments wiring ``channels`` into the CLI (``[]``: it has none).

        Called only when ``channels`` offers something this provider's settings allow
        (``permission_url`` is ``None`` with ``skip_permissions``). Never put the token itself
        in them: refer to ``channels.token_env``.
        """
        return []

    def permission_request(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """The raw request (fields of :func:`elowen_sdk.screen.normalize_request`: ``tool``,
        ``command``, ``file``/``files``, ``diff``, ``url``, ``server``, ``arguments``,
        ``description``) of a permission request the CLI posted to ``permission_url``;
        ``None`` when ``body`` is not one this provider understands."""
        return None

    def permission_reply(self, verdict: str, message: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        """The response body the CLI expects for ``verdict``: ``"allow"``, ``"deny"`` (with
        ``message``, the reason the agent is told) or ``"none"`` (no verdict: the CLI falls
        back to its own dialog, which screen reading then handles)."""
        return {}

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
        """The argv for resolved arguments (``model`` ``None``: the CLI's default). Every
        provider implements this one method."""
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
        content atomically (:func:`atomic_update`). Returns the file written, or ``None`` when
        the CLI has no trust dialog to pre-seed.

        Raises:
            ProviderError: the existing config file cannot be parsed.
        """
        return None

    def init_command(self, *, env: Mapping[str, str] | None = None) -> list[str] | None:
        """A command that creates or upgrades the CLI's own state (its database) and exits, or
        ``None`` (the default) when starting several instances at once is safe. The agents
        plugin runs it once per enable for each (binary, :meth:`state_paths`) before the first
        spawn, one at a time, in an empty folder of its own, without the pane's sandbox but
        with the pane's environment (less the daemon's ``TMUX``/``TMUX_PANE``), output
        discarded; a failure or a run over 30 s (its process group is then killed) is logged
        and the spawn goes on. Why: OpenCode 1.18.33 left one of two instances started together on a fresh data
        folder hanging at start-up for good (2 of 8 pairs; 0 of 12 once the database existed).
        """
        return None

    def state_paths(self, *, env: Mapping[str, str] | None = None) -> list[Path]:
        """The folders and files the CLI keeps its own config and state in: read-write inside
        the agent sandbox (everything else but the project is read-only there). Default:
        ``~/.<cli>`` and ``<cli>`` under ``$XDG_CONFIG_HOME``, ``$XDG_DATA_HOME``,
        ``$XDG_STATE_HOME`` and ``$XDG_CACHE_HOME`` of the spawned process (``env``); a CLI
        keeping state elsewhere overrides this."""
        home = home_dir(env)
        name = self.cli or self.name
        xdg = {"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share", "XDG_STATE_HOME": ".local/state", "XDG_CACHE_HOME": ".cache"}
        paths = [home / f".{name}"]
        for var, default in xdg.items():
            base = env_lookup(env, var)
            paths.append((Path(base) if base else home / default) / name)
        return paths

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
        (garbage ids such as ``management`` or a stale id must start fresh)."""
        if not isinstance(session_id, str) or not self.id_pattern.match(session_id):
            return False
        return self.session_exists(session_id, workdir, env=env)

    # ---- help for humans

    def auth_note(self) -> str:
        """The resume note of a task blocked because this CLI is not logged in / has no
        credentials: :attr:`auth_hint`, or a generic sentence naming the plugin."""
        return self.auth_hint or (
            f"{self.display_name or self.name} is not logged in or has no API key: log in to it once in a terminal, "
            f"or set its credentials in the {self.plugin} plugin's env; then reopen the task."
        )

    # ---- screen

    def pattern_set(self, version: str | None = None) -> PatternSet:
        """The compiled screen patterns of this CLI (``patterns.toml`` of
        :attr:`patterns_package`, ``[versions]`` overrides for ``version``); cached.

        Raises:
            FileNotFoundError: the package ships no ``patterns.toml``.
            elowen_sdk.screen.PatternError: the file is malformed.
        """
        from .screen import load_patterns

        return load_patterns(self.patterns_package, version)

    def check(self) -> None:
        """Check this provider can be supervised: its ``patterns.toml`` loads. The kernel calls
        it when the executor is registered (``Executor.check``); a failure refuses the
        registration and puts the plugin in ``error`` with this message.

        Raises:
            ProviderError: :attr:`patterns_package` is not importable, ships no
                ``patterns.toml``, or the file is malformed.
        """
        from .screen import PatternError

        where = f"package {self.patterns_package!r}"
        try:
            self.pattern_set()
        except (ModuleNotFoundError, FileNotFoundError) as exc:
            raise ProviderError(
                f"executor {self.name!r} has no screen patterns: no patterns.toml in {where} (set `patterns_package` "
                "or ship a patterns.toml next to the provider's module; see docs/plugins.md, 'Writing a provider')"
            ) from exc
        except PatternError as exc:
            raise ProviderError(f"executor {self.name!r}: the patterns.toml of {where} is malformed: {exc}") from exc

    def classify(self, screen: str, *, version: str | None = None, escapes: str | None = None) -> Classification:
        """Classify a captured screen with this CLI's patterns (:mod:`elowen_sdk.screen`)."""
        return self.pattern_set(version).classify(screen, escapes=escapes)

    def detect_version(self, screen: str) -> str | None:
        """The CLI version the screen shows (``[meta] version_regex``), or ``None``."""
        return self.pattern_set().detect_version(screen)


class OpenCodeFamilyProvider(Provider):
    """OpenCode and its forks (Kilo): ``BIN [-s ses_…] [--model provider/model] [extra args]
    --prompt=PROMPT``; sessions in the SQLite database ``$XDG_DATA_HOME/<data_dir>/<data_dir>.db``;
    no trust dialog; the prompt is typed when resuming (OpenCode 1.18.33 and Kilo 7.7.7 open
    the old conversation with an empty composer on ``-s <id> --prompt=…``).

    Subclasses set ``data_dir``, ``permission_env`` (the variable that carries an inline
    permission ruleset, or ``""`` when the CLI has none: skip-permissions is then a no-op) and
    ``config_content_env`` (the variable that carries an inline JSON config, used for Elowen's
    MCP server; ``""``: none).
    """

    id_pattern = SES_ID_RE
    model_hint = "'<provider>/<model>' as the CLI names it"
    types_prompt_on_resume = True
    data_dir: ClassVar[str] = ""
    permission_env: ClassVar[str] = ""
    config_content_env: ClassVar[str] = ""

    def _command(
        self, binary: str, prompt: str, *, model: str | None, session_id: str | None, resume: bool, extra_args: list[str], skip_permissions: bool
    ) -> list[str]:
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
            self.log.warning("%s has no way to skip permission prompts; skip_permissions is ignored", self.name)
        return env

    def channel_env(self, channels: Channels | None) -> dict[str, str]:
        """Elowen's MCP server as the remote server ``elowen`` in the inline config
        :attr:`config_content_env` (``OPENCODE_CONFIG_CONTENT`` / ``KILO_CONFIG_CONTENT``,
        merged by the CLI over its config files), its bearer token as ``{env:ELOWEN_TOKEN}``
        (substituted by the CLI from its environment). An inline config already set in the
        ``env`` setting is kept, with the server added to its ``mcp`` section (not valid JSON:
        left alone, no server). The model sees the tools as ``elowen_<tool>``."""
        if channels is None or not channels.mcp_url or not self.config_content_env:
            return {}
        own = self.settings.env.get(self.config_content_env)
        parsed: Any = {}
        if own:
            try:
                parsed = json.loads(own)
            except ValueError:
                parsed = None
        if not isinstance(parsed, dict):
            self.log.warning("%s in the env setting is not a JSON object; Elowen's MCP server is not added", self.config_content_env)
            return {}
        config: dict[str, Any] = parsed
        mine = config.get("mcp")
        servers: dict[str, Any] = {
            **(mine if isinstance(mine, dict) else {}),
            "elowen": {
                "type": "remote",
                "url": channels.mcp_url,
                "headers": {"Authorization": f"Bearer {{env:{channels.token_env}}}"},
                "oauth": False,
                "enabled": True,
            },
        }
        return {self.config_content_env: json.dumps({**config, "mcp": servers}, separators=(",", ":"))}

    def init_command(self, *, env: Mapping[str, str] | None = None) -> list[str] | None:
        """``BIN --pure session list``: opens the database, runs its migrations and exits
        (OpenCode 1.18.33: 1.6 s on a fresh folder; Kilo 7.7.7: 4 s). Two instances started at
        once on a fresh folder each run the migrations, and one of them can hang for good
        (OpenCode 1.18.33, measured). ``--pure``: no external plugins are loaded."""
        return [self.settings.binary, "--pure", "session", "list"]

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

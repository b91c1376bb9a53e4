"""External MCP server definitions (the plugin's ``servers`` config) and their secrets.

A definition (one entry of ``[plugins.mcp-client.config.servers]``)::

    {"command": str, "args": [str], "env": {NAME: value},        # stdio
     "url": "http(s)://…", "headers": {Name: value},              # or streamable HTTP
     "secret_env": [NAME], "secret_headers": [Name],               # values in the secret store
     "timeout": seconds per call (default 30), "needs_approval": bool (default true),
     "tools": [{"name", "description", "input_schema"}],          # the snapshot taken when added
     "resources": [{"uri", "name", "description", "mime_type"}]}  # absent: the server has none

A server with resources gets two more brain tools, ``<server>.list_resources`` and
``<server>.read_resource`` (``uri``).

Instance-wide servers (added by an admin) are in ``config.toml``; a user's own servers are in
``$ELOWEN_HOME/plugins/mcp-client/users/<user id>/servers.json`` (mode 0600, the same
definitions) and their secrets in ``users/<user id>/secrets.json`` (0600) next to it.

Secret values live in ``$ELOWEN_HOME/plugins/mcp-client/secrets.json`` (mode 0600), never in
``config.toml``, never in a log line or an API answer; a server's process gets only its own
``env`` and secrets over the SDK's minimal inherited set (``HOME``, ``LOGNAME``, ``PATH``,
``SHELL``, ``TERM``, ``USER``: ``mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS``, ``mcp`` 2.3).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elowen_sdk import ElowenError

__all__ = [
    "RESOURCE_TOOLS",
    "SERVER_NAME",
    "McpConfigError",
    "SecretStore",
    "ServerConfig",
    "UserStore",
    "parse_server",
    "parse_servers",
    "plain",
    "tool_name",
]

SERVER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
DEFAULT_TIMEOUT = 30.0
_TOOL_CHARS = re.compile(r"[^a-z0-9_-]+")
RESOURCE_TOOLS = ("list_resources", "read_resource")
"""The brain tools (``<server>.<name>``) of a server that has resources."""


class McpConfigError(ElowenError):
    """A server definition is invalid (the message names the field)."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One external MCP server (see the module docstring)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()
    secret_headers: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    needs_approval: bool = True
    tools: tuple[Mapping[str, Any], ...] = ()
    resources: tuple[Mapping[str, Any], ...] | None = None
    scope: str = "instance"

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def public(self) -> dict[str, Any]:
        """The definition as the API shows it: secret names, never their values."""
        out: dict[str, Any] = {
            "name": self.name,
            "scope": self.scope,
            "transport": self.transport,
            "timeout": self.timeout,
            "needs_approval": self.needs_approval,
        }
        if self.command:
            out |= {"command": self.command, "args": list(self.args), "env": dict(self.env), "secret_env": list(self.secret_env)}
        else:
            out |= {"url": self.url, "headers": dict(self.headers), "secret_headers": list(self.secret_headers)}
        out["tools"] = self.brain_tools()
        out["resources"] = None if self.resources is None else [str(r["uri"]) for r in self.resources]
        return out

    def brain_tools(self) -> list[str]:
        """The brain tool names of this server: its tools, then the resource tools if it has
        resources (a tool of the server's own of that name wins)."""
        names = [tool_name(self.name, str(t["name"])) for t in self.tools]
        if self.resources is not None:
            names += [n for n in (f"{self.name}.{r}" for r in RESOURCE_TOOLS) if n not in names]
        return names

    def stored(self) -> dict[str, Any]:
        """The definition as written to ``config.toml`` (no secret values)."""
        out: dict[str, Any] = {"timeout": self.timeout, "needs_approval": self.needs_approval, "tools": [dict(t) for t in self.tools]}
        if self.resources is not None:
            out["resources"] = [dict(r) for r in self.resources]
        if self.command:
            out |= {"command": self.command, "args": list(self.args), "env": dict(self.env), "secret_env": list(self.secret_env)}
        else:
            out |= {"url": self.url, "headers": dict(self.headers), "secret_headers": list(self.secret_headers)}
        return out


def tool_name(server: str, tool: str) -> str:
    """The brain tool name of ``tool`` of ``server``: ``<server>.<tool>``, the tool's name
    lower-cased with every character outside ``[a-z0-9_-]`` made ``_``."""
    return f"{server}.{_TOOL_CHARS.sub('_', tool.lower()).strip('_') or 'tool'}"


def _strings(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f"{where} must be a list of strings")
    if any("\x00" in v for v in value):
        raise McpConfigError(f"{where} must not contain NUL characters")
    return tuple(value)


def _table(where: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f"{where} must be a table of strings")
    if any("\x00" in k + v for k, v in value.items()):
        raise McpConfigError(f"{where} must not contain NUL characters")
    return dict(value)


def plain(value: Any) -> Any:
    """A read-only config value (mapping proxies, tuples) as plain JSON-like data."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def parse_server(name: str, raw: Any, scope: str = "instance") -> ServerConfig:
    """Validate one definition (``scope``: ``"instance"`` or ``"user"``, where it is kept).

    Raises:
        McpConfigError: naming the field.
    """
    where = f"servers.{name}"
    if not SERVER_NAME.fullmatch(name):
        raise McpConfigError(f"{where}: a server name is [a-z][a-z0-9_-]* (at most 40 characters)")
    if not isinstance(raw, Mapping):
        raise McpConfigError(f"{where} must be a table")
    command, url = raw.get("command"), raw.get("url")
    if bool(command) == bool(url):
        raise McpConfigError(f"{where}: give exactly one of command (stdio) or url (streamable HTTP)")
    if command is not None and (not isinstance(command, str) or "\x00" in command):
        raise McpConfigError(f"{where}.command must be a string without NUL characters")
    if url is not None and (not isinstance(url, str) or not re.match(r"https?://[^\s/]+", url) or "\x00" in url):
        raise McpConfigError(f"{where}.url must be an http:// or https:// URL")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 3600:
        raise McpConfigError(f"{where}.timeout must be seconds in (0, 3600]")
    approval = raw.get("needs_approval", True)
    if not isinstance(approval, bool):
        raise McpConfigError(f"{where}.needs_approval must be true or false")
    tools = raw.get("tools") or []
    if not isinstance(tools, list | tuple) or not all(isinstance(t, Mapping) and isinstance(t.get("name"), str) for t in tools):
        raise McpConfigError(f"{where}.tools must be a list of tables with a name")
    resources = raw.get("resources")
    if resources is not None and (
        not isinstance(resources, list | tuple) or not all(isinstance(r, Mapping) and isinstance(r.get("uri"), str) for r in resources)
    ):
        raise McpConfigError(f"{where}.resources must be a list of tables with a uri")
    return ServerConfig(
        name=name,
        command=command,
        args=_strings(f"{where}.args", raw.get("args")),
        env=_table(f"{where}.env", raw.get("env")),
        url=url,
        headers=_table(f"{where}.headers", raw.get("headers")),
        secret_env=_strings(f"{where}.secret_env", raw.get("secret_env")),
        secret_headers=_strings(f"{where}.secret_headers", raw.get("secret_headers")),
        timeout=float(timeout),
        needs_approval=approval,
        tools=tuple(plain(t) for t in tools),
        resources=None if resources is None else tuple(plain(r) for r in resources),
        scope=scope,
    )


def parse_servers(raw: Any, scope: str = "instance") -> tuple[dict[str, ServerConfig], dict[str, str]]:
    """Every valid definition of the ``servers`` config (or of a user's ``servers.json``), and
    the errors of the others (name → message)."""
    servers: dict[str, ServerConfig] = {}
    errors: dict[str, str] = {}
    for name, value in dict(raw or {}).items():
        try:
            servers[name] = parse_server(str(name), value, scope)
        except McpConfigError as exc:
            errors[str(name)] = str(exc)
    return servers, errors


class SecretStore:
    """``secrets.json`` (mode 0600): server name → {NAME: value}, for ``secret_env`` and
    ``secret_headers``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, server: str) -> dict[str, str]:
        return dict(self._read().get(server) or {})

    def keep(self, servers: set[str]) -> None:
        """Forget the secrets of every server not in ``servers`` (the file is rewritten only
        if one goes)."""
        data = self._read()
        if not set(data) <= servers:
            _write_private(self.path, {k: v for k, v in data.items() if k in servers})

    def put(self, server: str, values: Mapping[str, str] | None) -> None:
        """Replace the secrets of ``server`` (``None``/empty: forget them)."""
        data = self._read()
        if values:
            data[server] = dict(values)
        else:
            data.pop(server, None)
        _write_private(self.path, data)


def _write_private(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, mode 0600 (its folder 0700), replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


class UserStore:
    """The users' own servers: ``<root>/<user id>/servers.json`` (name → stored definition)
    and ``<root>/<user id>/secrets.json`` (a :class:`SecretStore`), both mode 0600."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, user_id: int) -> Path:
        return self.root / str(int(user_id))

    def ensure(self, user_id: int) -> Path:
        """The user's folder, created mode 0700 (and made so)."""
        folder = self.folder(user_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.chmod(0o700)
        return folder

    def raw(self, user_id: int) -> dict[str, Any]:
        """The user's definitions as stored (``{}`` for none or an unreadable file)."""
        try:
            data = json.loads((self.folder(user_id) / "servers.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def secrets(self, user_id: int) -> SecretStore:
        return SecretStore(self.folder(user_id) / "secrets.json")

    def put(self, user_id: int, name: str, stored: Mapping[str, Any] | None) -> None:
        """Store (or, with ``None``, forget) the user's server ``name``; forgetting also drops
        its secrets."""
        data = self.raw(user_id)
        if stored is None:
            data.pop(name, None)
            self.secrets(user_id).put(name, None)
        else:
            data[name] = dict(stored)
        _write_private(self.ensure(user_id) / "servers.json", data)

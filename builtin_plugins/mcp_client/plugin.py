"""Plugin glue of ``mcp-client``: each configured server's tools (its snapshot) become brain
tools ``<server>.<tool>``; calling one goes through the server's supervised connection
(:mod:`.connection`). The connections are started on first use and end with the plugin.

Instance-wide servers (``config.toml``, added by an admin) are registered tools, offered to
every user under their grants. A user's own servers (``users/<id>/servers.json``) are not
registered: their tools are offered to that user's turns only, through the ``user-tools``
service (:class:`elowen_sdk.services.UserToolsService`) the brain asks on every turn.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elowen_sdk import Service, Tool, hookimpl

from .api import may_run_commands, routes
from .config import RESOURCE_TOOLS, SecretStore, ServerConfig, UserStore, parse_servers, plain, tool_name
from .connection import McpToolError, ServerConnection

__all__ = ["Runtime", "on_event", "on_unload", "register_routes", "register_services", "register_tools"]

Key = tuple[int | None, str]
"""A server's key: ``(None, name)`` instance-wide, ``(user id, name)`` a user's own."""


def _live(cfg: ServerConfig, conn: Callable[[], ServerConnection | None]) -> ServerConnection:
    """The server's current connection for a tool call.

    Raises:
        McpToolError: the server was removed (or its user) since the turn listed its tools.
    """
    c = conn()
    if c is None:
        raise McpToolError(f"MCP server {cfg.name!r} was removed; its tools are gone")
    return c


class Runtime:
    """The servers of one enable of the plugin and their connections."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.servers, self.errors = parse_servers(ctx.config.get("servers"))
        for name, message in self.errors.items():
            ctx.log.warning("MCP server %s skipped: %s", name, message)
        self.secrets = SecretStore(ctx.data_dir / "secrets.json")
        self.users = UserStore(ctx.data_dir / "users")
        self._conns: dict[Key, ServerConnection] = {}
        self._user_cfgs: dict[int, tuple[dict[str, ServerConfig], dict[str, str]]] = {}
        self._user_tools: dict[tuple[int, bool], list[Tool]] = {}

    # -- definitions --------------------------------------------------------------------------

    def raw_servers(self) -> dict[str, Any]:
        """The ``servers`` config as stored (a copy)."""
        return {str(k): plain(v) for k, v in dict(self.ctx.config.get("servers") or {}).items()}

    def user_servers(self, user_id: int) -> dict[str, ServerConfig]:
        """The user's own valid servers (read from their ``servers.json`` once, then kept)."""
        return self._user_entry(user_id)[0]

    def user_errors(self, user_id: int) -> dict[str, str]:
        return self._user_entry(user_id)[1]

    def _user_entry(self, user_id: int) -> tuple[dict[str, ServerConfig], dict[str, str]]:
        entry = self._user_cfgs.get(user_id)
        if entry is None:
            entry = self._user_cfgs[user_id] = parse_servers(self.users.raw(user_id), "user")
        return entry

    def put_user_server(self, user_id: int, name: str, cfg: ServerConfig | None, secrets: dict[str, str] | None = None) -> None:
        """Store (``cfg``) or forget (``None``) a user's server, with its secrets; its tools
        change for the user's next turn, and a running connection of the old definition ends."""
        if cfg is None:
            self.users.put(user_id, name, None)
        else:
            self.users.secrets(user_id).put(name, secrets or None)
            self.users.put(user_id, name, cfg.stored())
        self._user_cfgs.pop(user_id, None)
        self._drop_tools(user_id)
        conn = self._conns.pop((user_id, name), None)
        if conn is not None:
            conn.close()

    def find(self, name: str, user_id: int | None, scope: str | None = None) -> ServerConfig | None:
        """The server ``name`` as ``user_id`` sees it: their own first, then the instance's
        (``scope`` ``"user"``/``"instance"`` picks one)."""
        if user_id is not None and scope in (None, "user"):
            own = self.user_servers(user_id).get(name)
            if own is not None:
                return own
        return self.servers.get(name) if scope in (None, "instance") else None

    # -- connections --------------------------------------------------------------------------

    def connection(self, name: str, user_id: int | None = None, scope: str | None = None) -> ServerConnection | None:
        cfg = self.find(name, user_id, scope)
        if cfg is None:
            return None
        key: Key = (user_id if cfg.scope == "user" else None, name)
        conn = self._conns.get(key)
        if conn is None:
            conn = self._conns[key] = self._new_connection(cfg, key)
        return conn

    def _new_connection(self, cfg: ServerConfig, key: Key) -> ServerConnection:
        user_id = key[0]
        if user_id is None:
            return ServerConnection(self.ctx, cfg, self.secrets.get(cfg.name))
        errlog = self.user_errlog(user_id, cfg.name)
        return ServerConnection(self.ctx, cfg, self.users.secrets(user_id).get(cfg.name), errlog)

    def user_errlog(self, user_id: int, name: str) -> Path:
        return self.users.ensure(user_id) / "logs" / f"{name}.stderr.log"

    def status(self, name: str, user_id: int | None = None) -> dict[str, Any]:
        conn = self._conns.get((user_id, name))
        return conn.status() if conn is not None else {"state": "stopped", "starts": 0, "calls": 0, "last_error": None}

    # -- tools ------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The registered (instance-wide) tools."""
        out: list[Tool] = []
        for cfg in self.servers.values():
            out += self._tools_of(cfg, lambda c=cfg: self.connection(c.name, scope="instance"))
        return out

    def tools_for(self, user_id: int) -> list[Tool]:
        """The user's own servers' tools (``user-tools`` service; cached until they change).
        A stdio server's tools are left out while the user may not run commands (no longer
        granted ``terminal.run``, and not an admin): the rule its adding was checked against."""
        servers = self.user_servers(user_id)
        if not servers:
            return []
        may_run = any(cfg.command for cfg in servers.values()) and may_run_commands(self.ctx, user_id)
        key = (user_id, may_run)
        cached = self._user_tools.get(key)
        if cached is None:
            cached = []
            for cfg in servers.values():
                if cfg.command and not may_run:
                    continue
                cached += self._tools_of(cfg, lambda c=cfg: self.connection(c.name, user_id, scope="user"))
            self._user_tools[key] = cached
        return cached

    def forget_user(self, user_id: int) -> None:
        """A removed user: end their servers' connections and delete their folder (definitions,
        secrets, logs)."""
        for key in [k for k in self._conns if k[0] == user_id]:
            self._conns.pop(key).close()
        self._user_cfgs.pop(user_id, None)
        self._drop_tools(user_id)
        shutil.rmtree(self.users.folder(user_id), ignore_errors=True)

    def _drop_tools(self, user_id: int) -> None:
        for key in [k for k in self._user_tools if k[0] == user_id]:
            del self._user_tools[key]

    def _tools_of(self, cfg: ServerConfig, conn: Callable[[], ServerConnection | None]) -> list[Tool]:
        out = [self._tool(cfg, spec, conn) for spec in cfg.tools]
        if cfg.resources is not None:
            taken = {t.name for t in out}
            out += [t for t in self._resource_tools(cfg, conn) if t.name not in taken]
        return out

    def _tool(self, cfg: ServerConfig, spec: Any, conn: Callable[[], ServerConnection | None]) -> Tool:
        original = str(spec["name"])

        async def handler(**arguments: Any) -> Any:
            return await _live(cfg, conn).call(original, arguments)

        schema = spec.get("input_schema") or {}
        if not isinstance(schema, dict) or schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        description = spec.get("description") or f"Tool {original} of the MCP server {cfg.name}."
        return Tool(tool_name(cfg.name, original), f"[MCP {cfg.name}] {description}", handler, schema, needs_approval=cfg.needs_approval)

    def _resource_tools(self, cfg: ServerConfig, conn: Callable[[], ServerConnection | None]) -> list[Tool]:
        known = ", ".join(str(r["uri"]) for r in (cfg.resources or ())[:20])

        async def list_resources() -> Any:
            return {"items": await _live(cfg, conn).list_resources()}

        async def read_resource(uri: str) -> Any:
            return {"contents": await _live(cfg, conn).read_resource(uri)}

        listing, reading = RESOURCE_TOOLS
        return [
            Tool(
                f"{cfg.name}.{listing}",
                f"[MCP {cfg.name}] List the resources (documents, data) of the MCP server {cfg.name}: uri, name, description, mime_type.",
                list_resources,
                needs_approval=cfg.needs_approval,
            ),
            Tool(
                f"{cfg.name}.{reading}",
                f"[MCP {cfg.name}] Read one resource of the MCP server {cfg.name} by its uri" + (f" (known: {known})." if known else "."),
                read_resource,
                {"type": "object", "properties": {"uri": {"type": "string", "description": "the resource's URI"}}, "required": ["uri"]},
                needs_approval=cfg.needs_approval,
            ),
        ]


class UserTools:
    """The ``user-tools`` service object: :meth:`Runtime.tools_for` of the current enable."""

    def __init__(self, rt: Callable[[], Runtime]) -> None:
        self._rt = rt

    def tools_for(self, user_id: int) -> list[Tool]:
        """The tools of the MCP servers ``user_id`` added for themselves (``[]``: none)."""
        return self._rt().tools_for(int(user_id))


_runtimes: dict[int, Runtime] = {}


def _runtime(ctx: Any) -> Runtime:
    rt = _runtimes.get(id(ctx))
    if rt is None or rt.ctx is not ctx:
        rt = _runtimes[id(ctx)] = Runtime(ctx)
    return rt


@hookimpl
def register_tools(ctx: Any, register: Any) -> None:
    for tool in _runtime(ctx).tools():
        register(tool)


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    """Offer ``Service("user-tools", UserTools)``."""
    register(Service("user-tools", UserTools(lambda: _runtime(ctx))))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: _runtime(ctx)):
        register(route)


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    """``user.removed``: forget that user's own servers and their secrets."""
    if event.type != "user.removed":
        return
    rt = _runtimes.get(id(ctx))
    user_id = (event.data or {}).get("id")
    if rt is not None and rt.ctx is ctx and isinstance(user_id, int):
        rt.forget_user(user_id)
    elif isinstance(user_id, int):  # not loaded in this enable yet: the files only
        shutil.rmtree(UserStore(ctx.data_dir / "users").folder(user_id), ignore_errors=True)


@hookimpl
def on_unload(ctx: Any) -> None:
    """The connections' supervisor tasks end with the plugin's nursery (their processes with
    them); forget this enable's runtime."""
    _runtimes.pop(id(ctx), None)

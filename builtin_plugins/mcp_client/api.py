"""HTTP routes of ``mcp-client`` (builtin: mounted at these paths).

A server is *instance-wide* (``scope: "instance"``: added by an admin, in ``config.toml``, its
tools offered to every user under their grants) or a user's *own* (``scope: "user"``: added by
any user for themselves, its tools offered to their turns only). A user sees the instance's
servers and their own, never another user's (admins included). Agent tokens get 403
``agent_scope`` everywhere. ``?scope=user|instance`` picks one where a user's own server and an
instance-wide one share a name (default: the user's own first).

=========================================  ========================================================
``GET /mcp-servers``                       ``{"items": [server], "errors": {name: message}}``:
                                           the instance's servers and the caller's own
                                           (:meth:`ServerConfig.public`: ``scope``, secret names
                                           never values, brain ``tools``, ``resources``) with
                                           their connection ``status``
``POST /mcp-servers``                      ``{name, command, args?, env?, secret_env?: {NAME:
                                           value}}`` or ``{name, url, headers?, secret_headers?:
                                           {Name: value}}``, and ``scope?`` (admins default
                                           ``instance``, members ``user``; a member asking
                                           ``instance`` gets 403), ``timeout?``,
                                           ``needs_approval?``, ``replace?``. Lists the server's
                                           tools and resources (within its timeout; 422
                                           ``mcp_unavailable`` if it cannot), stores the secrets
                                           (0600). A user's own server is effective at once →
                                           201 ``{"server"}``; an
                                           instance-wide one is applied as ``PATCH
                                           /plugins/mcp-client/config`` with the caller's token
                                           before the answer (the plugin restarts with the new
                                           tools; one change at a time, each from the stored
                                           map) → 201 ``{"server"}``; 502
                                           ``apply_failed`` if that failed. 409 ``exists`` for a
                                           taken name without ``replace`` (a user's own server may
                                           not take an instance-wide server's name, no server
                                           the namespace of another plugin's tools, e.g.
                                           ``files``); 403 for a
                                           member's stdio server unless their grants include
                                           ``terminal.run`` (it runs a command on the daemon's
                                           host); 422 ``too_many`` past
                                           :data:`MAX_USER_SERVERS` own servers
``DELETE /mcp-servers/{name}``             forget a server and its secrets: the caller's own →
                                           200 ``{"name", "scope": "user", "removed": true}``;
                                           an instance-wide one (admin; a member gets 403),
                                           applied before the answer → 200 ``{"name", "scope":
                                           "instance", "removed": true}``
``GET /mcp-servers/{name}/tools``          the server's live ``tools/list`` (starts it)
``GET /mcp-servers/{name}/resources``      its live ``resources/list`` (``[]`` without resources)
``GET /mcp-servers/{name}/resources/read`` ``?uri=``: ``{"contents": [{uri, mime_type, text |
                                           blob_bytes}]}``; 422 ``mcp_unavailable`` for the
                                           server's error
=========================================  ========================================================
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import trio

from elowen_sdk import CapabilityError, HTTPError, Principal, Request, Response, Route
from elowen_sdk.services import UsersService

from .config import McpConfigError, parse_server, plain
from .connection import McpToolError, ServerConnection, discover

__all__ = ["MAX_USER_SERVERS", "may_run_commands", "routes"]

APPLY_TIMEOUT = 60.0
"""Seconds an instance-wide change may take to apply (the plugin's restart included)."""
_APPLY_LOCK = trio.Lock()
"""One instance-wide change at a time (module-wide: it outlives one enable's runtime)."""
MAX_USER_SERVERS = 20
"""How many servers of their own one user may have."""
SCOPES = ("instance", "user")


def _full(me: Principal) -> int:
    """The caller's user id; 403 for an agent token (or a principal without a user)."""
    if me.scope != "full" or me.user_id is None:
        raise HTTPError(403, "agent_scope", "an agent token cannot manage MCP servers")
    return int(me.user_id)


def _scope_param(req: Request) -> str | None:
    scope = req.query.get("scope") or None
    if scope is not None and scope not in SCOPES:
        raise HTTPError(422, "validation_error", "scope must be instance or user")
    return scope


def _daemon_url(home: Path) -> str:
    info = json.loads((home / "daemon.pid").read_text(encoding="utf-8"))
    host = str(info["host"])
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://{f'[{host}]' if ':' in host else host}:{int(info['port'])}"


async def _stored_servers(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> dict[str, Any]:
    """The instance's ``servers`` as stored now (``GET /plugins/mcp-client``, as the caller).

    Raises:
        ValueError: the daemon refused (status and body in the message) or answered no JSON.
        httpx.HTTPError: it could not be reached.
    """
    r = await client.get(url + "/plugins/mcp-client", headers=headers)
    if r.status_code >= 400:
        raise ValueError(f"{r.status_code} {r.text[:300]}")
    stored = (r.json().get("config") or {}).get("servers") or {}
    return {str(k): plain(v) for k, v in dict(stored).items()}


def may_run_commands(ctx: Any, user_id: int) -> bool:
    """Whether the user is an admin or their tool grants include ``terminal.run`` (the brain
    already runs their commands on this host, so a stdio server of theirs gives them nothing
    new). ``False`` without the users service or for an unknown user."""
    try:
        user = ctx.service(UsersService).user(user_id)
    except (LookupError, CapabilityError):
        return False
    if user is None:
        return False
    if user.get("role") == "admin":
        return True
    return any(fnmatch.fnmatchcase("terminal.run", str(g)) for g in user.get("tool_grants") or [])


def _other_namespaces(runtime: Any) -> dict[str, str]:
    """Tool namespaces (the part of a name before its first ``.``) of other plugins' tools →
    the plugin: a server may not take one (``files`` would make ``files.read`` ambiguous in
    grants and approval prompts)."""
    out: dict[str, str] = {}
    for name, owned in runtime.ctx.contributions("tool").items():
        plugin = str(getattr(owned, "plugin", ""))
        if plugin != runtime.ctx.name:
            out.setdefault(str(name).split(".", 1)[0], plugin)
    return out


def routes(rt: Callable[[], Any]) -> list[Route]:
    """The routes; ``rt()`` is the plugin's current runtime (:class:`.plugin.Runtime`)."""

    async def apply(authorization: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any]], undo: Callable[[], None] | None = None) -> None:
        """Change the instance's ``servers`` config through the daemon's API, as the caller:
        the servers as stored *now* (:func:`_stored_servers`), ``change`` them, ``PATCH
        /plugins/mcp-client/config`` (the kernel restarts this plugin with them and answers
        once it has). One apply at a time (:data:`_APPLY_LOCK`), each from the stored map, so
        two admins adding servers at once keep both. Runs in the request's own task, which
        the restart does not end. Once applied, ``secrets.json`` keeps only the secrets of the
        stored servers (a removed server's go; so do those a crash mid-apply left behind);
        not applied, ``undo()`` runs (an add puts back the secrets it stored).

        Once the lock is taken the change runs to its end (within :data:`APPLY_TIMEOUT`) even
        if the caller hangs up or the response timeout cancels the request: cut between the
        PATCH and the secrets, a removed server's secrets would stay behind, a replaced one's
        new secrets would serve its old definition. A PATCH that failed (or was not answered)
        after the daemon stored it — the daemon's own response timeout ends its wait for the
        restart, not the change — counts as applied when the stored ``name`` is what was sent.

        Raises:
            HTTPError: 502 ``apply_failed`` if the daemon refused or could not be reached (the
                config is unchanged); whatever ``change`` raises (409 / 404) likewise.
        """
        runtime = rt()
        home = Path(runtime.ctx.data_dir).parent.parent
        headers = {"Authorization": authorization}
        failure: str | None = None
        errors = (OSError, ValueError, KeyError, AttributeError, TypeError, httpx.HTTPError)
        async with _APPLY_LOCK:
            with trio.CancelScope(shield=True):
                async with httpx.AsyncClient(timeout=APPLY_TIMEOUT) as client:
                    url, servers = "", None
                    with trio.move_on_after(APPLY_TIMEOUT) as limit:
                        try:
                            url = _daemon_url(home)
                            servers = change(await _stored_servers(client, url, headers))
                            r = await client.patch(url + "/plugins/mcp-client/config", json={"values": {"servers": servers}}, headers=headers)
                            if r.status_code >= 400:
                                failure = f"{r.status_code} {r.text[:300]}"
                        except errors as exc:
                            failure = str(exc) or type(exc).__name__
                    if limit.cancelled_caught:
                        failure = f"no answer within {APPLY_TIMEOUT:g} s"
                    if failure is not None and servers is not None:  # stored all the same?
                        with trio.move_on_after(10), contextlib.suppress(*errors):
                            if (await _stored_servers(client, url, headers)).get(name) == servers.get(name):
                                failure = None
                    if failure is None and servers is not None:
                        runtime.secrets.keep(set(servers))
                    elif undo is not None:
                        undo()
        if failure is not None:
            raise HTTPError(502, "apply_failed", f"applying the MCP servers failed: {failure}")

    def list_servers(req: Request) -> dict[str, Any]:
        uid = _full(req.principal)
        runtime = rt()
        items = [cfg.public() | {"status": runtime.status(name)} for name, cfg in sorted(runtime.servers.items())]
        items += [cfg.public() | {"status": runtime.status(name, uid)} for name, cfg in sorted(runtime.user_servers(uid).items())]
        errors = dict(runtime.errors) | {f"user:{name}": message for name, message in runtime.user_errors(uid).items()}
        return {"items": items, "errors": errors, "next_cursor": None}

    async def add_server(req: Request) -> Response:
        me = req.principal
        uid = _full(me)
        body = req.json if isinstance(req.json, dict) else None
        if body is None:
            raise HTTPError(400, "bad_request", "the body must be a JSON object")
        name = body.get("name")
        if not isinstance(name, str):
            raise HTTPError(422, "validation_error", "name is required")
        scope = body.get("scope") or ("instance" if me.is_admin else "user")
        if scope not in SCOPES:
            raise HTTPError(422, "validation_error", "scope must be instance or user")
        if scope == "instance" and not me.is_admin:
            raise HTTPError(403, "forbidden", "only an admin may add an instance-wide MCP server; add it for yourself (scope user)")
        runtime = rt()
        taken = _other_namespaces(runtime)
        if name in taken:
            raise HTTPError(409, "exists", f"{name!r} is the namespace of the tools of plugin {taken[name]!r}; choose another name")
        if scope == "instance" and name in runtime.raw_servers() and not body.get("replace"):
            raise HTTPError(409, "exists", f"an MCP server {name!r} exists; send replace: true to change it (elowen mcp add --replace)")
        if scope == "user":
            if name in runtime.raw_servers():
                raise HTTPError(409, "exists", f"an instance-wide MCP server is named {name!r}; choose another name")
            own = runtime.users.raw(uid)
            if name in own and not body.get("replace"):
                raise HTTPError(409, "exists", f"you have an MCP server {name!r}; send replace: true to change it (elowen mcp add --replace)")
            if name not in own and len(own) >= MAX_USER_SERVERS:
                raise HTTPError(422, "too_many", f"you have {len(own)} MCP servers, the most one user may have; remove one first")
            if body.get("command") and not me.is_admin and not may_run_commands(runtime.ctx, uid):
                raise HTTPError(
                    403,
                    "forbidden",
                    "a stdio MCP server runs a command on the daemon's host: only users granted terminal.run may add one (a URL server needs no grant)",
                )
        secret_env, secret_headers = body.get("secret_env") or {}, body.get("secret_headers") or {}
        for field, value in (("secret_env", secret_env), ("secret_headers", secret_headers)):
            if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                raise HTTPError(422, "validation_error", f"{field} must be an object of strings (name: secret value)")
            if any("\x00" in k + v for k, v in value.items()):
                raise HTTPError(422, "validation_error", f"{field} must not contain NUL characters")
        definition = {k: body[k] for k in ("command", "args", "env", "url", "headers", "timeout", "needs_approval") if k in body}
        definition |= {"secret_env": sorted(secret_env), "secret_headers": sorted(secret_headers)}
        try:
            cfg = parse_server(name, definition, scope)
        except McpConfigError as exc:
            raise HTTPError(422, "validation_error", str(exc)) from None
        secrets = dict(secret_env) | dict(secret_headers)
        errlog = runtime.user_errlog(uid, name) if scope == "user" else None
        try:
            found = await discover(runtime.ctx, cfg, secrets, errlog)
        except McpToolError as exc:
            raise HTTPError(422, "mcp_unavailable", str(exc)) from None
        snapshot = definition | {"tools": found["tools"]}
        if found["resources"] is not None:
            snapshot["resources"] = found["resources"]
        cfg = parse_server(name, snapshot, scope)
        if scope == "user":
            runtime.put_user_server(uid, name, cfg, secrets)
            runtime.ctx.log.info("user %s added their MCP server %s (%d tools)", uid, name, len(cfg.tools))
            return Response({"server": cfg.public() | {"status": runtime.status(name, uid)}}, status=201)
        replace = bool(body.get("replace"))
        secrets_file = runtime.secrets
        before: list[dict[str, str]] = []

        def put(servers: dict[str, Any]) -> dict[str, Any]:  # under the apply lock
            if name in servers and not replace:  # another admin took the name meanwhile
                raise HTTPError(409, "exists", f"an MCP server {name!r} exists; send replace: true to change it (elowen mcp add --replace)")
            before.append(secrets_file.get(name))
            secrets_file.put(name, secrets)  # before the restart that starts the server with them
            return servers | {name: cfg.stored()}

        def undo() -> None:  # the change was refused: the secrets it stored go back
            if before:
                secrets_file.put(name, before[0] or None)

        await apply(req.headers.get("authorization", ""), name, put, undo)
        return Response({"server": cfg.public()}, status=201)

    async def remove_server(req: Request) -> Response:
        me = req.principal
        uid = _full(me)
        name = req.params["name"]
        scope = _scope_param(req)
        runtime = rt()
        if scope in (None, "user") and name in runtime.users.raw(uid):
            runtime.put_user_server(uid, name, None)
            return Response({"name": name, "scope": "user", "removed": True})
        servers = runtime.raw_servers()
        if scope == "user" or name not in servers:
            raise HTTPError(404, "not_found", f"no MCP server {name!r}")
        if not me.is_admin:
            raise HTTPError(403, "forbidden", "only an admin may remove an instance-wide MCP server")

        def drop(servers: dict[str, Any]) -> dict[str, Any]:
            if name not in servers:  # another admin removed it meanwhile
                raise HTTPError(404, "not_found", f"no MCP server {name!r}")
            return {k: v for k, v in servers.items() if k != name}

        await apply(req.headers.get("authorization", ""), name, drop)
        return Response({"name": name, "scope": "instance", "removed": True})

    def _conn(req: Request) -> ServerConnection:
        uid = _full(req.principal)
        cfg = rt().find(req.params["name"], uid, _scope_param(req))
        if cfg is not None and cfg.command and cfg.scope == "user" and not may_run_commands(rt().ctx, uid):
            # the rule a member's stdio server was added under, re-checked here as on every turn
            raise HTTPError(403, "forbidden", "a stdio MCP server of yours needs the terminal.run grant")
        conn: ServerConnection | None = rt().connection(req.params["name"], uid, _scope_param(req))
        if conn is None:
            raise HTTPError(404, "not_found", f"no MCP server {req.params['name']!r}")
        return conn

    async def live_tools(req: Request) -> dict[str, Any]:
        conn = _conn(req)
        try:
            return {"items": await conn.list_tools(), "next_cursor": None}
        except McpToolError as exc:
            raise HTTPError(422, "mcp_unavailable", str(exc)) from None

    async def live_resources(req: Request) -> dict[str, Any]:
        conn = _conn(req)
        try:
            return {"items": await conn.list_resources(), "next_cursor": None}
        except McpToolError as exc:
            raise HTTPError(422, "mcp_unavailable", str(exc)) from None

    async def read_resource(req: Request) -> dict[str, Any]:
        conn = _conn(req)
        uri = req.query.get("uri") or ""
        if not uri:
            raise HTTPError(422, "validation_error", "uri is required")
        try:
            return {"contents": await conn.read_resource(uri)}
        except McpToolError as exc:
            raise HTTPError(422, "mcp_unavailable", str(exc)) from None

    return [
        Route("GET", "/mcp-servers", list_servers, "External MCP servers: the instance's and your own"),
        Route("POST", "/mcp-servers", add_server, "Add an external MCP server (your own, or instance-wide: admin)"),
        Route("DELETE", "/mcp-servers/{name}", remove_server, "Remove your own MCP server, or an instance-wide one (admin)"),
        Route("GET", "/mcp-servers/{name}/tools", live_tools, "An external MCP server's live tools"),
        Route("GET", "/mcp-servers/{name}/resources", live_resources, "An external MCP server's live resources"),
        Route("GET", "/mcp-servers/{name}/resources/read", read_resource, "Read one resource of an external MCP server (?uri=)"),
    ]

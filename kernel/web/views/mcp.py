"""The "MCP servers" section of Settings: the external MCP servers whose tools the brain calls
(the ``mcp-client`` plugin's ``/mcp-servers`` routes), listed, added and removed. Every user
sees the instance's servers and their own; secret values are sent once and never shown back.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from quart import Blueprint, abort, render_template, request

from .common import api, login_required, me

__all__ = ["bp", "lines", "mcp_servers", "mcp_tools"]

bp = Blueprint("mcp", __name__, url_prefix="/actions/mcp-servers")

ADD_TIMEOUT = 120.0
"""Seconds an add may take: the daemon starts the server and lists its tools first."""
SCOPES = ("user", "instance")


def lines(text: str | None, what: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (blank lines skipped) as a dict.

    Raises:
        ValueError: a line without ``=`` (the message names ``what`` and the line number).
    """
    out: dict[str, str] = {}
    for n, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what}, line {n}: expected NAME=value")
        out[key.strip()] = value
    return out


async def mcp_servers(_: dict[str, str]) -> dict[str, Any]:
    """The servers the user sees (``GET /mcp-servers``); ``mcp_missing`` when the plugin is off."""
    reply = await api("GET", "/mcp-servers")
    errors = reply.body.get("errors") if reply.ok and isinstance(reply.body, dict) else None
    return {
        "mcp": reply.items(),
        "mcp_errors": errors or {},
        "mcp_missing": reply.missing,
        "mcp_failed": None if reply.ok or reply.missing else reply.error_message(),
        "mcp_admin": me().is_admin,
    }


async def mcp_tools(args: dict[str, str]) -> dict[str, Any]:
    """One server's live tools (``GET /mcp-servers/{name}/tools``: starts it)."""
    name, scope = args.get("name", ""), args.get("scope", "")
    if not name or scope not in SCOPES:
        abort(404)
    reply = await api("GET", f"/mcp-servers/{quote(name, safe='')}/tools", params={"scope": scope}, timeout=ADD_TIMEOUT)
    return {"name": name, "scope": scope, "tools": reply.items(), "error": None if reply.ok else reply.error_message()}


async def _panel(flash: str | None, ok: bool) -> str:
    return await render_template("partials/mcp_servers.html", **await mcp_servers({}), flash=flash, flash_ok=ok)


@bp.post("")
@login_required
async def add() -> Any:
    """Add a server from the form: a command and its arguments (one per line), or a URL; plain
    and secret env/headers as ``NAME=value`` lines. Answers the re-rendered section."""
    form = {k: v for k, v in (await request.form).items() if k != "csrf_token"}
    name = form.get("name", "").strip()
    body: dict[str, Any] = {"name": name, "needs_approval": form.get("needs_approval") in ("on", "true", "1")}
    if form.get("scope") in SCOPES:
        body["scope"] = form["scope"]
    command, url = form.get("command", "").strip(), form.get("url", "").strip()
    try:
        if command and url:
            raise ValueError("Give a command or a URL, not both.")
        if command:
            body |= {"command": command, "args": [a for a in form.get("args", "").splitlines() if a.strip()]}
            body |= {"env": lines(form.get("env"), "Environment"), "secret_env": lines(form.get("secret_env"), "Secret environment")}
        elif url:
            body |= {"url": url, "headers": lines(form.get("headers"), "Headers"), "secret_headers": lines(form.get("secret_headers"), "Secret headers")}
        else:
            raise ValueError("Give a command (a stdio server) or a URL (a streamable HTTP server).")
        if form.get("timeout", "").strip():
            body["timeout"] = float(form["timeout"])
    except ValueError as exc:
        text = str(exc) if "line" in str(exc) or "Give" in str(exc) else "Timeout: expected a number of seconds."
        return await _panel(text, False), 200
    reply = await api("POST", "/mcp-servers", json=body, timeout=ADD_TIMEOUT)
    if not reply.ok:
        return await _panel(reply.missing and "Not available: the mcp-client plugin is disabled." or reply.error_message(), False)
    server = reply.body["server"]
    tools = server.get("tools") or []
    text = f"Added {name}: {len(tools)} tool(s)."
    return await _panel(text, True), 200, {"X-Elowen-Ok": "1"}


@bp.post("/<scope>/<name>/remove")
@login_required
async def remove(scope: str, name: str) -> Any:
    if scope not in SCOPES:
        abort(404)
    reply = await api("DELETE", f"/mcp-servers/{quote(name, safe='')}", params={"scope": scope})
    if not reply.ok:
        return await _panel(reply.error_message(), False)
    return await _panel(f"Removed {name}.", True)

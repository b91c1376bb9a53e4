"""``elowen mcp add|list|rm|tools|resources|read``: the external MCP servers whose tools the
brain calls (the ``mcp-client`` plugin's ``/mcp-servers`` routes).

A server is your own (``--scope user``, the default for members: only your brain turns get its
tools) or instance-wide (``--scope instance``, admins only and their default). Secret values are
never typed on the command line (``ps`` and shell history would show them): ``--secret-env
NAME`` takes the value of the variable ``NAME`` of your environment, ``NAME=env:VAR`` that of
``VAR``, ``NAME=@FILE`` the contents of a file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from .app import App
from .client import Client
from .output import echo_json, fields, note, table

__all__ = ["mcp"]

ADD_TIMEOUT = 120.0
"""Seconds ``add`` waits for the daemon: it starts the server and lists its tools first."""
"""Seconds ``add``/``rm`` of an instance-wide server wait for the plugin to apply it."""
SCOPE = click.Choice(["user", "instance"])


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    """``KEY=VALUE`` options as a dict (a usage error, exit 2, for one without ``=``)."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.UsageError(f"{what} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def _secrets(values: tuple[str, ...], what: str, *, bare_is_env: bool) -> dict[str, str]:
    """Secret options: ``KEY=env:VAR``, ``KEY=@FILE`` or (env only) bare ``KEY`` — never the
    value itself (exit 2 with the reason)."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, source = item.partition("=")
        if not key:
            raise click.UsageError(f"{what} {item!r}: expected NAME, NAME=env:VAR or NAME=@FILE")
        if not sep:
            if not bare_is_env:
                raise click.UsageError(f"{what} {item!r}: expected NAME=env:VAR or NAME=@FILE")
            source = f"env:{key}"
        if source.startswith("env:"):
            var = source[4:]
            if var not in os.environ:
                raise click.UsageError(f"{what} {key}: the environment variable {var} is not set")
            out[key] = os.environ[var]
        elif source.startswith("@"):
            try:
                out[key] = Path(source[1:]).expanduser().read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as exc:
                raise click.UsageError(f"{what} {key}: cannot read {source[1:]}: {exc.strerror or exc}") from None
        else:
            raise click.UsageError(f"{what} {key}: give the value as env:VAR or @FILE, not on the command line (ps and your shell history would show it)")
    return out


def _servers(app: App) -> dict[tuple[str, str], dict[str, Any]]:
    reply = app.api.get("/mcp-servers")
    return {(s["scope"], s["name"]): s for s in reply.get("items", [])}


def _state(server: dict[str, Any]) -> str:
    status = server.get("status") or {}
    return str(status.get("state", "-"))


@click.group()
def mcp() -> None:
    """External MCP servers whose tools the brain can call (mcp-client plugin)."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the servers as a JSON list.")
@click.pass_obj
def mcp_list(app: App, as_json: bool) -> None:
    """The instance's MCP servers and your own, with their brain tools and state."""
    reply = app.api.get("/mcp-servers")
    items = reply.get("items", [])
    if as_json:
        echo_json(items)
        return
    table(
        items,
        [
            ("NAME", "name"),
            ("SCOPE", "scope"),
            ("TRANSPORT", "transport"),
            ("STATE", _state),
            ("TARGET", lambda s: s.get("url") or " ".join([s.get("command") or "", *(s.get("args") or [])])),
            ("TOOLS", "tools"),
        ],
        empty="(no MCP servers)",
    )
    for name, message in (reply.get("errors") or {}).items():
        note(f"warning: server {name} is skipped: {message}")


@mcp.command("add")
@click.argument("name")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--url", default=None, help="A streamable HTTP server's URL (instead of a COMMAND).")
@click.option("-e", "--env", "env", multiple=True, metavar="KEY=VALUE", help="Plain environment of a stdio server (repeatable).")
@click.option("--secret-env", multiple=True, metavar="NAME[=env:VAR|=@FILE]", help="A secret environment variable (repeatable; value never shown back).")
@click.option("-H", "--header", "headers", multiple=True, metavar="NAME=VALUE", help="A plain HTTP header (repeatable).")
@click.option("--secret-header", multiple=True, metavar="NAME=env:VAR|NAME=@FILE", help="A secret HTTP header, e.g. Authorization=@token.txt (repeatable).")
@click.option(
    "--timeout",
    type=click.FloatRange(0, 3600, min_open=True),
    default=None,
    help="Seconds each call may take [default: 30]; starting the server and listing its tools get at least 30 s.",
)
@click.option("--approval/--no-approval", "needs_approval", default=None, help="Whether each call needs the user's approval [default: yes].")
@click.option("--scope", type=SCOPE, default=None, help="Your own server (user) or everyone's (instance, admins) [default: instance for admins, else user].")
@click.option("--replace", is_flag=True, help="Change the server of that name.")
@click.option("--json", "as_json", is_flag=True, help="Print the added server as JSON.")
@click.pass_obj
def mcp_add(
    app: App,
    name: str,
    command: tuple[str, ...],
    url: str | None,
    env: tuple[str, ...],
    secret_env: tuple[str, ...],
    headers: tuple[str, ...],
    secret_header: tuple[str, ...],
    timeout: float | None,
    needs_approval: bool | None,
    scope: str | None,
    replace: bool,
    as_json: bool,
) -> None:
    """Add the MCP server NAME: a stdio COMMAND (after `--`) or a streamable HTTP --url.

    \b
    elowen mcp add github --secret-env GITHUB_TOKEN -- github-mcp-server stdio
    elowen mcp add docs --url https://mcp.example/mcp --secret-header Authorization=@token.txt

    The daemon starts the server once and lists its tools (its tools become brain tools named
    NAME.<tool>); a server that cannot start is refused.
    """
    if bool(command) == bool(url):
        raise click.UsageError("give exactly one of a COMMAND (after --) or --url")
    if command and (headers or secret_header):
        raise click.UsageError("--header/--secret-header are for a --url server")
    if url and (env or secret_env):
        raise click.UsageError("--env/--secret-env are for a stdio COMMAND")
    body: dict[str, Any] = {"name": name}
    if command:
        body |= {"command": command[0], "args": list(command[1:]), "env": _pairs(env, "--env")}
        body["secret_env"] = _secrets(secret_env, "--secret-env", bare_is_env=True)
    else:
        body |= {"url": url, "headers": _pairs(headers, "--header")}
        body["secret_headers"] = _secrets(secret_header, "--secret-header", bare_is_env=False)
    for key, value in (("timeout", timeout), ("needs_approval", needs_approval), ("scope", scope)):
        if value is not None:
            body[key] = value
    if replace:
        body["replace"] = True
    reply = app.api.request("POST", "/mcp-servers", body=body, timeout=ADD_TIMEOUT)
    server = reply["server"]
    if as_json:
        echo_json(server)
        return
    tools = server.get("tools") or []
    click.echo(f"added {server['scope']} MCP server {name}: {len(tools)} tool(s)" + (f": {', '.join(tools)}" if tools else ""))


@mcp.command("rm")
@click.argument("name")
@click.option("--scope", type=SCOPE, default=None, help="Which one, when yours and an instance-wide one share NAME [default: yours].")
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's answer as JSON.")
@click.pass_obj
def mcp_rm(app: App, name: str, scope: str | None, as_json: bool) -> None:
    """Remove the MCP server NAME and its secrets."""
    reply = app.api.delete(f"/mcp-servers/{Client.segment(name)}", scope=scope)
    if as_json:
        echo_json(reply)
    else:
        click.echo(f"removed {reply['scope']} MCP server {name}")


@mcp.command("tools")
@click.argument("name")
@click.option("--scope", type=SCOPE, default=None, help="Which one, when yours and an instance-wide one share NAME [default: yours].")
@click.option("--json", "as_json", is_flag=True, help="Print the tools (name, description, input_schema) as JSON.")
@click.pass_obj
def mcp_tools(app: App, name: str, scope: str | None, as_json: bool) -> None:
    """The live tools of the MCP server NAME (starts it if it is not running)."""
    items = app.api.request("GET", f"/mcp-servers/{Client.segment(name)}/tools", query={"scope": scope}, timeout=ADD_TIMEOUT)["items"]
    if as_json:
        echo_json(items)
    else:
        table(items, [("TOOL", "name"), ("DESCRIPTION", "description")], empty="(no tools)")


@mcp.command("resources")
@click.argument("name")
@click.option("--scope", type=SCOPE, default=None, help="Which one, when yours and an instance-wide one share NAME [default: yours].")
@click.option("--json", "as_json", is_flag=True, help="Print the resources as JSON.")
@click.pass_obj
def mcp_resources(app: App, name: str, scope: str | None, as_json: bool) -> None:
    """The live resources of the MCP server NAME."""
    items = app.api.request("GET", f"/mcp-servers/{Client.segment(name)}/resources", query={"scope": scope}, timeout=ADD_TIMEOUT)["items"]
    if as_json:
        echo_json(items)
    else:
        table(items, [("URI", "uri"), ("NAME", "name"), ("TYPE", "mime_type"), ("DESCRIPTION", "description")], empty="(no resources)")


@mcp.command("read")
@click.argument("name")
@click.argument("uri")
@click.option("--scope", type=SCOPE, default=None, help="Which one, when yours and an instance-wide one share NAME [default: yours].")
@click.option("--json", "as_json", is_flag=True, help="Print the contents as JSON.")
@click.pass_obj
def mcp_read(app: App, name: str, uri: str, scope: str | None, as_json: bool) -> None:
    """Print the resource URI of the MCP server NAME."""
    contents = app.api.request("GET", f"/mcp-servers/{Client.segment(name)}/resources/read", query={"scope": scope, "uri": uri}, timeout=ADD_TIMEOUT)[
        "contents"
    ]
    if as_json:
        echo_json(contents)
        return
    for item in contents:
        if "text" in item:
            click.echo(item["text"])
        else:
            fields(item)

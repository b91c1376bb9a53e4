"""``elowen plugin list|info|enable|disable|config|grant|install|uninstall``.

Everything goes through the daemon's API, so a running daemon applies it at once (hot reload).
``install`` and ``uninstall`` run pip in Elowen's own environment (``sys.executable -m pip``)
and then ask the daemon to rediscover entry points (``POST /plugins/rescan``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import click

from .app import App, Failure
from .client import ApiError
from .output import Column, echo_json, fields, note, table

__all__ = ["not_enabled_message", "parse_assignment", "plugin"]

ENTRY_POINT_GROUP = "elowen.plugins"
PLUGIN_COLUMNS: list[Column] = [
    ("NAME", "name"),
    ("VERSION", "version"),
    ("STATE", lambda p: f"{p.get('state')} (restart required)" if p.get("restart_required") else p.get("state")),
    ("SOURCE", "source"),
    ("CAPABILITIES", lambda p: (p.get("capabilities") or {}).get("required") if isinstance(p.get("capabilities"), dict) else p.get("capabilities")),
]


def parse_assignment(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → ``(key, value)``; VALUE is read as JSON when it parses (``3``, ``true``,
    ``["a"]``, ``"quoted"``), else kept as a string.

    Raises:
        click.BadParameter: no ``=`` or an empty key.
    """
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"expected KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def _path(app: App, name: str, action: str = "") -> str:
    return f"/plugins/{app.api.segment(name)}" + (f"/{action}" if action else "")


def _state_line(record: dict[str, Any]) -> str:
    line = f"{record.get('name')}: {record.get('state')}"
    if record.get("error"):
        line += f" — {record['error']}"
    if record.get("restart_required"):
        line += " (restart required)"
    if record.get("installed") is False:
        line += " (not installed)"
    return line


def not_enabled_message(name: str, record: dict[str, Any]) -> str:
    """The one message ``elowen plugin enable`` fails with when the daemon answered with a
    record that is not ``enabled``; it ends with the fix. ``needs-approval`` →
    ``plugin NAME needs capabilities not granted: A, B; grant them with: elowen plugin grant
    NAME A B``; any other state → ``plugin NAME is STATE: ERROR; see `elowen plugin info NAME```."""
    state = record.get("state")
    caps = record.get("capabilities")
    missing = [str(c) for c in (caps.get("missing") or [])] if isinstance(caps, dict) else []
    if state == "needs-approval" and missing:
        return f"plugin {name} needs capabilities not granted: {', '.join(missing)}; grant them with: elowen plugin grant {name} {' '.join(missing)}"
    reason = record.get("error") or "no reason given"
    return f"plugin {name} is {state}: {reason}; see `elowen plugin info {name}`"


def _plugins(app: App) -> list[dict[str, Any]]:
    result = app.api.get("/plugins")
    items = result.get("items", []) if isinstance(result, dict) else result
    return [p for p in items if isinstance(p, dict)] if isinstance(items, list) else []


def _pip(*args: str) -> int:
    """Run pip in Elowen's environment with its output streaming to this terminal."""
    return subprocess.call([sys.executable, "-m", "pip", "--disable-pip-version-check", *args])


@click.group()
def plugin() -> None:
    """Manage plugins in the running daemon (applied at once, no restart)."""


@plugin.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (name, version, state, source, capabilities, …).")
@click.pass_obj
def plugin_list(app: App, as_json: bool) -> None:
    """List every discovered plugin and its state; then, one line each, why a plugin is in
    ``error`` or ``needs-approval``."""
    items = _plugins(app)
    if as_json:
        echo_json(items)
        return
    table(items, PLUGIN_COLUMNS, empty="(no plugins)")
    problems = [p for p in items if p.get("state") in ("error", "needs-approval") and p.get("error")]
    if problems:
        click.echo("")
        for p in problems:
            click.echo(f"{p.get('name')}: {p.get('error')}")


@plugin.command("info")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the full record as JSON.")
@click.pass_obj
def plugin_info(app: App, name: str, as_json: bool) -> None:
    """Show a plugin's manifest, capabilities, config and contributions (without importing it)."""
    record = app.api.get(_path(app, name))
    if as_json:
        echo_json(record)
        return
    summary = {k: record.get(k) for k in ("name", "version", "state", "source", "entry", "description", "error") if k in record}
    if record.get("restart_required"):
        summary["restart_required"] = True
    if record.get("installed") is False:
        summary["installed"] = False
    fields(summary)
    for warning in record.get("warnings") or []:
        click.echo(f"warning: {warning}")
    caps = record.get("capabilities")
    if isinstance(caps, dict):
        click.echo("capabilities:")
        fields({f"  {k}": v for k, v in caps.items()})
    manifest = record.get("manifest") or {}
    schema = manifest.get("config") if isinstance(manifest, dict) else None
    config = record.get("config") or {}
    if schema or config:
        click.echo("config:")
        keys = list(schema or {}) + [k for k in config if k not in (schema or {})]
        for key in keys:
            spec = (schema or {}).get(key) or {}
            default = spec.get("default") if isinstance(spec, dict) else None
            shown = config.get(key, default)
            origin = "set" if key in config else "default"
            click.echo(f"  {key} = {json.dumps(shown)} ({origin})")
    if record.get("traceback"):
        click.echo("traceback:")
        click.echo("  " + str(record["traceback"]).rstrip().replace("\n", "\n  "))
    contributes = manifest.get("contributes") if isinstance(manifest, dict) else None
    if contributes:
        click.echo("declares:")
        fields({f"  {k}": v for k, v in contributes.items()})
    current = record.get("contributions") or []
    if current:
        click.echo("contributes now:")
        table(current, [("  KIND", lambda c: f"  {c.get('kind')}"), ("NAME", "name")])


@plugin.command("enable")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.pass_obj
def plugin_enable(app: App, names: tuple[str, ...]) -> None:
    """Enable plugins, in the order given (a first enable grants the capabilities the plugin
    requires). Stops with one message ending with the fix at the first that ends up not
    enabled; a plugin whose distribution was uninstalled is refused (409 ``not_installed``)."""
    for name in names:
        record = app.api.post(_path(app, name, "enable"))
        if record.get("state") != "enabled":
            raise Failure(not_enabled_message(name, record), 1)
        click.echo(_state_line(record))


@plugin.command("disable")
@click.argument("name")
@click.option("--cascade", is_flag=True, help="Also disable the enabled plugins that require it (they are disabled first).")
@click.pass_obj
def plugin_disable(app: App, name: str, cascade: bool) -> None:
    """Disable a plugin: everything it contributed is removed. Refused (exit status 1, the
    dependents named) while enabled plugins require its services, unless --cascade."""
    record = app.api.post(_path(app, name, "disable"), {"cascade": True} if cascade else None)
    cascaded = list(record.get("cascaded") or [])
    for dependent in cascaded:
        click.echo(f"{dependent}: disabled (requires {name})")
    click.echo(_state_line(record))
    if cascaded:  # providers first: the order enable takes them in
        click.echo(f"re-enable them with: elowen plugin enable {' '.join([name, *reversed(cascaded)])}")


@plugin.command("config")
@click.argument("name")
@click.argument("assignments", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.pass_obj
def plugin_config(app: App, name: str, assignments: tuple[str, ...]) -> None:
    """Set config values (validated against the plugin's schema; an enabled plugin restarts).
    Exits 1, printing the reason, when the plugin ends in ``error`` or ``needs-approval``."""
    values = dict(parse_assignment(a) for a in assignments)
    record = app.api.patch(_path(app, name, "config"), {"values": values})
    failed = record.get("state") in ("error", "needs-approval")
    if not failed:
        click.echo(_state_line(record))
    config = record.get("config")
    if isinstance(config, dict):
        for key in values:
            click.echo(f"  {key} = {json.dumps(config.get(key, values[key]))}")
    if failed:  # the values are saved, but the plugin does not run with them
        raise Failure(_state_line(record), 1)


@plugin.command("grant")
@click.argument("name")
@click.argument("capabilities", nargs=-1, required=True, metavar="CAPABILITY...")
@click.pass_obj
def plugin_grant(app: App, name: str, capabilities: tuple[str, ...]) -> None:
    """Grant capabilities the plugin's manifest declares (e.g. after an upgrade); one request
    each, in order, stopping at the first refused."""
    record: dict[str, Any] = {}
    for capability in capabilities:
        record = app.api.post(_path(app, name, "grant"), {"capability": capability})
    click.echo(_state_line(record))


@plugin.command("rescan")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@click.pass_obj
def plugin_rescan(app: App, as_json: bool) -> None:
    """Rediscover installed plugins (after a plain `pip install` while the daemon runs); new
    ones are listed, disabled until you enable them."""
    body = app.api.post("/plugins/rescan")
    if as_json:
        click.echo(json.dumps(body))
        return
    new = body.get("new") or []
    click.echo("new plugins: " + ", ".join(new) + "; enable one with `elowen plugin enable NAME`" if new else "no new plugins")


@plugin.command("install")
@click.argument("spec")
@click.option("--upgrade", "-U", is_flag=True, help="Upgrade if it is installed (pip install -U).")
@click.pass_obj
def plugin_install(app: App, spec: str, upgrade: bool) -> None:
    """pip-install SPEC (a PyPI name, a wheel, a folder) into Elowen's environment and let the
    daemon discover it."""
    before = {p["name"]: p for p in _plugins(app) if "name" in p}
    code = _pip("install", *(["--upgrade"] if upgrade else []), spec)
    if code != 0:
        raise Failure(f"pip install {spec} failed (exit status {code}); nothing was changed in the daemon", 1)
    app.api.post("/plugins/rescan")
    after = _plugins(app)
    new = [p for p in after if p.get("name") not in before]
    changed = [p for p in after if p.get("name") in before and _upgraded(before[p["name"]], p)]
    for record in new:
        click.echo(
            f"new plugin: {record.get('name')} {record.get('version')} ({record.get('state')}); enable it with `elowen plugin enable {record.get('name')}`"
        )
        if record.get("restart_required"):
            click.echo("  its old code is still loaded in the daemon: restart required to load the new code (`elowen down && elowen up`)")
    for record in changed:
        old = before[record["name"]].get("version")
        if record.get("restart_required"):
            click.echo(f"upgraded plugin: {record['name']} (was {old}); restart required to load the new code (`elowen down && elowen up`)")
        else:
            click.echo(f"upgraded plugin: {record['name']} {old} → {record.get('version')}")
    if not new and not changed:
        note(f"no new plugin found in {spec} (its distribution must declare an `{ENTRY_POINT_GROUP}` entry point)")


def _upgraded(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return (
        new.get("version") != old.get("version")
        or bool(new.get("restart_required") and not old.get("restart_required"))
        or (old.get("installed") is False and new.get("installed") is not False)
    )


def _distribution_of(name: str) -> str | None:
    """The installed distribution whose ``elowen.plugins`` entry point is ``name``."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name and ep.dist is not None:
            return str(ep.dist.metadata["Name"])
    return None


@plugin.command("uninstall")
@click.argument("name")
@click.pass_obj
def plugin_uninstall(app: App, name: str) -> None:
    """Disable plugin NAME, pip-uninstall its distribution, and let the daemon rediscover."""
    dist = _distribution_of(name)
    if dist is None:
        raise Failure(f"no installed distribution provides the plugin {name!r}", 1)
    if dist.lower() == "elowen":
        raise Failure(f"{name} is a builtin plugin of Elowen itself; use `elowen plugin disable {name}`", 1)
    try:
        click.echo(_state_line(app.api.post(_path(app, name, "disable"))))
    except ApiError as exc:
        if exc.status != 404:
            raise
    code = _pip("uninstall", "--yes", dist)
    if code != 0:
        raise Failure(f"pip uninstall {dist} failed (exit status {code})", 1)
    app.api.post("/plugins/rescan")
    left = {p.get("name"): p for p in _plugins(app)}
    if name in left:
        click.echo(f"uninstalled {dist}; {name} is still {left[name].get('state')} in the daemon (not installed) until you disable it or restart")
    else:
        click.echo(f"uninstalled {dist}; plugin {name} removed")

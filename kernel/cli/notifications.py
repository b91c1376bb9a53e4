"""``elowen notifications``: your notifications (the notify plugin's ``/notifications`` routes).

elowen notifications [--unread] [--kind K] [--limit N] [--json]   newest first
elowen notifications read ID | --all                              mark read
elowen notifications test [--title T] [--body B]                  send yourself one
elowen notifications settings [KIND.SURFACE=on|off ...] [--json]  show / switch kinds
elowen notifications deliveries [--status S] [--json]             the outbox (admins: all)
"""

from __future__ import annotations

from typing import Any

import click

from .app import App
from .output import Column, echo_json, note, table

__all__ = ["notifications"]

COLUMNS: list[Column] = [
    ("ID", "id"),
    ("TIME", "created_at"),
    ("KIND", "kind"),
    ("", lambda r: "" if r.get("read_at") else "*"),
    ("TITLE", "title"),
    ("BODY", lambda r: " ".join(str(r.get("body") or "").split())[:80]),
]
DELIVERY_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("NOTIFICATION", "notification_id"),
    ("SURFACE", "surface"),
    ("TARGET", "target"),
    ("STATUS", "status"),
    ("ATTEMPTS", "attempts"),
    ("ERROR", lambda r: str(r.get("last_error") or "")[:80]),
]
KINDS = ("escalation", "task", "goal", "cron", "platform", "message")


@click.group(invoke_without_command=True)
@click.option("--unread", is_flag=True, help="Only unread notifications.")
@click.option("--kind", type=click.Choice(KINDS), default=None, help="Only this kind.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True, help="At most this many (newest first).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of notifications.")
@click.pass_context
def notifications(ctx: click.Context, unread: bool, kind: str | None, limit: int, as_json: bool) -> None:
    """Your notifications, newest first (unread ones marked *)."""
    if ctx.invoked_subcommand is not None:
        return
    app: App = ctx.obj
    query: dict[str, Any] = {"limit": limit}
    if unread:
        query["unread"] = "1"
    if kind:
        query["kind"] = kind
    page = app.api.get("/notifications", **query)
    items = page.get("items") or []
    if as_json:
        echo_json(items)
        return
    table(items, COLUMNS, empty="(no notifications)")
    if page.get("next_cursor"):
        note(f"(older notifications not shown: raise --limit above {limit})")
    note(f"{page.get('unread', 0)} unread")


@notifications.command("read")
@click.argument("notification_id", metavar="ID", required=False, type=click.IntRange(1))
@click.option("--all", "all_", is_flag=True, help="Mark every notification read.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def read(app: App, notification_id: int | None, all_: bool, as_json: bool) -> None:
    """Mark notification ID (or --all) read."""
    if (notification_id is None) == (not all_):
        raise click.UsageError("give an ID or --all")
    result = app.api.post("/notifications/read-all" if all_ else f"/notifications/{notification_id}/read")
    if as_json:
        echo_json(result)
    else:
        click.echo(f"marked {result.get('marked', 0)} read")


@notifications.command("test")
@click.option("--title", default=None, help="Title (default: Test notification).")
@click.option("--body", default=None, help="Text.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def test(app: App, title: str | None, body: str | None, as_json: bool) -> None:
    """Send yourself a test notification on every surface you enabled."""
    result = app.api.post("/notifications/test", {k: v for k, v in (("title", title), ("body", body)) if v})
    if as_json:
        echo_json(result)
    else:
        click.echo(f"notification {result.get('id')} queued")


def _parse_switch(text: str, kinds: dict[str, Any]) -> tuple[str, str, bool]:
    left, sep, value = text.partition("=")
    kind, dot, surface = left.partition(".")
    if not sep or value.lower() not in ("on", "off", "true", "false") or kind not in KINDS:
        raise click.BadParameter(f"{text!r}: KIND[.SURFACE]=on|off with KIND one of {', '.join(KINDS)}", param_hint="SWITCH")
    return kind, surface if dot else "*", value.lower() in ("on", "true")


@notifications.command("settings")
@click.argument("switches", nargs=-1, metavar="[KIND[.SURFACE]=on|off]...")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def settings(app: App, switches: tuple[str, ...], as_json: bool) -> None:
    """Show which kinds reach you on which surface, or switch them (`cron.push=off`,
    `goal=off` for every surface)."""
    current = app.api.get("/notifications/settings")
    if switches:
        changes: dict[str, dict[str, bool]] = {}
        for s in switches:
            kind, surface, on = _parse_switch(s, current.get("kinds") or {})
            changes.setdefault(kind, {})[surface] = on
        current = app.api.request("PUT", "/notifications/settings", body={"kinds": changes})
    if as_json:
        echo_json(current)
        return
    surfaces = current.get("surfaces") or []
    rows = []
    for kind, by in (current.get("kinds") or {}).items():
        everywhere = by.get("*", True)
        rows.append({"kind": kind, **{s: "on" if by.get(s, everywhere) else "off" for s in surfaces}})
    table(rows, [("KIND", "kind"), *((s.upper(), s) for s in surfaces)], empty="(no kinds)")


@notifications.command("deliveries")
@click.option("--status", type=click.Choice(["pending", "delivered", "skipped", "failed"]), default=None)
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def deliveries(app: App, status: str | None, limit: int, as_json: bool) -> None:
    """The outbox: each delivery of a notification to a surface and its state."""
    query: dict[str, Any] = {"limit": limit}
    if status:
        query["status"] = status
    items = app.api.get("/notifications/deliveries", **query).get("items") or []
    if as_json:
        echo_json(items)
    else:
        table(items, DELIVERY_COLUMNS, empty="(no deliveries)")

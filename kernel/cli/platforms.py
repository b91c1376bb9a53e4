"""``elowen platforms``: the chat platforms the brain runs and their adapters' state (the
brain's ``GET /brain/channels``).

elowen platforms [--json]    NAME, PLUGIN, STATE (connected, reconnecting, error,
                             not_configured, …) and why; then your own links
"""

from __future__ import annotations

import click

from .app import App
from .output import Column, echo_json, note, table

__all__ = ["platforms"]

COLUMNS: list[Column] = [
    ("NAME", "name"),
    ("PLUGIN", "plugin"),
    ("STATE", "state"),
    ("DETAIL", lambda r: str(r.get("error") or r.get("detail") or "")[:200]),
]
LINK_COLUMNS: list[Column] = [("PLATFORM", "platform"), ("SENDER", "platform_user"), ("LINKED", "created_at")]


@click.command()
@click.option("--json", "as_json", is_flag=True, help='Print {"platforms": [...], "links": [...]} as JSON.')
@click.pass_obj
def platforms(app: App, as_json: bool) -> None:
    """The chat platforms (Discord, WhatsApp, webhook, …): their state, and your links."""
    data = app.api.get("/brain/channels")
    running = data.get("platforms") or []
    links = data.get("items") or []
    if as_json:
        echo_json({"platforms": running, "links": links})
        return
    table(running, COLUMNS, empty="(no chat platform is running: enable one with `elowen plugin enable discord`)")
    if links:
        click.echo("")
        table(links, LINK_COLUMNS)
    else:
        note("(no chat-platform sender is linked to you)")

"""``elowen events``: follow the daemon's SSE stream, one line per event."""

from __future__ import annotations

import json

import click

from .app import ID, App
from .client import Event
from .output import note

__all__ = ["events", "format_event"]


def format_event(event: Event, as_json: bool) -> str:
    """One output line: ``<id> <type> <data as compact JSON>``, or with ``as_json`` a JSON
    object ``{"id", "type", "data"}`` (``id`` an int when it is one)."""
    data = event.json()
    if as_json:
        event_id: str | int | None = int(event.id) if event.id and event.id.isdigit() else event.id
        return json.dumps({"id": event_id, "type": event.type, "data": data}, ensure_ascii=False, separators=(",", ":"))
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{event.id or '-':>6}  {event.type:<22} {body}"


@click.command()
@click.option("--types", default=None, help="Comma-separated event types; a trailing * matches a prefix (task.*,signal).")
@click.option("--project", type=ID, default=None, help="Only events of this project id.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (JSON Lines).")
@click.option("--last-event-id", default=None, help="Replay the events after this id first.")
@click.pass_obj
def events(app: App, types: str | None, project: int | None, as_json: bool, last_event_id: str | None) -> None:
    """Follow the event stream until Ctrl-C; reconnects and resumes after a dropped connection."""

    def dropped(reason: str, delay: float) -> None:
        note(f"elowen: event stream dropped ({reason}); reconnecting in {delay:.1f} s")

    stream = app.api.follow_events({"types": types, "project": project}, last_event_id=last_event_id, on_drop=dropped)
    try:
        for event in stream:
            click.echo(format_event(event, as_json))
    except KeyboardInterrupt:
        stream.close()

"""``elowen audit [--actor A] [--action X] [--outcome O] [--limit N] [--json]`` (admin): the
audit log, newest first, through ``GET /audit`` (which refuses non-admins with 403)."""

from __future__ import annotations

import json
from typing import Any

import click

from .app import App
from .output import Column, echo_json, note, table

__all__ = ["audit"]

PAGE = 500
"""The API's largest page (``GET /audit?limit=``)."""

COLUMNS: list[Column] = [
    ("ID", "id"),
    ("TIME", "ts"),
    ("ACTOR", "actor"),
    ("ACTION", "action"),
    ("TARGET", "target"),
    ("OUTCOME", "outcome"),
    ("DETAIL", lambda row: json.dumps(row.get("detail") or {}, ensure_ascii=False, separators=(",", ":"))[:200]),
]


def fetch(app: App, query: dict[str, Any], limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Up to ``limit`` audit rows matching ``query`` (newest first), following cursors in
    pages of at most :data:`PAGE`; returns ``(rows, more)``, ``more`` when older rows remain.

    Raises:
        ApiError: the daemon refused the request (403 for a non-admin, 422 for a bad filter).
    """
    params = {k: v for k, v in query.items() if v is not None}
    rows: list[dict[str, Any]] = []
    while True:
        params["limit"] = min(PAGE, limit - len(rows))
        page = app.api.get("/audit", **params)
        rows.extend(page.get("items") or [])
        cursor = page.get("next_cursor")
        if not cursor or len(rows) >= limit:
            return rows[:limit], bool(cursor)
        params["cursor"] = cursor


@click.command()
@click.option("--actor", default=None, help="Only rows by this actor (user:<id>, agent:task:<id>, kernel, anonymous, or a plugin's name).")
@click.option("--action", default=None, help="Only rows of this action (e.g. plugin.enable, command, register.route).")
@click.option("--outcome", default=None, help="Only rows with this outcome (e.g. ok, denied, error, invalid).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True, help="At most this many rows (newest first).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of audit rows.")
@click.pass_obj
def audit(app: App, actor: str | None, action: str | None, outcome: str | None, limit: int, as_json: bool) -> None:
    """Show the audit log, newest first (admin only)."""
    rows, more = fetch(app, {"actor": actor, "action": action, "outcome": outcome}, limit)
    if as_json:
        echo_json(rows)
    else:
        table(rows, COLUMNS, empty="(no audit rows)")
    if more:
        note(f"(older rows not shown: raise --limit above {limit})")

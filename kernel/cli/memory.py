"""``elowen memory list|search|add|edit|forget|history|export|status|purge`` (the memory
plugin's ``/memories`` routes; every command acts on the caller's own memories)."""

from __future__ import annotations

from typing import Any

import click

from .app import ID, App
from .output import echo_json, fields, table

__all__ = ["memory"]

_COLUMNS: list[tuple[str, Any]] = [("ID", "id"), ("KIND", "kind"), ("IMP", "importance"), ("USED", "use_count"), ("TEXT", "text")]


@click.group()
def memory() -> None:
    """Your long-term memories: what the brain remembers about you (memory plugin)."""


@memory.command("list")
@click.option("--all", "include_all", is_flag=True, help="Include superseded and forgotten versions.")
@click.option("--kind", default=None, help="Only memories of this kind (fact, preference, project, person…).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of memories.")
@click.pass_obj
def memory_list(app: App, include_all: bool, kind: str | None, as_json: bool) -> None:
    """List your memories, newest first."""
    items = app.api.list_all("/memories", all="1" if include_all else None, kind=kind)
    if as_json:
        echo_json(items)
    else:
        cols = [*_COLUMNS[:-1], ("STATE", "state"), _COLUMNS[-1]] if include_all else _COLUMNS
        table(items, cols, empty="(no memories)")


@memory.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=6, show_default=True, help="How many to show.")
@click.option("--json", "as_json", is_flag=True, help="Print the ranked memories as JSON.")
@click.pass_obj
def memory_search(app: App, query: str, limit: int, as_json: bool) -> None:
    """Your memories ranked for QUERY, as the brain would recall them (no use is counted)."""
    if not query.strip():
        raise click.BadParameter("give the text to search for", param_hint="QUERY")
    items = app.api.get("/memories/search", q=query, limit=limit)["items"]
    if as_json:
        echo_json(items)
    else:
        table(items, [("ID", "id"), ("SCORE", "score"), ("KIND", "kind"), ("TEXT", "text")], empty="(nothing found)")


@memory.command("add")
@click.argument("text")
@click.option("--kind", default="fact", show_default=True, help="fact, preference, project, person…")
@click.option("--importance", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="0 (trivia) to 1 (essential).")
@click.option("--project", "project_id", type=ID, default=None, help="Scope it to one of your projects.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored memory as JSON.")
@click.pass_obj
def memory_add(app: App, text: str, kind: str, importance: float, project_id: int | None, as_json: bool) -> None:
    """Remember TEXT."""
    body: dict[str, Any] = {"text": text, "kind": kind, "importance": importance}
    if project_id is not None:
        body["project_id"] = project_id
    created = app.api.post("/memories", body)
    if as_json:
        echo_json(created)
    else:
        click.echo(f"remembered {created['id']}: {created['text']}")


@memory.command("edit")
@click.argument("memory_id", metavar="ID", type=ID)
@click.option("--text", default=None, help="The new text.")
@click.option("--kind", default=None, help="The new kind.")
@click.option("--importance", type=click.FloatRange(0, 1), default=None, help="The new importance.")
@click.option("--json", "as_json", is_flag=True, help="Print the new version as JSON.")
@click.pass_obj
def memory_edit(app: App, memory_id: int, text: str | None, kind: str | None, importance: float | None, as_json: bool) -> None:
    """Change memory ID: a new version supersedes it (the old text stays in its history)."""
    body = {k: v for k, v in (("text", text), ("kind", kind), ("importance", importance)) if v is not None}
    if not body:
        raise click.UsageError("give at least one of --text, --kind, --importance")
    new = app.api.patch(f"/memories/{memory_id}", body)
    if as_json:
        echo_json(new)
    else:
        click.echo(f"memory {memory_id} superseded by {new['id']}: {new['text']}")


@memory.command("forget")
@click.argument("memory_id", metavar="ID", type=ID)
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer as JSON.")
@click.pass_obj
def memory_forget(app: App, memory_id: int, as_json: bool) -> None:
    """Forget memory ID (out of recall; its text stays in its history)."""
    result = app.api.delete(f"/memories/{memory_id}")
    if as_json:
        echo_json(result)
    else:
        click.echo(f"forgot memory {memory_id}")


@memory.command("history")
@click.argument("memory_id", metavar="ID", type=ID)
@click.option("--json", "as_json", is_flag=True, help="Print every version as JSON.")
@click.pass_obj
def memory_history(app: App, memory_id: int, as_json: bool) -> None:
    """Every version of memory ID, oldest first, with who made each change."""
    items = app.api.get(f"/memories/{memory_id}/history")["items"]
    if as_json:
        echo_json(items)
    else:
        table(items, [("ID", "id"), ("STATE", "state"), ("BY", "actor"), ("AT", "created_at"), ("ENDED BY", "superseded_actor"), ("TEXT", "text")])


@memory.command("export")
@click.pass_obj
def memory_export(app: App) -> None:
    """Print every version of every memory of yours as one JSON document."""
    echo_json(app.api.get("/memories/export"))


@memory.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the counters as JSON.")
@click.pass_obj
def memory_status(app: App, as_json: bool) -> None:
    """Your memory count, the embedding queue and the recall counters."""
    status = app.api.get("/memories/status")
    if as_json:
        echo_json(status)
    else:
        fields(status)


@memory.command("purge")
@click.option("--user", "user_id", type=ID, required=True, help="The user whose memories are deleted.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer as JSON.")
@click.pass_obj
def memory_purge(app: App, user_id: int, yes: bool, as_json: bool) -> None:
    """Delete every memory of user ID, all versions (admin; their text is never shown)."""
    if not yes:
        click.confirm(f"delete every memory of user {user_id}?", abort=True)
    result = app.api.post("/memories/purge", {"user_id": user_id})
    if as_json:
        echo_json(result)
    else:
        click.echo(f"deleted {result['deleted']} memories of user {user_id}")

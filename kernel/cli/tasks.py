"""``elowen task create|list|show|close|cancel`` and the agent's short form ``elowen close``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from .app import ID, App, Failure
from .output import Column, echo_json, fields, note, table

__all__ = ["close", "task"]

STATES = ("open", "in_progress", "blocked", "closed", "cancelled", "ready")
"""Task states, plus ``ready``: open with every dependency closed."""
TASK_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("STATE", "state"),
    ("PRI", "priority"),
    ("PROJECT", "project_id"),
    ("EXEC", "exec"),
    ("LABELS", "labels"),
    ("TITLE", "title"),
]
SHOW_KEYS = (
    "id", "title", "state", "priority", "project_id", "parent_id", "deps", "labels", "exec",
    "exec_resolved", "owner_id", "attempts", "created_at", "updated_at", "closed_at", "summary",
    "evidence", "resume_note", "description",
)


def _project_for_cwd(app: App) -> Any:
    """The id of the project whose folder holds the current directory (deepest wins)."""
    cwd = Path.cwd().resolve()
    best: tuple[int, Any] | None = None
    for project in app.api.list_all("/projects"):
        try:
            root = Path(str(project.get("path", ""))).resolve()
        except (OSError, RuntimeError):
            continue
        if cwd == root or root in cwd.parents:
            if best is None or len(root.parts) > best[0]:
                best = (len(root.parts), project.get("id"))
    return None if best is None else best[1]


def _close(app: App, task_id: int, summary: str, evidence: tuple[str, ...], as_json: bool) -> None:
    body: dict[str, Any] = {"summary": summary}
    if evidence:
        body["evidence"] = list(evidence)
    result = app.api.post(f"/tasks/{app.api.segment(task_id)}/close", body)
    if as_json:
        echo_json(result)
    else:
        click.echo(f"task {_get(result, 'id', task_id)}: {_get(result, 'state', 'closed')}")


def _get(result: Any, key: str, default: Any) -> Any:
    return result.get(key, default) if isinstance(result, dict) else default


@click.group()
def task() -> None:
    """Create, list and close tasks."""


@task.command("create")
@click.argument("title")
@click.option("--description", "-d", default=None, help="Longer text for the agent.")
@click.option("--project", "-p", "project", type=ID, envvar="ELOWEN_PROJECT", default=None, help="Project id [env ELOWEN_PROJECT; default: the project holding the current directory].")
@click.option("--priority", type=click.IntRange(0, 4), default=None, help="0 (highest) to 4.")
@click.option("--parent", type=ID, default=None, help="Parent task id.")
@click.option("--dep", "deps", type=ID, multiple=True, help="A task that must close first (repeatable).")
@click.option("--label", "labels", multiple=True, help="A label (repeatable).")
@click.option("--exec", "exec_spec", default=None, help="Executor spec, e.g. sonnet, codex:<model>, opencode:<model>.")
@click.option("--json", "as_json", is_flag=True, help="Print the created task as JSON.")
@click.pass_obj
def task_create(
    app: App, title: str, description: str | None, project: int | None, priority: int | None,
    parent: int | None, deps: tuple[int, ...], labels: tuple[str, ...], exec_spec: str | None, as_json: bool,
) -> None:
    """Create a task titled TITLE."""
    project_id = project if project is not None else _project_for_cwd(app)
    if project_id is None:
        raise Failure("no project given and the current directory is in no project; pass --project ID (see `elowen project list`)", 2)
    body: dict[str, Any] = {"title": title, "project_id": project_id}
    optional = {
        "description": description,
        "priority": priority,
        "parent_id": parent,
        "deps": list(deps) or None,
        "labels": list(labels) or None,
        "exec": exec_spec,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    created = app.api.post("/tasks", body)
    if as_json:
        echo_json(created)
    else:
        click.echo(f"created task {_get(created, 'id', '?')}: {_get(created, 'title', title)}")


@task.command("list")
@click.option("--state", type=click.Choice(STATES), default=None, help="Only tasks in this state (ready: open with every dependency closed).")
@click.option("--project", "-p", type=ID, default=None, help="Only tasks of this project id.")
@click.option("--label", default=None, help="Only tasks with this label.")
@click.option("--limit", type=click.IntRange(1, 500), default=None, help="Page size (the API's default is 50).")
@click.option("--all", "follow", is_flag=True, help="Follow the cursor through every page.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of tasks.")
@click.pass_obj
def task_list(app: App, state: str | None, project: int | None, label: str | None, limit: int | None, follow: bool, as_json: bool) -> None:
    """List tasks (one page unless --all)."""
    query = {"state": state, "project": project, "label": label, "limit": limit}
    items, more = app.api.list_items("/tasks", query, follow=follow)
    if as_json:
        echo_json(items)
    else:
        table(items, TASK_COLUMNS, empty="(no tasks)")
    if more:
        note("(more tasks: use --all)")


@task.command("show")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--json", "as_json", is_flag=True, help="Print the task as JSON.")
@click.pass_obj
def task_show(app: App, task_id: int, as_json: bool) -> None:
    """Show one task."""
    record = app.api.get(f"/tasks/{app.api.segment(task_id)}")
    if as_json:
        echo_json(record)
    else:
        fields(record, [*SHOW_KEYS, *(k for k in record if k not in SHOW_KEYS)])


@task.command("close")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--summary", "-s", required=True, help="What was done.")
@click.option("--evidence", "-e", multiple=True, help="A proof: test output, commit, file (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the closed task as JSON.")
@click.pass_obj
def task_close(app: App, task_id: int, summary: str, evidence: tuple[str, ...], as_json: bool) -> None:
    """Close a task with a summary and evidence."""
    _close(app, task_id, summary, evidence, as_json)


@task.command("cancel")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--json", "as_json", is_flag=True, help="Print the cancelled task as JSON.")
@click.pass_obj
def task_cancel(app: App, task_id: int, as_json: bool) -> None:
    """Cancel a task."""
    result = app.api.post(f"/tasks/{app.api.segment(task_id)}/cancel")
    if as_json:
        echo_json(result)
    else:
        click.echo(f"task {_get(result, 'id', task_id)}: {_get(result, 'state', 'cancelled')}")


@click.command()
@click.argument("task_id", metavar="[ID]", type=ID, required=False)
@click.option("--summary", "-s", required=True, help="What was done.")
@click.option("--evidence", "-e", multiple=True, help="A proof: test output, commit, file (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the closed task as JSON.")
@click.pass_context
def close(ctx: click.Context, task_id: int | None, summary: str, evidence: tuple[str, ...], as_json: bool) -> None:
    """Close your task (run by an agent in its session: ID defaults to $ELOWEN_TASK)."""
    if task_id is None:
        raw = os.environ.get("ELOWEN_TASK", "").strip()
        if not raw:
            raise click.UsageError("no task id: pass ID or set ELOWEN_TASK")
        try:
            task_id = ID.convert(raw, None, ctx)
        except click.BadParameter:
            raise click.UsageError(f"ELOWEN_TASK={raw!r} is not a task id (a positive whole number)") from None
    _close(ctx.obj, task_id, summary, evidence, as_json)

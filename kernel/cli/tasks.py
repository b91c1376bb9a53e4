"""``elowen task create|list|show|close|cancel|reopen`` and the agent's short form ``elowen close``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from .app import ID, App, Failure
from .output import Column, echo_json, fields, note, table

__all__ = ["close", "resolve_project", "task"]

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
    "id",
    "title",
    "state",
    "priority",
    "project_id",
    "parent_id",
    "deps",
    "labels",
    "exec",
    "exec_resolved",
    "owner_id",
    "attempts",
    "created_at",
    "updated_at",
    "closed_at",
    "summary",
    "evidence",
    "resume_note",
    "description",
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


def resolve_project(app: App, value: str) -> int:
    """The id of the project named or numbered ``value`` (digits: an id, checked to exist;
    anything else: the name of a project you can see).

    Raises:
        Failure: no such project (exit status 2), with the projects you can see listed.
    """
    text = value.strip()
    projects = app.api.list_all("/projects")
    if text.isascii() and text.isdigit():
        if any(str(p.get("id")) == text for p in projects):
            return int(text)
    else:
        for p in projects:
            if p.get("name") == text:
                return int(p["id"])
    known = ", ".join(f"{p.get('id')} ({p.get('name')})" for p in projects) or "none yet: `elowen project add NAME PATH`"
    raise Failure(f"no project {value!r}; projects you can see: {known}", 2)


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
@click.option(
    "--project",
    "-p",
    "project",
    metavar="NAME|ID",
    envvar="ELOWEN_PROJECT",
    default=None,
    help="Project name or id [env ELOWEN_PROJECT; default: the project holding the current directory].",
)
@click.option("--mission", "mission", type=ID, default=None, help="Put the task in mission ID (the label mission:ID; `elowen mission list`).")
@click.option("--priority", type=click.IntRange(0, 4), default=None, help="0 (highest) to 4.")
@click.option("--parent", type=ID, default=None, help="Parent task id.")
@click.option("--dep", "deps", type=ID, multiple=True, help="A task that must close first (repeatable).")
@click.option("--label", "labels", multiple=True, help="A label (repeatable).")
@click.option("--exec", "exec_spec", default=None, help="Executor spec: <executor>, <executor>:<model> or an alias (GET /executors lists them).")
@click.option("--start/--no-start", "start", default=True, help="--no-start: create it blocked (no agent starts) until `elowen task reopen ID`.")
@click.option("--json", "as_json", is_flag=True, help="Print the created task as JSON.")
@click.pass_obj
def task_create(
    app: App,
    title: str,
    description: str | None,
    project: str | None,
    mission: int | None,
    priority: int | None,
    parent: int | None,
    deps: tuple[int, ...],
    labels: tuple[str, ...],
    exec_spec: str | None,
    start: bool,
    as_json: bool,
) -> None:
    """Create a task titled TITLE (the scheduler starts its agent when it is ready).

    A warning goes to stderr when the executor's coding-agent CLI is not found (the task is
    then blocked at once with a note saying what to install)."""
    project_id = resolve_project(app, project) if project is not None else _project_for_cwd(app)
    if project_id is None:
        raise Failure("no project given and the current directory is in no project; pass --project NAME or ID (see `elowen project list`)", 2)
    if mission is not None:
        app.api.get(f"/missions/{app.api.segment(mission)}")  # 404 "mission N not found" when absent
        labels = (*(label for label in labels if not label.startswith("mission:")), f"mission:{mission}")
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
    if not start:
        body["start"] = False
    created = app.api.post("/tasks", body)
    if as_json:
        echo_json(created)
    else:
        click.echo(f"created task {_get(created, 'id', '?')}: {_get(created, 'title', title)}")
    if start:
        _warn_missing_cli(app, created)


def _warn_missing_cli(app: App, created: Any) -> None:
    """A ``warning:`` line on stderr when the created task's executor is a CLI that is not
    found (``GET /executors``' ``cli.found``); quiet when the registry cannot say."""
    resolved = _get(created, "exec_resolved", None)
    provider = resolved.get("provider") if isinstance(resolved, dict) else None
    if not provider:
        return
    try:
        items = app.api.get("/executors").get("items", [])
    except Exception:  # no agents plugin, or an older daemon: nothing to warn about
        return
    for item in items:
        cli = item.get("cli") if isinstance(item, dict) else None
        if item.get("name") == provider and isinstance(cli, dict) and cli.get("found") is False:
            note(
                f"warning: {provider}'s program {cli.get('program')!r} is not found, so this task will be blocked; "
                f"install it or `elowen plugin config {item.get('plugin')} binary=/path/to/it`, then `elowen task reopen {_get(created, 'id', 'ID')}`"
            )


@task.command("list")
@click.option("--state", type=click.Choice(STATES), default=None, help="Only tasks in this state (ready: open with every dependency closed).")
@click.option("--project", "-p", metavar="NAME|ID", default=None, help="Only tasks of this project (name or id).")
@click.option("--label", default=None, help="Only tasks with this label.")
@click.option("--limit", type=click.IntRange(1, 500), default=None, help="Page size (the API's default is 50).")
@click.option("--all", "follow", is_flag=True, help="Follow the cursor through every page.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of tasks.")
@click.pass_obj
def task_list(app: App, state: str | None, project: str | None, label: str | None, limit: int | None, follow: bool, as_json: bool) -> None:
    """List tasks (one page unless --all)."""
    project_id = resolve_project(app, project) if project is not None else None
    query = {"state": state, "project": project_id, "label": label, "limit": limit}
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


@task.command("reopen")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--note", "-n", "note_text", default=None, help="A note for the next agent (replaces the task's resume note).")
@click.option("--exec", "exec_spec", default=None, help="Run it on another executor this time (a spec, as for `task create`).")
@click.option("--json", "as_json", is_flag=True, help="Print the reopened task as JSON.")
@click.pass_obj
def task_reopen(app: App, task_id: int, note_text: str | None, exec_spec: str | None, as_json: bool) -> None:
    """Reopen task ID (blocked, closed or cancelled → open): the scheduler starts an agent on it
    again. Refused (exit status 1) when the task is already open or in progress."""
    current = app.api.get(f"/tasks/{app.api.segment(task_id)}")
    if _get(current, "state", None) in ("open", "in_progress"):
        raise Failure(
            f"task {task_id} is already {_get(current, 'state', 'open').replace('_', ' ')}; only a blocked, closed or cancelled task can be reopened", 1
        )
    body: dict[str, Any] = {"state": "open"}
    if note_text is not None:
        body["resume_note"] = note_text
    if exec_spec is not None:
        body["exec"] = exec_spec
    result = app.api.patch(f"/tasks/{app.api.segment(task_id)}", body)
    if as_json:
        echo_json(result)
    else:
        click.echo(f"task {_get(result, 'id', task_id)}: {_get(result, 'state', 'open')}")


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


from . import review as _review  # noqa: E402,F401  (adds task diff|merge|discard to the group)

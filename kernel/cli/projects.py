"""``elowen project add|list|remove``."""

from __future__ import annotations

from pathlib import Path

import click

from .app import ID, App
from .output import echo_json, table

__all__ = ["project"]


@click.group()
def project() -> None:
    """Register and list projects (a project is a folder on disk)."""


@project.command("add")
@click.argument("name")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the created project as JSON.")
@click.pass_obj
def project_add(app: App, name: str, path: Path, as_json: bool) -> None:
    """Register the folder PATH as project NAME (PATH is resolved here, not by the daemon)."""
    created = app.api.post("/projects", {"name": name, "path": str(path.resolve())})
    if as_json:
        echo_json(created)
    else:
        click.echo(f"created project {created.get('id')}: {created.get('name')} ({created.get('path')})")


@project.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of projects.")
@click.pass_obj
def project_list(app: App, as_json: bool) -> None:
    """List the projects you can see."""
    items = app.api.list_all("/projects")
    if as_json:
        echo_json(items)
    else:
        table(items, [("ID", "id"), ("NAME", "name"), ("PATH", "path")], empty="(no projects)")


@project.command("remove")
@click.argument("project_id", metavar="ID", type=ID)
@click.option("--force", is_flag=True, help="Also delete its open, in-progress and blocked tasks.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer as JSON.")
@click.pass_obj
def project_remove(app: App, project_id: int, force: bool, as_json: bool) -> None:
    """Delete project ID and its tasks (admin). Refused while it has unfinished tasks, unless
    --force. The folder on disk is not touched."""
    result = app.api.delete(f"/projects/{project_id}", force="true" if force else None)
    if as_json:
        echo_json(result)
    else:
        click.echo(f"removed project {project_id} ({result.get('tasks_deleted', 0)} task(s) deleted)")

"""``elowen task diff|merge|discard|pr``: review a task's work in its own git worktree (the git
plugin's ``/tasks/{id}/diff``, ``/merge``, ``/discard`` and ``/pr``). Imported by :mod:`.tasks`, whose
``task`` group these commands join."""

from __future__ import annotations

import click

from .app import ID, App
from .output import Column, echo_json, table
from .tasks import task

__all__ = ["task_diff", "task_discard", "task_merge", "task_pr"]

FILE_COLUMNS: list[Column] = [("STATUS", "status"), ("+", "additions"), ("-", "deletions"), ("PATH", "path")]


@task.command("diff")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--stat", is_flag=True, help="Only the files changed (status, lines added and removed) and the branch.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's diff object (files and patch) as JSON.")
@click.pass_obj
def task_diff(app: App, task_id: int, stat: bool, as_json: bool) -> None:
    """What the task's agent changed in its worktree: the unified diff from where its branch
    started (commits and uncommitted work)."""
    seg = app.api.segment(task_id)
    diff = app.api.get(f"/tasks/{seg}/diff")
    if as_json:
        echo_json(diff)
        return
    if stat:
        wt = app.api.get(f"/tasks/{seg}/worktree")
        click.echo(
            f"{wt['branch']} from {wt['base']} ({wt['state']}): {wt.get('ahead', 0)} ahead, {wt.get('behind', 0)} behind, {len(wt.get('dirty') or [])} uncommitted"
        )
        table(diff["files"], FILE_COLUMNS, empty="(no changes)")
        return
    click.echo(diff["patch"], nl=False)
    if diff.get("truncated"):
        click.echo("… (patch cut at 2 MB)", err=True)


@task.command("merge")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--ff-only", is_flag=True, help="Only a fast-forward (fail if the base branch moved on).")
@click.option("--commit-pending", is_flag=True, help="Commit uncommitted changes in the worktree first.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def task_merge(app: App, task_id: int, ff_only: bool, commit_pending: bool, as_json: bool) -> None:
    """Merge the task's branch into its base branch. A conflict changes nothing and names the
    files (exit 1)."""
    result = app.api.post(f"/tasks/{app.api.segment(task_id)}/merge", {"mode": "ff" if ff_only else "merge", "commit_pending": commit_pending})
    if as_json:
        echo_json(result)
        return
    how = "up to date" if result.get("up_to_date") else "fast-forward" if result.get("fast_forward") else "merge commit"
    click.echo(f"task {task_id}: {result['branch']} merged into {result['base']} at {result['commit'][:12]} ({how})")


@task.command("discard")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the worktree record as JSON.")
@click.pass_obj
def task_discard(app: App, task_id: int, yes: bool, as_json: bool) -> None:
    """Remove the task's worktree and delete its branch (its changes are lost)."""
    if not yes:
        click.confirm(f"Delete the worktree and branch of task {task_id}, with every change in them?", abort=True)
    result = app.api.post(f"/tasks/{app.api.segment(task_id)}/discard")
    if as_json:
        echo_json(result)
    else:
        click.echo(f"task {task_id}: worktree and branch {result['branch']} removed")


@task.command("pr")
@click.argument("task_id", metavar="ID", type=ID)
@click.option("--commit-pending", is_flag=True, help="Commit uncommitted changes in the worktree first (else they refuse the PR).")
@click.option("--json", "as_json", is_flag=True, help="Print the result (url, branch, base, remote, pushed) as JSON.")
@click.pass_obj
def task_pr(app: App, task_id: int, commit_pending: bool, as_json: bool) -> None:
    """Push the task's branch to the project's remote and open a pull request with the GitHub
    CLI (``gh``; title and body from the task). Exit status 1 when ``gh`` is missing or not
    logged in, or the repository has no remote."""
    result = app.api.post(f"/tasks/{app.api.segment(task_id)}/pr", {"commit_pending": commit_pending})
    if as_json:
        echo_json(result)
    else:
        click.echo(f"task {task_id}: {result['branch']} pushed to {result['remote']}; pull request {result['url']}")

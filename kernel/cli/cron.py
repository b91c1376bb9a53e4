"""``elowen cron add|list|show|runs|pause|resume|rm|run-now``: scheduled prompts, through the
``cron`` plugin's ``/cron/*`` routes (docs/schedules.md). Every command takes ``--json`` (the API's
objects as they are); errors exit 1 with the API's message (a schedule that was not understood
names the part and shows examples)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from .app import ID, App
from .output import Column, echo_json, fields, table

__all__ = ["cron"]

JOB_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("STATE", "state"),
    ("SCHEDULE", "schedule"),
    ("TZ", "tz"),
    ("NEXT FIRE", "next_fire"),
    ("LAST", lambda j: (j.get("last_run") or {}).get("status")),
    ("NAME", lambda j: j.get("name") or (j.get("prompt") or "")[:50]),
]
RUN_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("DUE", "scheduled_for"),
    ("TRIGGER", "trigger"),
    ("STATUS", "status"),
    ("CONV", "conversation_id"),
    ("DETAIL", lambda r: (r.get("error") or r.get("result") or "")[:80]),
]
JOB_FIELDS = (
    "id",
    "name",
    "state",
    "stop_reason",
    "schedule",
    "description",
    "tz",
    "next_fire",
    "next_fires",
    "prompt",
    "project_id",
    "model",
    "deliver",
    "catchup",
    "catchup_cap",
    "owner_id",
    "created_at",
)


@click.group()
def cron() -> None:
    """Scheduled prompts: each fire runs as a turn of your own brain conversation.

    Schedules: 'every 30m', 'every day at 18:30', 'every monday at 09:00', 'at 18:30',
    'at 2026-12-24 09:00', 'in 20m', or a 5-field cron expression ('*/15 9-17 * * mon-fri').
    """


@cron.command("add")
@click.argument("schedule")
@click.argument("prompt", nargs=-1, required=True)
@click.option("--tz", default=None, help="IANA time zone of the schedule (default: the instance's).")
@click.option("--name", default=None, help="A short name shown in lists and notifications.")
@click.option("--project", "project_id", type=ID, default=None, help="Run in this project.")
@click.option("--model", default=None, help="Model spec '<provider>/<model>' (default: the brain's).")
@click.option(
    "--catchup",
    type=click.Choice(["skip", "once", "all"]),
    default=None,
    help="After downtime: record missed (skip), run one (once), or run up to --catchup-cap (all).",
)
@click.option("--catchup-cap", type=click.IntRange(1, 1000), default=None, help="Most missed fires 'all' runs.")
@click.option("--no-notify", is_flag=True, help="Do not send the result as a notification (it stays in the run and its conversation).")
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option("--json", "as_json", is_flag=True, help="Print the created job as JSON.")
@click.pass_obj
def cron_add(
    app: App,
    schedule: str,
    prompt: tuple[str, ...],
    tz: str | None,
    name: str | None,
    project_id: int | None,
    model: str | None,
    catchup: str | None,
    catchup_cap: int | None,
    no_notify: bool,
    paused: bool,
    as_json: bool,
) -> None:
    """Add a job: run PROMPT on SCHEDULE (quote a schedule with spaces: "every 30m")."""
    body: dict[str, object] = {"schedule": schedule, "prompt": " ".join(prompt)}
    for key, value in (("tz", tz), ("name", name), ("project_id", project_id), ("model", model), ("catchup", catchup), ("catchup_cap", catchup_cap)):
        if value is not None:
            body[key] = value
    if no_notify:
        body["deliver"] = "none"
    if paused:
        body["paused"] = True
    job = app.api.post("/cron/jobs", body)
    if as_json:
        echo_json(job)
    else:
        click.echo(f"created cron job {job['id']}: {job['description']}, next fire {job['next_fire'] or '-'}")


@cron.command("list")
@click.option("--all", "every", is_flag=True, help="Every owner's jobs (admin).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of jobs.")
@click.pass_obj
def cron_list(app: App, every: bool, as_json: bool) -> None:
    """List your cron jobs with their next fire and last run."""
    items = app.api.list_all("/cron/jobs", **({"all": "1"} if every else {}))
    if as_json:
        echo_json(items)
    else:
        table(items, JOB_COLUMNS, empty="(no cron jobs)")


@cron.command("show")
@click.argument("job_id", metavar="ID", type=ID)
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@click.pass_obj
def cron_show(app: App, job_id: int, as_json: bool) -> None:
    """Show job ID with its next fires."""
    job = app.api.get(f"/cron/jobs/{job_id}")
    if as_json:
        echo_json(job)
    else:
        fields(job, JOB_FIELDS)
        last = job.get("last_run")
        if last:
            click.echo(f"last run:    {last['id']} {last['status']} (due {last['scheduled_for']})")


@cron.command("runs")
@click.argument("job_id", metavar="ID", type=ID)
@click.option("--limit", type=click.IntRange(1, 200), default=20, show_default=True, help="At most this many runs (newest first).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of runs.")
@click.pass_obj
def cron_runs(app: App, job_id: int, limit: int, as_json: bool) -> None:
    """The run record of job ID, newest first: ran, failed, missed, skipped."""
    items = app.api.get(f"/cron/jobs/{job_id}/runs", limit=limit).get("items") or []
    if as_json:
        echo_json(items)
    else:
        table(items, RUN_COLUMNS, empty="(no runs yet)")


def _simple(name: str, method: str, suffix: str, help_text: str, done: Callable[[int, dict[str, Any]], str]) -> None:
    @cron.command(name, help=help_text)
    @click.argument("job_id", metavar="ID", type=ID)
    @click.option("--json", "as_json", is_flag=True, help="Print the API's answer as JSON.")
    @click.pass_obj
    def command(app: App, job_id: int, as_json: bool) -> None:
        path = f"/cron/jobs/{job_id}{suffix}"
        result = app.api.delete(path) if method == "DELETE" else app.api.post(path)
        if as_json:
            echo_json(result)
        else:
            click.echo(done(job_id, result))


_simple("pause", "POST", "/pause", "Pause job ID (its due fires are recorded missed).", lambda i, r: f"paused cron job {i}")
_simple("resume", "POST", "/resume", "Resume job ID.", lambda i, r: f"resumed cron job {i}; next fire {r.get('next_fire') or '-'}")
_simple("rm", "DELETE", "", "Remove job ID and its run record (a running turn is stopped).", lambda i, r: f"removed cron job {i}")
_simple("run-now", "POST", "/run", "Run job ID now (refused while a run of it is going).", lambda i, r: f"started run {r.get('id')} of cron job {i}")

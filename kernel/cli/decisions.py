"""``elowen decisions [--pending] [--status S] [--task T] [--kind K] [--last N] [--json]`` and
``elowen decisions show ID [--json]``.

A thin client of ``GET /decisions`` and ``GET /decisions/{id}`` (the agents plugin). Each row
names the decision's task and agent session, its kind, the action the agent's screen asked for
(``payload.request``, as extracted by the deriver: the command, the resolved paths, the URL, the
directory…), the verdict (``status``), who decided (``decided_by``: ``user:N``,
``overseer:relay:<model>``, ``overseer:rules``…) and when. ``--pending`` lists the decisions that
can still be answered: ``pending`` and ``escalated`` (answer them with ``elowen decide ID``).
Only click and the stdlib are imported here (the CLI's light import path).
"""

from __future__ import annotations

from typing import Any

import click

from .app import ID, App
from .output import Column, echo_json, fields, table

__all__ = ["action_of", "decisions"]

KINDS = ("prompt", "question", "review", "message", "check")
STATUSES = ("pending", "escalated", "approved", "rejected", "answered", "expired")
OPEN = ("pending", "escalated")
ACTION_WIDTH = 72


def action_of(decision: dict[str, Any], width: int = ACTION_WIDTH) -> str:
    """The action a decision asks about, in one line of at most ``width`` characters:
    ``<request kind>: <what>`` from ``payload.request`` (``bash: rm -rf build``, ``write:
    /root/x.txt``, ``fetch: https://…``, ``directory: /root (/root/*)``, ``mcp: server/tool``),
    with ``[incomplete: <missing parts>]`` when the request did not name the action whole;
    otherwise the payload's question or summary. ``-`` when there is nothing to show."""
    payload = decision.get("payload") or {}
    request = payload.get("request") if isinstance(payload, dict) else None
    text = ""
    if isinstance(request, dict) and request:
        kind = str(request.get("kind") or "")
        raw = request.get("paths")
        paths: list[Any] = raw if isinstance(raw, list) else []
        what = ""
        if kind == "bash" or (not kind and request.get("command")):
            what = str(request.get("command") or "")
        elif kind in ("edit", "write", "patch"):
            what = ", ".join(str(p) for p in paths) or str(request.get("file") or "")
        elif kind == "fetch":
            what = str(request.get("url") or "")
        elif kind == "directory":
            found = request.get("patterns")
            patterns: list[Any] = found if isinstance(found, list) else []
            what = str(request.get("directory") or "") + (f" ({', '.join(map(str, patterns))})" if patterns else "")
        elif kind == "mcp":
            what = "/".join(str(request.get(k)) for k in ("server", "tool") if request.get(k))
        what = what or str(request.get("command") or request.get("question") or request.get("description") or "")
        text = f"{kind}: {what}" if kind and what else what or kind
        missing = request.get("missing")
        if request.get("complete") is False and missing:
            text += f" [incomplete: {', '.join(map(str, missing)) if isinstance(missing, list) else missing}]"
    elif isinstance(payload, dict):
        text = str(payload.get("question") or payload.get("summary") or payload.get("text") or "")
    text = " ".join(text.split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text or "-"


def _confidence(d: dict[str, Any]) -> str:
    return "-" if d.get("confidence") is None else f"{d['confidence']:.2f}"


COLUMNS: list[Column] = [
    ("ID", "id"),
    ("TASK", "task_id"),
    ("AGENT", "session"),
    ("KIND", "kind"),
    ("STATUS", "status"),
    ("BY", "decided_by"),
    ("CONF", _confidence),
    ("WHEN", lambda d: d.get("decided_at") or d.get("created_at")),
    ("ACTION", action_of),
]


@click.group(invoke_without_command=True)
@click.option("--pending", is_flag=True, help="Only decisions that can still be answered (pending or escalated).")
@click.option("--status", type=click.Choice(STATUSES), default=None, help="Only decisions in this status.")
@click.option("--task", "task_id", type=ID, default=None, help="Only decisions of task ID.")
@click.option("--kind", type=click.Choice(KINDS), default=None, help="Only decisions of this kind.")
@click.option("--last", type=click.IntRange(1, 10_000), default=None, help="Only the N newest.")
@click.option("--json", "as_json", is_flag=True, help="Print the decisions as a JSON list (the API's objects).")
@click.pass_context
def decisions(ctx: click.Context, pending: bool, status: str | None, task_id: int | None, kind: str | None, last: int | None, as_json: bool) -> None:
    """List decisions (oldest first): id, task and agent, kind, verdict, who decided and when,
    and the action the agent asked for. Answer one with `elowen decide ID`."""
    if ctx.invoked_subcommand is not None:
        return
    if pending and status is not None:
        raise click.UsageError("give --pending or --status, not both")
    app: App = ctx.obj
    query: dict[str, Any] = {"task": task_id, "kind": kind, "limit": 500}
    if pending:
        items = [d for s in OPEN for d in app.api.list_all("/decisions", **query, status=s)]
        items.sort(key=lambda d: int(d.get("id") or 0))
    else:
        items = app.api.list_all("/decisions", **query, status=status)
    if last is not None:
        items = items[-last:]
    if as_json:
        echo_json(items)
    else:
        table(items, COLUMNS, empty="(no decisions waiting)" if pending else "(no decisions)")


@decisions.command("show")
@click.argument("decision_id", type=ID, metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
@click.pass_obj
def decisions_show(app: App, decision_id: int, as_json: bool) -> None:
    """One decision: its fields, the extracted request (and diff), and the agent's screen when
    the decision carries it (an escalation, an unknown dialog)."""
    d = app.api.get(f"/decisions/{decision_id}")
    if as_json:
        echo_json(d)
        return
    payload = d.get("payload") or {}
    options = payload.get("options") if isinstance(payload, dict) else None
    keys = ["id", "kind", "task_id", "session", "status", "action", "options", "confidence", "decided_by", "rationale", "created_at", "decided_at"]
    fields({**d, "action": action_of(d, width=10_000), "options": options or None}, keys)
    request = payload.get("request") if isinstance(payload, dict) else None
    if isinstance(request, dict) and request:
        click.echo("request:")
        for key, value in request.items():
            if key not in ("diff", "screen") and value not in (None, "", [], {}):
                click.echo(f"  {key}: {value}")
        if request.get("diff"):
            click.echo("diff:")
            click.echo("\n".join("  " + line for line in str(request["diff"]).splitlines()))
    screen = payload.get("screen") if isinstance(payload, dict) else None
    if screen:
        click.echo("screen:")
        click.echo("\n".join("  " + line for line in str(screen).rstrip().splitlines()))

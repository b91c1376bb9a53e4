"""Missions, the overseer, escalations, ``elowen ask`` and inference providers.

``elowen mission create|list|show|engage|pause|resume|disengage|level|add``,
``elowen overseer check-command|poll|decide|agents``, ``elowen escalations [answer]``,
``elowen ask``, ``elowen provider add|list|remove``.

``overseer check-command`` runs locally (no daemon): it prints the destructive-action verdict
of a shell command as JSON, from the same rules the decision gate uses. ``overseer poll`` and
``overseer decide`` are what a parked overseer agent runs (its token is a mission's overseer
token). Only click and the stdlib are imported here (the CLI's light import path).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import click

from .app import App, answer_decision, json_id
from .errors import Failure
from .output import Column, echo_json, fields, note, table

__all__ = ["ask", "escalations", "mission", "overseer", "provider"]

POLL_CHUNK = 25.0  # seconds per long-poll request (the daemon allows up to 60)

MISSION_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("NAME", "name"),
    ("LEVEL", lambda m: f"L{m['level']}"),
    ("STATE", "state"),
    ("PROJECT", "project_id"),
    ("TASKS", lambda m: len(m.get("task_ids") or [])),
    ("RUNNING", lambda m: f"{m.get('running', 0)}/{m['max_sessions'] or '∞'}"),
    ("REASON", "state_reason"),
]

ESCALATION_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("KIND", "kind"),
    ("TASK", "task_id"),
    ("MISSION", lambda d: (d.get("mission") or {}).get("id")),
    ("CONF", lambda d: "-" if d.get("confidence") is None else f"{d['confidence']:.2f}"),
    ("WHAT", lambda d: _what(d)),
    ("WHY", "rationale"),
]


def _what(decision: dict[str, Any]) -> str:
    payload = decision.get("payload") or {}
    request = payload.get("request") or {}
    if isinstance(request, dict):
        for key in ("command", "file", "question", "description"):
            if request.get(key):
                return str(request[key])[:60]
    return str(payload.get("question") or payload.get("summary") or "")[:60]


def _level(value: str) -> int:
    text = value.strip().upper().removeprefix("L")
    if text not in ("0", "1", "2", "3"):
        raise click.BadParameter("use L0, L1, L2 or L3")
    return int(text)


def _show_mission(mission: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(mission)
        return
    fields(
        {**mission, "level": f"L{mission['level']}"},
        ["id", "name", "level", "state", "state_reason", "project_id", "max_sessions", "running", "task_ids", "created_at", "updated_at"],
    )


# ---------------------------------------------------------------------------- missions


@click.group()
def mission() -> None:
    """Missions: tasks grouped under one autonomy level (L0–L3)."""


@mission.command("create")
@click.argument("name")
@click.option("--level", "-l", default="L1", show_default=True, help="L0 (propose only) … L3.")
@click.option("--project", "project_id", type=int, default=None, help="Project id (members must give one).")
@click.option("--task", "task_ids", type=int, multiple=True, help="A task to include (repeat).")
@click.option("--max-sessions", type=click.IntRange(0), default=0, show_default=True, help="Agents at once (0: no limit).")
@click.option("--engage", is_flag=True, help="Start it at once (else it is created paused).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def mission_create(app: App, name: str, level: str, project_id: int | None, task_ids: tuple[int, ...], max_sessions: int, engage: bool, as_json: bool) -> None:
    """Create mission NAME."""
    body: dict[str, Any] = {"name": name, "level": _level(level), "task_ids": list(task_ids), "max_sessions": max_sessions, "engage": engage}
    if project_id is not None:
        body["project_id"] = project_id
    _show_mission(app.api.post("/missions", body), as_json)


@mission.command("list")
@click.option("--state", type=click.Choice(["active", "stalled", "paused", "disengaged"]), default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def mission_list(app: App, state: str | None, as_json: bool) -> None:
    """List missions."""
    items = app.api.list_all("/missions", state=state)
    if as_json:
        echo_json(items)
    else:
        table(items, MISSION_COLUMNS, empty="(no missions)")


@mission.command("show")
@click.argument("mission_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def mission_show(app: App, mission_id: str, as_json: bool) -> None:
    """Show mission ID."""
    _show_mission(app.api.get(f"/missions/{app.api.segment(mission_id)}"), as_json)


def _verb(verb: str, help_text: str) -> click.Command:
    @click.command(verb, help=help_text)
    @click.argument("mission_id", metavar="ID")
    @click.option("--reason", default=None, help="Recorded with the state change.")
    @click.option("--json", "as_json", is_flag=True)
    @click.pass_obj
    def command(app: App, mission_id: str, reason: str | None, as_json: bool) -> None:
        body = {"reason": reason} if reason else {}
        result = app.api.post(f"/missions/{app.api.segment(mission_id)}/{verb}", body)
        if as_json:
            echo_json(result)
        else:
            click.echo(f"mission {result['id']}: {result['state']}")

    return command


for _name, _help in (
    ("engage", "Engage mission ID (paused or disengaged → active)."),
    ("pause", "Pause mission ID: no spawns, no automatic decisions."),
    ("resume", "Resume a paused or stalled mission ID."),
    ("disengage", "Disengage mission ID: its tasks become ordinary tasks again."),
):
    mission.add_command(_verb(_name, _help))


@mission.command("level")
@click.argument("mission_id", metavar="ID")
@click.argument("level", metavar="L0|L1|L2|L3")
@click.pass_obj
def mission_level(app: App, mission_id: str, level: str) -> None:
    """Set mission ID's autonomy level (takes effect at once)."""
    result = app.api.patch(f"/missions/{app.api.segment(mission_id)}", {"level": _level(level)})
    click.echo(f"mission {result['id']}: L{result['level']}")


@mission.command("add")
@click.argument("mission_id", metavar="ID")
@click.argument("task_ids", metavar="TASK...", type=int, nargs=-1, required=True)
@click.pass_obj
def mission_add(app: App, mission_id: str, task_ids: tuple[int, ...]) -> None:
    """Add tasks to mission ID."""
    result = app.api.post(f"/missions/{app.api.segment(mission_id)}/tasks", {"task_ids": list(task_ids)})
    click.echo(f"mission {result['id']}: tasks {', '.join(map(str, result['task_ids']))}")


# ---------------------------------------------------------------------------- overseer


@click.group()
def overseer() -> None:
    """The overseer: destructive-command check, and the parked overseer's poll/decide."""


@overseer.command("check-command")
@click.argument("command")
@click.option("--cwd", default=None, help="Directory the command runs in (default: here).")
@click.option("--checkout", default=None, help="The task's checkout (default: --cwd).")
def check_command(command: str, cwd: str | None, checkout: str | None) -> None:
    """Print whether COMMAND is destructive, and why, as JSON (local; no daemon)."""
    from elowen_sdk.destructive import check_command as check

    cwd = os.path.abspath(cwd or os.getcwd())
    verdict = check(command, cwd=cwd, checkout=os.path.abspath(checkout) if checkout else cwd)
    click.echo(json.dumps(verdict.to_dict(), ensure_ascii=False))


@overseer.command("poll")
@click.option("--timeout", type=click.FloatRange(0), default=0, help="Give up after this many seconds (0: wait forever).")
@click.option("--mission", "mission_id", default=None, help="Mission id (admins only; an overseer token knows its mission).")
@click.pass_obj
def overseer_poll(app: App, timeout: float, mission_id: str | None) -> None:
    """Wait for the next decision of this overseer's mission; print it as JSON."""
    deadline = time.monotonic() + timeout if timeout else None
    while True:
        wait = POLL_CHUNK if deadline is None else max(0.0, min(POLL_CHUNK, deadline - time.monotonic()))
        query = {"wait": f"{wait:g}", "mission": mission_id}
        result = app.api.request("GET", "/overseer/poll", query=query, timeout=wait + 30)
        if result and result.get("decision"):
            echo_json(result["decision"])
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise Failure("no decision came", 1)


@overseer.command("decide")
@click.option("--id", "decision_id", type=int, required=True, help="The decision's id (from `overseer poll`).")
@click.option("--approve", "action", flag_value="approve", help="Approve.")
@click.option("--reject", "action", flag_value="reject", help="Reject (a review: reopen the task).")
@click.option("--escalate", "action", flag_value="escalate", help="Hand it to a human.")
@click.option("--choice", type=click.IntRange(1, 99), default=None, help="Pick option N of a question.")
@click.option("--message", "text", default=None, help="Answer an agent's question with TEXT.")
@click.option("--confidence", type=click.FloatRange(0, 1), default=None, help="0..1; below the level's threshold a human decides.")
@click.option("--rationale", "-r", default="", help="Why (recorded, shown to humans; a rejected review's note).")
@click.option("--mission", "mission_id", type=int, default=None, help="Mission id (admins only).")
@click.pass_obj
def overseer_decide(
    app: App, decision_id: int, action: str | None, choice: int | None, text: str | None, confidence: float | None, rationale: str, mission_id: int | None
) -> None:
    """Answer a decision as the mission's overseer."""
    chosen = [a for a in (action, "choice" if choice is not None else None, "answer" if text is not None else None) if a]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --approve, --reject, --escalate, --choice N, --message TEXT")
    body: dict[str, Any] = {"id": decision_id, "action": chosen[0], "rationale": rationale}
    if confidence is not None:
        body["confidence"] = confidence
    if choice is not None:
        body["choice"] = choice
    if text is not None:
        body["text"] = text
    if mission_id is not None:
        body["mission"] = mission_id
    result = app.api.post("/overseer/decide", body)
    click.echo(json.dumps({"id": result["id"], "status": result["status"], "rationale": result.get("rationale")}, ensure_ascii=False))


@overseer.command("agents")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def overseer_agents(app: App, as_json: bool) -> None:
    """List parked overseer agents (admin)."""
    items = app.api.get("/overseer/agents").get("items", [])
    if as_json:
        echo_json(items)
    else:
        table(
            items,
            [
                ("ID", "id"),
                ("MISSION", "mission_id"),
                ("SESSION", "session"),
                ("PROVIDER", "provider"),
                ("STATE", "state"),
                ("STARTED", "started_at"),
                ("REASON", "end_reason"),
            ],
            empty="(no overseer agents)",
        )


# ---------------------------------------------------------------------------- escalations


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the inbox as JSON.")
@click.pass_context
def escalations(ctx: click.Context, as_json: bool) -> None:
    """The escalations inbox: decisions waiting for a human (answer with `escalations answer`)."""
    if ctx.invoked_subcommand is not None:
        return
    app: App = ctx.obj
    items = app.api.list_all("/escalations")
    if as_json:
        echo_json(items)
    else:
        table(items, ESCALATION_COLUMNS, empty="(nothing waits for you)")


@escalations.command("answer")
@click.argument("decision_id", metavar="ID")
@click.option("--approve", "action", flag_value="approve")
@click.option("--reject", "action", flag_value="reject")
@click.option("--choice", type=click.IntRange(1, 99), default=None, help="Pick option N.")
@click.option("--text", "--answer", "text", default=None, help="Answer text (an ask, a check), or a rejected review's note (--answer, as in `elowen decide`).")
@click.option("--rationale", "-r", default=None, help="Why (recorded).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def escalations_answer(app: App, decision_id: str, action: str | None, choice: int | None, text: str | None, rationale: str | None, as_json: bool) -> None:
    """Answer escalated decision ID: --approve, --reject, --choice N or --text T."""
    if choice is not None:
        chosen = "choice"
    elif action is None and text is not None:
        chosen = "answer"
    elif action is not None:
        chosen = action
    else:
        raise click.UsageError("give one of --approve, --reject, --choice N, --text T")
    answer_decision(app, f"/escalations/{app.api.segment(decision_id)}", chosen, choice=choice, text=text, rationale=rationale, as_json=as_json)


# ---------------------------------------------------------------------------- ask


@click.command()
@click.argument("question")
@click.option("--history", is_flag=True, help="Send the task's recent progress and earlier Q&A along.")
@click.option("--task", "task_id", default=None, help="Task the question is about (full tokens; an agent's token knows its task).")
@click.option("--timeout", type=click.FloatRange(0), default=0, help="Give up after this many seconds (0: wait for the answer).")
@click.option("--json", "as_json", is_flag=True, help="Print the ask record as JSON.")
@click.pass_obj
def ask(app: App, question: str, history: bool, task_id: str | None, timeout: float, as_json: bool) -> None:
    """Ask the autopilot QUESTION and print its answer (a human answers what it cannot)."""
    body: dict[str, Any] = {"question": question, "history": history}
    if task_id is not None:
        body["task_id"] = json_id(task_id)
    record = app.api.post("/asks", body)
    deadline = time.monotonic() + timeout if timeout else None
    told = False
    while record["status"] in ("pending", "escalated"):
        if record["status"] == "escalated" and not told:
            note(f"ask {record['id']}: escalated to a human ({record.get('rationale') or 'no reason'}); waiting for the answer")
            told = True
        wait = POLL_CHUNK if deadline is None else max(0.0, min(POLL_CHUNK, deadline - time.monotonic()))
        if deadline is not None and wait <= 0:
            raise Failure(f"ask {record['id']}: no answer yet (status {record['status']}); see `elowen escalations`", 1)
        record = app.api.request("GET", f"/asks/{record['id']}", query={"wait": f"{wait:g}", "seen": record["status"]}, timeout=wait + 30)
    if as_json:
        echo_json(record)
        return
    if record["status"] != "answered":
        raise Failure(f"ask {record['id']}: {record['status']}" + (f" ({record['rationale']})" if record.get("rationale") else ""), 1)
    click.echo(record["answer"])


# ---------------------------------------------------------------------------- providers


@click.group()
def provider() -> None:
    """Inference providers of the LLM relay (admin)."""


@provider.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(["openai", "anthropic"]), required=True)
@click.option("--base-url", required=True, help="e.g. http://127.0.0.1:11434/v1 (openai) or https://api.anthropic.com.")
@click.option("--api-key-env", default=None, help="NAME of the environment variable holding the key (never the key).")
@click.option("--replace", is_flag=True, help="Replace a provider of that name.")
@click.option("--default-model", "default_model", metavar="MODEL", default=None, help="Also make NAME/MODEL the default model (what chat uses).")
@click.pass_obj
def provider_add(app: App, name: str, kind: str, base_url: str, api_key_env: str | None, replace: bool, default_model: str | None) -> None:
    """Add provider NAME. The brain chats with the default model: give --default-model (or set
    `elowen plugin config inference default_model=NAME/MODEL`), else chat has none to use."""
    body: dict[str, Any] = {"name": name, "kind": kind, "base_url": base_url, "replace": replace}
    if api_key_env:
        body["api_key_env"] = api_key_env
    result = app.api.post("/providers", body)
    click.echo(f"provider {result['name']}: {result.get('kind')} {result.get('base_url')}")
    if default_model:
        spec = f"{name}/{default_model.strip()}"
        app.api.patch("/plugins/inference/config", {"values": {"default_model": spec}})
        click.echo(f"default model: {spec}")
        return
    try:
        current = (app.api.get("/plugins/inference").get("config") or {}).get("default_model")
    except Exception:  # the hint is a courtesy: never fail an add that succeeded
        return
    if not current:
        note(f"hint: no default model is set, so chat has none to use: `elowen plugin config inference default_model={name}/MODEL`")


@provider.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def provider_list(app: App, as_json: bool) -> None:
    """List providers."""
    items = app.api.get("/providers").get("items", [])
    if as_json:
        echo_json(items)
    else:
        table(
            items,
            [
                ("NAME", "name"),
                ("KIND", "kind"),
                ("SOURCE", lambda p: "built-in" if p.get("source") == "builtin" else "settings"),
                ("BASE URL", "base_url"),
                ("KEY", lambda p: "-" if p.get("kind") == "local" else "yes" if p.get("key_present") else "no"),
                ("ERROR", "error"),
            ],
            empty="(no providers)",
        )


@provider.command("remove")
@click.argument("name")
@click.pass_obj
def provider_remove(app: App, name: str) -> None:
    """Remove provider NAME."""
    app.api.request("DELETE", f"/providers/{app.api.segment(name)}")
    click.echo(f"provider {name}: removed")

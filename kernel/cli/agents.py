"""``elowen agents [--json]``, ``elowen agents classify``, ``elowen attach TASK``,
``elowen decide ID`` and ``elowen executors [--json]``.

``agents classify`` runs locally (no daemon): it prints the classification of a captured
screen as JSON, so patterns for a new CLI version can be checked against a capture. It imports
the classifier only when it runs (this module stays on the CLI's light import path).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

import click

from .app import App, Failure, answer_decision, json_id
from .output import Column, echo_json, note, table

__all__ = ["agents", "attach", "decide", "executors"]

SESSION_COLUMNS: list[Column] = [
    ("SESSION", "session"),
    ("TASK", "task_id"),
    ("ATTEMPT", "attempt"),
    ("PROVIDER", "provider"),
    ("MODEL", "model"),
    ("STATE", "state"),
    ("SIGNAL", "signal"),
    ("DECISION", "decision_id"),
    ("STARTED", "started_at"),
]


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of agent sessions.")
@click.option("--all", "show_all", is_flag=True, help="Include exited and ended sessions.")
@click.pass_context
def agents(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """List running coding agents (and check screen patterns with `agents classify`)."""
    if ctx.invoked_subcommand is not None:
        return
    app: App = ctx.obj
    query = {} if show_all else {"state": "running"}
    items = app.api.get("/sessions", **query).get("items", [])
    if as_json:
        echo_json(items)
    else:
        table(items, SESSION_COLUMNS, empty="(no agents running)")


def _cli_cell(item: dict[str, Any]) -> str:
    cli = item.get("cli")
    if not isinstance(cli, dict):
        return "-" if item.get("kind") != "cli" else ("plugin disabled" if not item.get("enabled") else "?")
    if not cli.get("found"):
        return f"NOT FOUND ({cli.get('program')})"
    return f"{cli.get('path')}" + (f" {cli.get('version')}" if cli.get("version") else "")


EXECUTOR_COLUMNS: list[Column] = [
    ("NAME", "name"),
    ("PLUGIN", "plugin"),
    ("KIND", "kind"),
    ("ENABLED", "enabled"),
    ("CLI", _cli_cell),
    ("EXAMPLES", lambda i: ", ".join(i.get("examples") or [])),
]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer (items, fallback, allowed) as JSON.")
@click.pass_obj
def executors(app: App, as_json: bool) -> None:
    """The executors tasks can run on: each coding-agent CLI, whether its program is found
    (path and version) or not, and the specs to pass as `task create --exec`. A task whose CLI
    is not found is blocked at once; install the CLI (or `elowen plugin config PLUGIN
    binary=/path/to/it`), then `elowen task reopen ID`."""
    reply = app.api.get("/executors")
    if as_json:
        echo_json(reply)
        return
    items = reply.get("items", [])
    table(items, EXECUTOR_COLUMNS, empty="(no executors: is the agents plugin enabled?)")
    click.echo(f"default (a task without --exec): {reply.get('fallback')}")
    missing = [i for i in items if isinstance(i.get("cli"), dict) and not i["cli"].get("found")]
    for i in missing:
        note(f"warning: {i['name']}: {i['cli'].get('program')!r} is not found; install it or `elowen plugin config {i['plugin']} binary=/path/to/it`")


@agents.command("classify")
@click.option("--cli", "cli", required=True, help="The executor name of an installed provider plugin (e.g. the exec name in its manifest).")
@click.option("--cli-version", default=None, help="The CLI's version (selects version-specific patterns).")
@click.option("--escapes", type=click.File("r", encoding="utf-8"), default=None, help="The same screen captured with -e (strike-through detection).")
@click.argument("screen", type=click.File("r", encoding="utf-8"), metavar="FILE|-")
def agents_classify(cli: str, cli_version: str | None, escapes: Any, screen: Any) -> None:
    """Classify a captured screen (tmux capture-pane -p) of CLI; prints JSON."""
    from elowen_sdk.screen import load_patterns

    packages = _provider_packages()
    if cli not in packages:
        raise Failure(f"unknown CLI {cli!r}; installed providers: {', '.join(sorted(packages)) or 'none'}", 2)
    result = load_patterns(packages[cli], cli_version).classify(screen.read(), escapes=escapes.read() if escapes else None)
    click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))


def _provider_packages() -> dict[str, str]:
    """Executor name → the import package of the installed plugin declaring it (manifest
    ``[contributes] executors``) that ships a ``patterns.toml``; read from entry points and
    manifests, without importing any plugin."""
    from importlib import metadata

    from elowen.core.discovery import ENTRY_POINT_GROUP, find_manifest
    from elowen_sdk import ManifestError, load_manifest

    found: dict[str, str] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        path = find_manifest(ep.module)
        if path is None or not (path.parent / "patterns.toml").is_file():
            continue
        try:
            manifest = load_manifest(path)
        except ManifestError:
            continue
        package = ep.module.rpartition(".")[0] or ep.module
        for name in manifest.contributes.get("executors", ()):
            found.setdefault(str(name), package)
    return found


def _running_session(app: App, task_id: str) -> dict[str, Any]:
    items = app.api.get("/sessions", task=json_id(task_id), state="running").get("items", [])
    if not items:
        raise Failure(f"task {task_id} has no running agent (see `elowen agents --all`)", 1)
    return items[0]


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--print", "print_only", is_flag=True, help="Only print the tmux command.")
@click.option("--write", is_flag=True, help="Attach read-write (default: read-only, -r).")
@click.pass_obj
def attach(app: App, task_id: str, print_only: bool, write: bool) -> None:
    """Attach to the agent working on TASK in tmux (read-only unless --write).

    Prints the command instead when --print is given or stdout is not a terminal.
    """
    session = _running_session(app, task_id)
    socket = session.get("socket")
    if not socket:
        raise Failure("the tmux plugin is not enabled, so the agent's terminal cannot be reached; run: elowen plugin enable tmux", 1)
    argv = ["tmux", "-L", socket, "attach-session", *([] if write else ["-r"]), "-t", f"={session['session']}:"]
    if print_only or not sys.stdout.isatty():
        click.echo(" ".join(argv))
        return
    tmux = shutil.which("tmux")
    if tmux is None:
        raise Failure("tmux is not installed here; run: " + " ".join(argv), 1)
    note(f"attaching to {session['session']} ({'read-write' if write else 'read-only'}; detach with C-b d)")
    os.execv(tmux, argv)


@click.command()
@click.argument("decision_id", metavar="ID")
@click.option("--approve", is_flag=True, help="Approve (the CLI's 'yes' keys).")
@click.option("--reject", is_flag=True, help="Reject (the CLI's 'no' keys).")
@click.option("--choice", type=click.IntRange(1, 99), default=None, help="Pick option number N as shown on screen.")
@click.option("--answer", "text", default=None, help="Answer with text (check and message decisions).")
@click.option("--escalate", is_flag=True, help="Mark it escalated (still open).")
@click.option("--rationale", "-r", default=None, help="Why (recorded).")
@click.option("--json", "as_json", is_flag=True, help="Print the decided decision as JSON.")
@click.pass_obj
def decide(
    app: App, decision_id: str, approve: bool, reject: bool, choice: int | None, text: str | None, escalate: bool, rationale: str | None, as_json: bool
) -> None:
    """Answer decision ID: --approve, --reject, --choice N, --answer TEXT or --escalate."""
    given = {"approve": approve, "reject": reject, "choice": choice is not None, "answer": text is not None, "escalate": escalate}
    chosen = [name for name, on in given.items() if on]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --approve, --reject, --choice N, --answer TEXT, --escalate")
    answer_decision(app, f"/decisions/{app.api.segment(decision_id)}", chosen[0], choice=choice, text=text, rationale=rationale, as_json=as_json)

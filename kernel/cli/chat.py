"""``elowen chat``: talk to the brain from the terminal (a thin client of ``/brain/…``).

* ``elowen chat`` — an interactive, streamed session bound to one conversation (the active
  one when started, or ``--open ID`` / ``--new``). The conversation id is resolved once and
  sent with every call, so this terminal never hijacks (or moves) the web dock's conversation;
  ``--activate`` moves the pointer to it as well (then a later plain ``elowen chat`` and the web
  dock continue it). With no active conversation at all, a new one is created and becomes the
  active one. Slash commands go to the brain (``/goal …``, ``/subgoal …``, ``/yolo on|off``,
  ``/model``, ``/help``); ``/new``, ``/open ID``, ``/list`` and ``/exit`` are handled here.
  Ctrl-C aborts the running turn; Ctrl-D exits.
* ``elowen chat -m TEXT [--model PROVIDER/MODEL]`` — one shot: prints the reply and exits; the
  conversation's id goes to stderr. ``--model`` is validated by the daemon (an unknown
  provider fails with the configured ones listed, and nothing is changed) and sets the
  conversation's model (``--model default``: back to the default).

Exit status: 0 on success, 1 when the daemon refused the request or the turn ended with an
error (or a headless goal did not finish), as for every ``elowen`` command.
* ``elowen chat --goal TEXT [--max-turns N]`` — headless goal in a new conversation; exits 0
  when the goal is done, 1 when it paused (budget, blocked…).
* ``elowen chat --list [--json]`` — your conversations.
* ``elowen chat --link CODE`` — link a chat-platform sender to you with the one-time code the
  platform showed it (``POST /brain/channels/link``); its messages then reach your active
  conversation.

Tool-call approvals and questions are asked on the terminal when stdin is one; otherwise they
stay pending (answer them in the web UI or with the API). Streaming uses stdlib
``http.client`` and NDJSON (``POST /brain/conversations/{id}/turn``).
"""

from __future__ import annotations

import http.client
import json
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import click

from .app import App
from .client import ApiError, Client, Unreachable
from .errors import Failure
from .output import Column, echo_json, note, table

__all__ = ["chat"]

TURN_TIMEOUT = 3600.0  # seconds a streamed turn may stay silent (approvals wait for you)
COLUMNS: list[Column] = [("ID", "id"), ("ACTIVE", "active"), ("MODEL", "model"), ("TITLE", "title"), ("UPDATED", "updated_at")]


def _stream(app: App, cid: int, text: str, max_turns: int | None) -> Iterator[dict[str, Any]]:
    """POST a turn and yield its NDJSON events."""
    parts = urlsplit(app.cfg.url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname or "127.0.0.1", parts.port or 80, timeout=TURN_TIMEOUT)
    body: dict[str, Any] = {"text": text}
    if max_turns is not None:
        body["max_turns"] = max_turns
    headers = {"Content-Type": "application/json", "Accept": "application/x-ndjson", "User-Agent": "elowen-cli"}
    token = app.cfg.token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("POST", f"/brain/conversations/{cid}/turn", body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            raise Client._error(resp.status, resp.read())
        for line in iter(resp.readline, b""):
            if line.strip():
                yield json.loads(line)
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(app.cfg.url, str(exc) or type(exc).__name__) from None
    finally:
        conn.close()


class _Renderer:
    """Prints a turn's events: text to stdout as it streams, tools and goal notes to stderr."""

    def __init__(self, app: App, interactive: bool, report_errors: bool = True) -> None:
        self.app = app
        self.interactive = interactive
        self.report_errors = report_errors
        self.open_line = False
        self.streamed = False

    def _end_line(self) -> None:
        if self.open_line:
            click.echo()
            self.open_line = False

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "brain.delta":
            click.echo(event.get("text", ""), nl=False)
            sys.stdout.flush()
            self.open_line = self.streamed = True
        elif kind == "brain.message" and event.get("role") == "assistant":
            if not self.streamed and event.get("content"):
                click.echo(event["content"])
            self._end_line()
            self.streamed = False
        elif kind == "brain.tool":
            self._end_line()
            if event.get("phase") == "call":
                args = json.dumps(event.get("arguments", {}), ensure_ascii=False)
                note(f"· {event.get('tool')} {args[:200]}")
            else:
                note(f"  {'ok' if event.get('ok') else 'failed'}: {str(event.get('result', ''))[:200]}")
        elif kind == "brain.approval":
            self._end_line()
            self._approval(event["approval"])
        elif kind == "brain.command":
            self._end_line()
            click.echo(event.get("text", ""))
        elif kind == "brain.goal":
            goal = event.get("goal") or {}
            reason = f" ({goal.get('pause_reason')})" if goal.get("state") == "paused" else ""
            note(f"goal #{goal.get('id')}: {event.get('event')} → {goal.get('state')}{reason}")
        elif kind in ("brain.error", "brain.aborted"):
            self._end_line()
            if kind == "brain.error" and not self.report_errors:
                return
            note(f"{'aborted' if kind == 'brain.aborted' else 'error: ' + str(event.get('message', ''))}")

    def _approval(self, record: dict[str, Any]) -> None:
        pid = record["id"]
        if not self.interactive:
            note(f"approval {pid} pending ({record.get('tool') or 'question'}); answer it in the web UI")
            return
        if record.get("kind") == "question":
            answer = click.prompt(f"? {record.get('question')}", err=True, default="", show_default=False)
            self.app.api.post(f"/brain/approvals/{pid}", {"answer": answer} if answer else {"decision": "reject"})
            return
        warn = " DESTRUCTIVE: " + "; ".join(record.get("reasons") or []) if record.get("destructive") else ""
        args = json.dumps(record.get("arguments", {}), ensure_ascii=False)
        allow = click.confirm(f"allow {record.get('tool')} {args[:300]}?{warn}", err=True, default=False)
        self.app.api.post(f"/brain/approvals/{pid}", {"decision": "allow" if allow else "reject"})


class _Outcome:
    """What a turn ended with: the final goal (``brain.done``) and the first error message."""

    def __init__(self) -> None:
        self.goal: dict[str, Any] | None = None
        self.error: str | None = None


def _run(app: App, cid: int, text: str, *, interactive: bool, max_turns: int | None = None, report_errors: bool = True) -> _Outcome:
    """Run one turn, rendering it (``brain.error`` events too, unless not ``report_errors``:
    then the caller reports ``outcome.error``)."""
    renderer = _Renderer(app, interactive, report_errors)
    outcome = _Outcome()
    try:
        for event in _stream(app, cid, text, max_turns):
            renderer.handle(event)
            if event.get("type") == "brain.done":
                outcome.goal = event.get("goal")
            elif event.get("type") == "brain.error" and outcome.error is None:
                outcome.error = str(event.get("message") or "the turn failed")
    except KeyboardInterrupt:
        renderer._end_line()
        app.api.post(f"/brain/conversations/{cid}/abort")
        note("aborted")
        outcome.error = "aborted"
    return outcome


def _model_body(model: str) -> str:
    return "" if model.strip() == "default" else model.strip()


def _resolve(app: App, open_id: int | None, new: bool, model: str | None, activate: bool = False) -> int:
    """The conversation this invocation is bound to (see the module docstring); raises
    :class:`ApiError` (an unknown conversation, a model the daemon refuses)."""
    if new:
        return int(app.api.post("/brain/conversations", {"model": _model_body(model or ""), "activate": activate})["id"])
    if open_id is not None:
        app.api.get(f"/brain/conversations/{open_id}")
        conv_id = open_id
        if activate:
            app.api.post(f"/brain/conversations/{conv_id}/open")
    else:
        try:
            conv_id = int(app.api.get("/brain/active")["conversation"]["id"])
        except ApiError as exc:
            if exc.code != "no_active_conversation":
                raise
            return int(app.api.post("/brain/conversations", {"model": _model_body(model or ""), "activate": True})["id"])
    if model:
        app.api.patch(f"/brain/conversations/{conv_id}", {"model": _model_body(model)})
    return conv_id


def _repl(app: App, cid: int) -> None:
    """The interactive session. With stdin not a terminal (messages piped in), a turn that
    failed makes the command exit 1 once stdin ends (after the remaining messages ran)."""
    interactive = sys.stdin.isatty()
    failed: str | None = None
    note(f"conversation {cid} — /help for commands, /exit or Ctrl-D to leave")
    while True:
        try:
            text = input("you> ") if interactive else input()
        except EOFError:
            if failed is not None and not interactive:
                raise Failure(failed, 1) from None
            return
        except KeyboardInterrupt:
            click.echo()
            return
        text = text.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            if failed is not None and not interactive:
                raise Failure(failed, 1)
            return
        if text == "/new":
            cid = _resolve(app, None, True, None)
            note(f"conversation {cid}")
            continue
        if text.startswith("/open "):
            arg = text.split()[1] if len(text.split()) > 1 else ""
            try:
                cid = _resolve(app, int(arg), False, None) if arg.isascii() and arg.isdigit() else cid
            except ApiError as exc:
                note(f"error: {exc.message}")
            note(f"conversation {cid}")
            continue
        if text == "/list":
            table(app.api.get("/brain/conversations")["items"], COLUMNS)
            continue
        try:
            outcome = _run(app, cid, text, interactive=interactive)
            if outcome.error is not None and outcome.error != "aborted":
                failed = outcome.error
        except ApiError as exc:
            note(f"error: {exc.message}")
            failed = exc.message


@click.command()
@click.option("-m", "--message", help="Send one message, print the reply and exit.")
@click.option("--model", help="PROVIDER/MODEL for this conversation (validated; 'default' clears it).")
@click.option("--list", "list_", is_flag=True, help="List your conversations.")
@click.option("--open", "open_id", type=int, help="Continue conversation ID.")
@click.option("--new", is_flag=True, help="Start a new conversation (bound to this invocation; see --activate).")
@click.option("--activate", is_flag=True, help="Also make the conversation your active one (moves the web dock's pointer).")
@click.option("--goal", help="Run a goal headless in a new conversation.")
@click.option("--max-turns", type=click.IntRange(1, 500), help="Turn budget of --goal.")
@click.option("--json", "as_json", is_flag=True, help="JSON output (--list, --link).")
@click.option("--link", "link_code", metavar="CODE", help="Link a chat-platform sender to you with its one-time code.")
@click.pass_obj
def chat(
    app: App,
    message: str | None,
    model: str | None,
    list_: bool,
    open_id: int | None,
    new: bool,
    activate: bool,
    goal: str | None,
    max_turns: int | None,
    as_json: bool,
    link_code: str | None,
) -> None:
    """Chat with the brain (interactive unless -m, --goal, --list or --link)."""
    if link_code is not None:
        link = app.api.post("/brain/channels/link", {"code": link_code})
        if as_json:
            echo_json(link)
        else:
            click.echo(f"linked {link['platform']}:{link['platform_user']} to you; its messages now reach your active conversation")
        return
    if list_:
        items = app.api.get("/brain/conversations")["items"]
        echo_json(items) if as_json else table(items, COLUMNS)
        return
    if goal is not None:
        cid = _resolve(app, None, True, model, activate)
        note(f"conversation {cid}")
        outcome = _run(app, cid, f"/goal {goal}", interactive=sys.stdin.isatty(), max_turns=max_turns)
        final = outcome.goal
        state = (final or {}).get("state")
        if state != "done":
            raise Failure(f"goal {state or 'not finished'}" + (f": {final.get('pause_reason')}" if final and final.get("pause_reason") else ""), 1)
        click.echo(f"goal done: {final.get('evidence')}")  # type: ignore[union-attr]
        return
    cid = _resolve(app, open_id, new, model, activate)
    if message is not None:
        note(f"conversation {cid}")
        outcome = _run(app, cid, message, interactive=sys.stdin.isatty(), report_errors=False)
        if outcome.error == "aborted":
            raise Failure("aborted", 130)
        if outcome.error is not None:
            raise Failure(outcome.error, 1)
        return
    _repl(app, cid)

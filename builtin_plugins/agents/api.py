"""HTTP and WebSocket routes of the agents plugin (mounted at these paths by the daemon).

=====================================  ===========================================================
``GET /sessions``                       agent sessions the caller may see (``?task=&state=``);
                                        ``supervised`` false (and ``signal``
                                        ``unsupervised``) while no deriver watches it;
                                        ``decision_id``: the oldest open decision of a
                                        running session (``None`` if none)
``GET /sessions/{name}``                one session, with ``capture`` (the rendered screen) and
                                        ``classification``
``POST /sessions/{name}/keys``          ``{"keys": [key names]}`` or ``{"text": str, "submit": bool}``
                                        (admin or the task's owner)
``POST /sessions/{name}/ticket``        ``{"input": bool}`` → ``{"ticket", "expires_in", "input"}``
``WS /sessions/{name}/terminal``        ``?ticket=…``: the initial capture, then live output;
                                        input frames are typed only with an input ticket
                                        (raw key bytes, see :func:`type_bytes`); on a
                                        read-only ticket they are read and dropped; the
                                        viewer's access is re-checked every 0.4 s (revoked
                                        token, deleted user, lost project or right to
                                        type: the socket is closed, code 1008)
``GET /decisions``                      ``?status=&task=&kind=&limit=&cursor=``
``GET /decisions/{id}``                 one decision
``POST /decisions/{id}``                ``{"action": approve|reject|choice|answer|escalate,
                                        "choice"?, "text"?, "rationale"?}``
``POST /agent/permission``              agent tokens only: a permission request of the
                                        token's running agent, as its CLI's channel posts
                                        it (Claude Code: the ``PermissionRequest`` hook
                                        input); it becomes a ``prompt`` decision and the
                                        reply — streamed once the verdict is given — is
                                        what the CLI expects (``?format=verdict``:
                                        ``{"verdict": allow|deny|none, "message",
                                        "decision_id"}``, for the MCP permission tool)
=====================================  ===========================================================

Visibility: admins see everything; members see what belongs to projects they may see; agent
tokens see nothing here. Acting (keys, decisions, input tickets): admins and the task's owner.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from elowen_sdk import HTTPError, Principal, Request, Response, Route, WebSocketRoute
from elowen_sdk.pagination import decode_cursor, encode_cursor
from elowen_sdk.services.agents import DecideError
from elowen_sdk.services.tasks import TasksService
from elowen_sdk.services.users import UsersService

from .service import AgentsService

__all__ = ["INPUT_CHUNK", "MAX_INPUT_FRAME", "routes", "type_bytes"]

log = logging.getLogger("elowen.plugin.agents")

MAX_TEXT = 16_384

MAX_INPUT_FRAME = 65_536
"""Largest terminal input frame typed (bytes, UTF-8); a larger one is dropped whole."""

INPUT_CHUNK = 256
"""Bytes per ``send-keys -H`` command (keeps each control-client command line short)."""


async def type_bytes(tmux: Any, target: str, data: bytes) -> None:
    """Write ``data`` to the pane at ``target`` (an exact target or pane id) byte for byte, as
    if typed on its terminal: ``send-keys -H 1b 5b 41…`` (tmux >= 3.0; each hex value is
    written to the pane unchanged). This is what a terminal emulator's keystrokes need: Enter
    is ``\\r``, arrows and Escape are escape sequences, Ctrl-C is ``\\x03``, and a paste
    arrives already bracketed by the browser's xterm.js when the program asked for bracketed
    paste. The text path (``send_text``) would instead paste control characters through a
    bracketed paste buffer, turning Enter into a newline in the composer.

    Raises:
        TmuxCommandError: tmux refused (e.g. no such pane).
    """
    for start in range(0, len(data), INPUT_CHUNK):
        chunk = data[start : start + INPUT_CHUNK]
        await tmux.command("send-keys", "-t", target, "-H", *(f"{b:02x}" for b in chunk))


def _int(query: Mapping[str, str], key: str, default: int | None = None, *, lo: int = 0, hi: int = 10**18) -> int | None:
    value = query.get(key)
    if value is None or value == "":
        return default
    if not value.isdigit() or not lo <= int(value) <= hi:
        raise HTTPError(422, "validation_error", f"{key} must be an integer in {lo}..{hi}")
    return int(value)


RECHECK = 0.4
"""Seconds between re-checks of an open terminal's access (a revoked token, a deleted user,
a lost project or a lost right to type ends it within this)."""

_MAX_PENDING_TICKETS = 1_024


class _Api:
    def __init__(self, service: Callable[[], AgentsService]) -> None:
        self._service = service
        self._ticket_tokens: dict[str, int | None] = {}  # ticket → token it was issued to

    @property
    def svc(self) -> AgentsService:
        return self._service()

    # ---------------------------------------------------------------- access

    def _task(self, task_id: int | None) -> dict[str, Any] | None:
        if task_id is None:
            return None
        try:  # {"id", "project_id", "state", "owner_id"}: one cheap query per listed row
            return self.svc.ctx.service(TasksService).exists(int(task_id))
        except LookupError:  # no tasks service
            return None

    def _can_see(self, me: Principal, task_id: int | None) -> bool:
        if me.is_admin:
            return True
        task = self._task(task_id)
        return task is not None and me.can_see_project(task["project_id"])

    def _can_act(self, me: Principal, task_id: int | None) -> bool:
        """The one acting rule (:meth:`elowen_sdk.Principal.may_act`) on the task's owner."""
        if me.is_admin:
            return True
        task = self._task(task_id)
        return task is not None and me.may_act(task["owner_id"], task["project_id"])

    def _session(self, me: Principal, name: str) -> dict[str, Any]:
        row = self.svc.session(name)
        if row is None or not self._can_see(me, row["task_id"]):
            raise HTTPError(404, "not_found", f"no agent session {name!r}")
        return row

    def _public(self, row: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in row.items() if k != "env"}
        try:
            out["socket"] = self.svc.tmux().socket  # for `tmux -L <socket> attach -t =<session>:`
        except LookupError:
            out["socket"] = None
        return out

    # ---------------------------------------------------------------- sessions

    def list_sessions(self, req: Request) -> Any:
        me = req.principal
        task_id = _int(req.query, "task")
        state = req.query.get("state") or None
        if state is not None and state not in ("running", "exited", "ended"):
            raise HTTPError(422, "validation_error", "state must be running, exited or ended")
        rows = self.svc.sessions(task_id=task_id, state=state, limit=500)
        items = [self._public(r) for r in rows if self._can_see(me, r["task_id"])]
        for item in items:  # the decision a waiting agent needs (`elowen decide ID`)
            waiting = self.svc.decisions.open_for_session(item["session"]) if item.get("state") == "running" else []
            item["decision_id"] = waiting[0]["id"] if waiting else None
        return {"items": items, "next_cursor": None}

    async def get_session(self, req: Request) -> Any:
        row = self._session(req.principal, req.params["name"])
        out = self._public(row)
        out["capture"] = None
        out["classification"] = None
        if row["state"] == "running":
            try:
                screen = await self.svc.tmux().capture(row["pane_id"] or row["session"])
            except Exception as exc:
                log.debug("capture of %s failed: %s", row["session"], exc)
            else:
                out["capture"] = screen
                with contextlib.suppress(LookupError):  # its provider plugin is disabled
                    out["classification"] = self.svc.executors.provider(row["provider"]).classify(screen).to_dict()
        return out

    async def send_keys(self, req: Request) -> Any:
        row = self._session(req.principal, req.params["name"])
        if not self._can_act(req.principal, row["task_id"]):
            raise HTTPError(403, "forbidden", "only an admin or the task's owner may type into its agent")
        if row["state"] != "running":
            raise HTTPError(409, "session_ended", f"agent session {row['session']} is {row['state']}")
        body = req.json if isinstance(req.json, dict) else None
        if body is None or set(body) - {"keys", "text", "submit"} or (("keys" in body) == ("text" in body)):
            raise HTTPError(422, "validation_error", 'send {"keys": [names]} or {"text": str, "submit"?: bool}')
        tmux = self.svc.tmux()
        target = row["pane_id"] or row["session"]
        if "keys" in body:
            keys = body["keys"]
            if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys) or len(keys) > 64:
                raise HTTPError(422, "validation_error", "keys must be a list of 1..64 key names")
            try:
                await tmux.send_keys(target, *keys)
            except ValueError as exc:
                raise HTTPError(422, "validation_error", str(exc)) from None
            sent: dict[str, Any] = {"keys": keys}
        else:
            text, submit = body["text"], body.get("submit", True)
            if not isinstance(text, str) or not text or len(text) > MAX_TEXT or not isinstance(submit, bool):
                raise HTTPError(422, "validation_error", f"text must be a non-empty string of at most {MAX_TEXT} characters")
            result = await tmux.send_text(target, text, submit)
            sent = {"text_chars": len(text), "submitted": submit, "pasted": result.pasted}
        self.svc.ctx.store.audit(f"user:{req.principal.user_id}", "agents.keys", row["session"], "ok", sent)
        return {"session": row["session"], "sent": sent}

    async def ticket(self, req: Request) -> Any:
        me = req.principal
        row = self._session(me, req.params["name"])
        body = req.json if isinstance(req.json, dict) else {}
        want_input = body.get("input", False)
        if not isinstance(want_input, bool):
            raise HTTPError(422, "validation_error", "input must be a boolean")
        if want_input and not self._can_act(me, row["task_id"]):
            raise HTTPError(403, "forbidden", "only an admin or the task's owner may get an input ticket")
        ticket = self.svc.issue_ticket(row["session"], input=want_input, user_id=me.user_id)
        while len(self._ticket_tokens) >= _MAX_PENDING_TICKETS:  # unredeemed ones expire anyway
            self._ticket_tokens.pop(next(iter(self._ticket_tokens)))
        self._ticket_tokens[ticket] = me.token_id
        out: dict[str, Any] = {"ticket": ticket, "expires_in": self.svc.config.ticket_ttl, "input": want_input}
        try:  # the pane's size, so a viewer draws the screen at the agent's own size
            info = await self.svc.tmux().pane_info(row["pane_id"] or row["session"])
            out.update(cols=info.width, rows=info.height)
        except Exception as exc:  # an ended pane still gets its ticket (the stream says it ended)
            log.debug("no pane size for %s: %s", row["session"], exc)
        return Response(out, status=201)

    async def terminal(self, ws: Any) -> None:
        name = ws.params.get("name", "")
        token_id = self._ticket_tokens.pop(ws.query.get("ticket", ""), None)
        grant = self.svc.redeem_ticket(ws.query.get("ticket", ""), name)
        row = self.svc.session_store.by_name(name) if grant is not None else None
        if grant is None or row is None or not self._still_allowed(token_id, row["task_id"], grant.input):
            await ws.close(1008)
            return
        await ws.accept()
        tmux = self.svc.tmux()
        target = row["pane_id"] or name
        if grant.input:
            self.svc.ctx.store.audit(f"user:{grant.user_id}", "agents.terminal_input", name, "ok", {"input": True})
        try:
            await ws.send(await tmux.capture(target, escapes=True))
            stream = await tmux.open_stream(name)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._inbound, ws, tmux, target if grant.input else None, name, nursery.cancel_scope)
                    nursery.start_soon(self._watch, token_id, row["task_id"], grant.input, name, nursery.cancel_scope)
                    async for event in stream:
                        if event.lost:
                            await ws.send(await tmux.capture(target, escapes=True))
                        else:
                            await ws.send(event.data)
                    nursery.cancel_scope.cancel()
            finally:
                stream.close()
        except Exception as exc:  # the client went away, or the session ended
            log.debug("terminal of %s closed: %s", name, exc)
        finally:
            code = 1000 if self._still_allowed(token_id, row["task_id"], grant.input) else 1008  # 1008: policy (revoked)
            with contextlib.suppress(Exception):
                await ws.close(code)

    def _still_allowed(self, token_id: int | None, task_id: int | None, typing: bool) -> bool:
        """Whether the ticket's token still holds, its user still sees the task and (for an
        input ticket) may still act on it. Asked at redemption and every :data:`RECHECK` s."""
        try:
            users = self.svc.ctx.service(UsersService)
        except LookupError:
            return False  # nobody can say who the viewer is now: refuse
        me = users.principal(token_id) if token_id is not None else None
        if me is None or me.scope != "full":
            return False
        return self._can_act(me, task_id) if typing else self._can_see(me, task_id)

    async def _watch(self, token_id: int | None, task_id: int | None, typing: bool, name: str, scope: trio.CancelScope) -> None:
        """End the relay when :meth:`_still_allowed` turns false."""
        while True:
            await trio.sleep(RECHECK)
            if not self._still_allowed(token_id, task_id, typing):
                log.info("terminal of %s closed: the viewer's token or access was revoked", name)
                scope.cancel()
                return

    @staticmethod
    async def _inbound(ws: Any, tmux: Any, target: str | None, name: str, scope: trio.CancelScope) -> None:
        """Read the client's frames until it goes away (then end the relay): typed into
        ``target`` byte for byte, or dropped when ``target`` is ``None`` (a read-only ticket).
        Frames are always read, so a read-only client that closes is noticed at once."""
        try:
            while True:
                data = await ws.receive()
                raw = data if isinstance(data, bytes) else str(data).encode("utf-8")
                if target is None:
                    log.debug("terminal of %s: dropped %d input bytes (read-only ticket)", name, len(raw))
                elif len(raw) > MAX_INPUT_FRAME:
                    log.warning("terminal of %s: dropped an input frame of %d bytes (max %d)", name, len(raw), MAX_INPUT_FRAME)
                elif raw:
                    await type_bytes(tmux, target, raw)
        finally:
            scope.cancel()

    # ---------------------------------------------------------------- decisions

    def list_decisions(self, req: Request) -> Any:
        me = req.principal
        status = req.query.get("status") or None
        kind = req.query.get("kind") or None
        task_id = _int(req.query, "task")
        limit = _int(req.query, "limit", 50, lo=1, hi=500)
        after = decode_cursor(req.query.get("cursor"))  # BadCursor: 400 bad_cursor
        items: list[dict[str, Any]] = []
        scan, more = after, False
        while not more:
            batch = self.svc.decisions.list_decisions(status=status, task_id=task_id, kind=kind, after=scan, limit=200)
            if not batch:
                break
            for d in batch:
                scan = d["id"]
                if not self._can_see(me, d["task_id"]):
                    continue
                if len(items) == limit:
                    more = True
                    break
                items.append(d)
        return {"items": items, "next_cursor": encode_cursor(items[-1]["id"]) if more else None}

    def get_decision(self, req: Request) -> Any:
        did = _int(req.params, "id")
        d = self.svc.decisions.get(did) if did is not None else None
        if d is None or not self._can_see(req.principal, d["task_id"]):
            raise HTTPError(404, "not_found", f"decision {req.params['id']} not found")
        return d

    async def decide(self, req: Request) -> Any:
        d = self.get_decision(req)
        if not self._can_act(req.principal, d["task_id"]):
            raise HTTPError(403, "forbidden", "only an admin or the task's owner may decide")
        body = req.json if isinstance(req.json, dict) else None
        if body is None or set(body) - {"action", "choice", "text", "rationale"}:
            raise HTTPError(422, "validation_error", 'send {"action": approve|reject|choice|answer|escalate, "choice"?, "text"?, "rationale"?}')
        action, choice, text, rationale = body.get("action"), body.get("choice"), body.get("text"), body.get("rationale")
        if action not in ("approve", "reject", "choice", "answer", "escalate"):
            raise HTTPError(422, "validation_error", "action must be approve, reject, choice, answer or escalate")
        if choice is not None and (not isinstance(choice, int) or isinstance(choice, bool) or not 1 <= choice <= 99):
            raise HTTPError(422, "validation_error", "choice must be an option number 1..99")
        for key, value in (("text", text), ("rationale", rationale)):
            if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
                raise HTTPError(422, "validation_error", f"{key} must be a string of at most {MAX_TEXT} characters")
        who = f"user:{req.principal.user_id}"
        try:
            return await self.svc.decide(d["id"], action, choice=choice, text=text, rationale=rationale, decided_by=who)
        except DecideError as exc:
            raise HTTPError(exc.status, exc.code, exc.message) from None

    # ---------------------------------------------------------------- permission channel

    async def permission(self, req: Request) -> Any:
        me = req.principal
        if me.scope != "agent" or me.task_id is None:
            raise HTTPError(403, "agent_only", "only an agent token sends its CLI's permission requests")
        body = req.json if isinstance(req.json, dict) else None
        if body is None:
            raise HTTPError(422, "validation_error", "send the permission request as a JSON object")
        fmt = req.query.get("format") or "cli"
        if fmt not in ("cli", "verdict"):
            raise HTTPError(422, "validation_error", "format must be cli or verdict")
        svc = self.svc
        row = svc.session_store.latest_for_task(int(me.task_id))
        if row is None or row["state"] != "running":
            raise HTTPError(409, "not_running", f"task {me.task_id} has no running agent")
        try:
            provider = svc.executors.provider(str(row["provider"]))
        except LookupError:
            raise HTTPError(409, "executor_unavailable", f"executor {row['provider']!r} is not enabled") from None
        raw = provider.permission_request(body)
        if raw is None:
            raise HTTPError(422, "not_a_permission_request", f"{row['provider']} did not recognise this permission request")
        extra = {k: body[k] for k in ("tool_use_id",) if isinstance(body.get(k), str)}
        decisions = svc.decisions
        decision = decisions.open_permission(
            task_id=int(me.task_id), session=row, raw=raw, channel="mcp" if fmt == "verdict" else "hook", cli=str(provider.cli), extra=extra
        )

        def reply(verdict: str, message: str | None, did: int | None) -> Any:
            if fmt == "verdict":
                return {"verdict": verdict, "message": message, "decision_id": did}
            return provider.permission_reply(verdict, message, body)

        if decision is None:
            return reply("none", None, None)
        did = int(decision["id"])
        wait = float(svc.config.channel_wait)

        async def stream() -> Any:
            verdict, message, _ = await decisions.channel.wait(did, wait)
            yield json.dumps(reply(verdict, message, did))

        # streamed: the verdict may take longer than the daemon's response timeout
        return Response(stream=stream(), content_type="application/json")


def routes(service: Callable[[], AgentsService]) -> list[Route | WebSocketRoute]:
    """The plugin's routes; ``service()`` returns the current :class:`AgentsService`."""
    api = _Api(service)
    return [
        Route("GET", "/sessions", api.list_sessions, summary="List agent sessions"),
        Route("GET", "/sessions/{name}", api.get_session, summary="An agent session with its current screen"),
        Route("POST", "/sessions/{name}/keys", api.send_keys, summary="Type keys or text into an agent session"),
        Route("POST", "/sessions/{name}/ticket", api.ticket, summary="A single-use ticket for the live terminal"),
        WebSocketRoute("/sessions/{name}/terminal", api.terminal, summary="Live terminal of an agent session", anonymous=True),
        Route("GET", "/decisions", api.list_decisions, summary="List decisions"),
        Route("GET", "/decisions/{id}", api.get_decision, summary="One decision"),
        Route("POST", "/decisions/{id}", api.decide, summary="Answer a decision"),
        Route(
            "POST", "/agent/permission", api.permission, summary="A permission request of the caller's agent CLI (structured channel); waits for the verdict"
        ),
    ]

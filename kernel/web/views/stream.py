"""Relays of the daemon's streams: ``GET /events`` (SSE) and the brain's streamed chat turns.

Event stream (WHATWG HTML, "Server-sent events"): one upstream ``GET /events`` per browser
stream, opened with the session's token and the browser's ``Last-Event-ID`` (header, or
``?last_event_id=`` when our script reconnects by itself). Blocks are passed through
unchanged, except comments, which an ``EventSource`` never reports: the daemon's
``: connected`` becomes ``event: ready`` and ``: heartbeat`` becomes ``event: heartbeat`` (no
``id:`` line, so the browser's last event id is kept). An upstream silent for longer than
the stream window ends the browser stream; the page then shows "reconnecting…" and resumes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import trio
from quart import Blueprint, Response, render_template, request

from ..state import web_state
from .common import api, login_required, me

__all__ = ["BRAIN_OFF", "bp", "translate_block"]

log = logging.getLogger(__name__)

bp = Blueprint("stream", __name__)

_PASS_PARAMS = ("types", "project")

#: The dock's notice (and a turn's error) while the brain plugin's routes are missing.
BRAIN_OFF = "The brain plugin is off — turn it on in Settings → Plugins."


def translate_block(lines: list[str]) -> str | None:
    """One SSE block (its lines, without the blank terminator) → what the browser gets, or
    ``None`` to drop it.

    An event ``id: N / event: T / ts: S / data: D`` becomes ``id: N / data: {"type": T, "data":
    D, "ts": S}`` (``ts``: when the daemon published it, UTC ISO 8601):
    an ``EventSource`` reports only the event names it was told to listen to, so every event
    travels as the default ``message`` with its type inside. Comments become the named events
    ``ready`` (the daemon's ``: connected``) and ``heartbeat``."""
    fields = [ln for ln in lines if not ln.startswith(":")]
    comments = " ".join(ln[1:].strip() for ln in lines if ln.startswith(":"))
    named = ""
    if "connected" in comments:
        named = "event: ready\ndata: {}\n\n"
    elif "heartbeat" in comments:
        named = "event: heartbeat\ndata: {}\n\n"
    if not fields:
        return named or None
    kind, data, other, ts = "message", [], [], None
    for ln in fields:
        name, _, value = ln.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            kind = value
        elif name == "ts":
            ts = value
        elif name == "data":
            data.append(value)
        else:
            other.append(ln)
    if not data:
        return ("\n".join(other) + "\n\n" if other else "") + named or None
    # JSON never holds a raw newline inside a string: joined lines are only whitespace apart.
    payload = " ".join(data)
    stamp = f',"ts":{json.dumps(ts)}' if ts else ""
    return "\n".join([*other, f'data: {{"type":{json.dumps(kind)},"data":{payload}{stamp}}}']) + "\n\n" + named


def _last_id(block: str) -> int | None:
    for line in block.splitlines():
        if line.startswith("id:"):
            text = line[3:].strip()
            return int(text) if text.isdigit() else None
    return None


@bp.get("/events")
@login_required
async def events() -> Response:
    """The page's event stream (see the module docstring). 502 when the daemon does not
    answer; the daemon's own status (401, 422…) otherwise."""
    state = web_state()
    session = me()
    headers = {"Authorization": f"Bearer {session.token}", "Accept": "text/event-stream"}
    last = request.headers.get("Last-Event-ID") or request.args.get("last_event_id")
    if request.args.get("backlog", "").isdigit() and not last:
        last = str(max(0, state.last_event_id - int(request.args["backlog"])))
    if last:
        headers["Last-Event-ID"] = last
    params = {k: request.args[k] for k in _PASS_PARAMS if request.args.get(k)}
    window = state.config.stream_window
    client = state.daemon.client
    upstream = client.build_request("GET", "/events", params=params, headers=headers, timeout=httpx.Timeout(5.0, read=window))
    try:
        resp = await client.send(upstream, stream=True)
    except httpx.HTTPError as exc:
        log.info("event stream: the daemon did not answer: %s", exc)
        return Response('{"error": {"code": "daemon_down", "message": "the daemon is not answering"}}', status=502, mimetype="application/json")
    if resp.status_code != 200:
        body = await resp.aread()
        await resp.aclose()
        return Response(body, status=resp.status_code, mimetype="application/json")

    async def relay() -> AsyncIterator[bytes]:
        state.streams += 1
        try:
            block: list[str] = []
            async for line in resp.aiter_lines():
                line = line.rstrip("\r\n")
                if line:
                    block.append(line)
                    continue
                if not block:
                    continue
                out = translate_block(block)
                block = []
                if out is None:
                    continue
                ident = _last_id(out)
                if ident is not None and ident > state.last_event_id:
                    state.last_event_id = ident
                yield out.encode()
        except httpx.ReadTimeout:
            log.info("event stream: the daemon was silent for %.0f s; ending the stream", window)
        except httpx.HTTPError as exc:
            log.info("event stream: the daemon stream ended: %s", exc)
        finally:
            state.streams -= 1
            with trio.CancelScope(shield=True):
                await resp.aclose()

    response = Response(relay(), status=200, mimetype="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.timeout = None  # Quart cuts streamed responses after RESPONSE_TIMEOUT otherwise
    return response


# ---------------------------------------------------------------------- chat (brain)


@bp.get("/chat/view")
@login_required
async def chat_view() -> str:
    """The dock's conversation (the brain's active one: pointer-based). With none yet (404
    ``no_active_conversation``) the dock shows an empty one; the first turn creates it."""
    reply = await api("GET", "/brain/active")
    none_yet = reply.status == 404 and isinstance(reply.body, dict) and (reply.body.get("error") or {}).get("code") == "no_active_conversation"
    view = reply.body if reply.ok else {"conversation": {"id": ""}, "messages": []} if none_yet else None
    if none_yet and view is not None:  # no conversation yet: the model a first turn would use
        model = await api("GET", "/brain/model")
        view["model"] = model.body if model.ok else None
    approvals = await api("GET", "/brain/approvals") if view is not None else None
    return await render_template(
        "partials/chat.html",
        chat_missing=view is None,
        brain_off=reply.missing and not none_yet,
        view=view,
        approvals=approvals.items() if approvals else [],
        brain_off_text=BRAIN_OFF,
    )


@bp.post("/chat/turn")
@login_required
async def chat_turn() -> Response:
    """Relay one streamed brain turn: NDJSON, one event object per line (the brain's
    ``POST /brain/turn``). Body: ``{"text": str}``."""
    body: Any = await request.get_json(silent=True)
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        return Response('{"error": {"code": "validation_error", "message": "type a message"}}', status=422, mimetype="application/json")
    client = web_state().daemon.client
    upstream = client.build_request(
        "POST", "/brain/turn", json={"text": text}, headers={"Authorization": f"Bearer {me().token}"}, timeout=httpx.Timeout(10.0, read=None)
    )
    try:
        resp = await client.send(upstream, stream=True)
    except httpx.HTTPError:
        return Response('{"error": {"code": "daemon_down", "message": "the daemon is not answering"}}', status=502, mimetype="application/json")
    if resp.status_code != 200:
        data = await resp.aread()
        await resp.aclose()
        if resp.status_code == 404:  # no route: the brain plugin is disabled or not installed
            return Response(json.dumps({"error": {"code": "brain_off", "message": BRAIN_OFF}}), status=404, mimetype="application/json")
        return Response(data, status=resp.status_code, mimetype="application/json")

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            yield (json.dumps({"type": "brain.error", "message": f"the stream broke: {exc}"}) + "\n").encode()
        finally:
            with trio.CancelScope(shield=True):
                await resp.aclose()

    response = Response(relay(), status=200, mimetype="application/x-ndjson", headers={"Cache-Control": "no-cache"})
    response.timeout = None
    return response


@bp.post("/chat/abort")
@login_required
async def chat_abort() -> Response:
    reply = await api("POST", "/brain/abort")
    return Response(json.dumps(reply.body), status=reply.status, mimetype="application/json")

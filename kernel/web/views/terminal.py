"""The live agent terminal: a WebSocket relay from the browser to the daemon.

Browser ``WS /terminal/<session>?input=0|1`` (same origin, session cookie) → the BFF asks the
daemon for a single-use ticket (``POST /sessions/<session>/ticket {"input": bool}``; input is
granted only to admins and the task's owner — otherwise the terminal falls back to
read-only) → ``WS /sessions/<session>/terminal?ticket=…`` on the daemon. Frames are relayed
both ways unchanged; the first frame to the browser is a JSON line ``{"input": bool}`` saying
whether typing is allowed. On a read-only connection the browser's frames are read and dropped
here (and the daemon, holding a read-only ticket, would drop them too). The page's "Allow
typing" toggle (``static/terminal.js``) switches by reconnecting with the other ``input=``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from urllib.parse import quote, urlsplit

import trio
from quart import Blueprint, websocket
from trio_websocket import ConnectionClosed, HandshakeError, open_websocket_url

from ..sessions import COOKIE_NAME
from ..state import web_state
from ..upstream import DaemonDown

__all__ = ["bp"]

log = logging.getLogger(__name__)

bp = Blueprint("terminal", __name__)


def _same_origin() -> bool:
    origin = websocket.headers.get("Origin")
    if not origin:
        return False
    parts = urlsplit(origin)
    return parts.netloc == websocket.host


@bp.websocket("/terminal/<name>")
async def terminal(name: str) -> None:
    state = web_state()
    session = state.sessions.get(websocket.cookies.get(COOKIE_NAME))
    if session is None or not _same_origin():
        await websocket.close(1008)
        return
    want_input = websocket.args.get("input") == "1"
    try:
        reply = await state.daemon.call(session.token, "POST", f"/sessions/{quote(name, safe='')}/ticket", json={"input": want_input})
        if reply.status == 403 and want_input:
            want_input = False
            reply = await state.daemon.call(session.token, "POST", f"/sessions/{quote(name, safe='')}/ticket", json={"input": False})
    except DaemonDown:
        await websocket.close(1011)
        return
    if not reply.ok:
        await websocket.close(1008)
        return
    ticket = reply.body["ticket"]
    base = state.daemon.base_url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
    url = f"{base}/sessions/{quote(name, safe='')}/terminal?ticket={quote(ticket, safe='')}"
    await websocket.accept()
    size = {k: reply.body[k] for k in ("cols", "rows") if isinstance(reply.body.get(k), int) and 0 < reply.body[k] <= 1000}
    await websocket.send(json.dumps({"input": want_input, **size}))
    try:
        async with open_websocket_url(url) as upstream, trio.open_nursery() as nursery:

            async def to_browser() -> None:
                with contextlib.suppress(ConnectionClosed):
                    while True:
                        await websocket.send(await upstream.get_message())
                nursery.cancel_scope.cancel()

            async def to_daemon() -> None:
                while True:
                    data = await websocket.receive()
                    if want_input:
                        await upstream.send_message(data)

            nursery.start_soon(to_browser)
            nursery.start_soon(to_daemon)
    except* (HandshakeError, ConnectionClosed, OSError) as group:
        log.info("terminal %s: the daemon side closed: %s", name, group.exceptions[0])
    await websocket.close(1000)

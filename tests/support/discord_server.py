"""A scripted Discord server for tests: the real gateway protocol over a real WebSocket and the
REST calls a bot makes, on 127.0.0.1.

Wire protocol as documented by Discord (API v10, "Gateway" and "Opcodes and Status Codes"
pages) and as discord.py 2.7 speaks it:

* Gateway (``ws://…/gateway``): the server sends HELLO (op 10, ``heartbeat_interval`` in ms);
  the client answers IDENTIFY (op 2) or RESUME (op 6); IDENTIFY gets the READY dispatch
  (op 0, ``t: READY``: ``session_id``, ``resume_gateway_url``, ``user``, ``guilds``,
  ``application``) then GUILD_CREATE for the scripted guild; RESUME with a known session gets
  the missed dispatches replayed then RESUMED, an unknown session gets INVALID_SESSION (op 9,
  ``d: false``). Every HEARTBEAT (op 1) is answered with HEARTBEAT_ACK (op 11). Dispatches carry
  a sequence number ``s``. RECONNECT (op 7) asks the client to resume elsewhere.
* REST (``http://…/api/v10``): ``GET /users/@me``, ``GET /oauth2/applications/@me``,
  ``GET /gateway``, ``GET /gateway/bot``, ``POST /channels/{id}/messages`` (create),
  ``PATCH /channels/{id}/messages/{id}`` (edit), ``POST /users/@me/channels`` (open a DM: the DM
  channel of user ``U`` is ``"6" + U[1:]``, the same as :meth:`DiscordServer.message` uses),
  ``POST /interactions/{id}/{token}/callback`` (the answer to an INTERACTION_CREATE: recorded,
  see :meth:`DiscordServer.callbacks`), ``PUT /applications/{id}/commands`` (the bot's global
  slash commands, kept in :attr:`DiscordServer.commands`), ``GET /guilds/{id}/channels``,
  ``POST /channels/{id}/threads`` and ``POST /channels/{id}/messages/{id}/threads`` (start a
  thread: :attr:`DiscordServer.threads`), ``PUT /channels/{id}/messages/pins/{id}`` (pin:
  :attr:`DiscordServer.pins`).
  Each call is recorded in :attr:`DiscordServer.rest` with its monotonic time. Every answer
  carries Discord's rate-limit headers (``X-RateLimit-Limit``, ``-Remaining``, ``-Reset``,
  ``-Reset-After``, ``-Bucket``); a bucket is one route per channel with ``rate_limit``
  requests per ``rate_window`` seconds (Discord's message routes: 5 per 5 s); a call over it
  answers 429 with ``retry_after`` and is counted in :attr:`DiscordServer.limited`.

Test controls: :meth:`DiscordServer.message` (a MESSAGE_CREATE from a user),
:meth:`DiscordServer.interaction` (an INTERACTION_CREATE: a slash command or its autocomplete),
:meth:`DiscordServer.go_zombie` (the connection stays open but the server sends nothing, not
even HEARTBEAT_ACKs: the "connected but deaf" failure), :meth:`DiscordServer.send_reconnect`.

The server runs an aiohttp application on its own asyncio loop in a daemon thread, so sync and
trio tests alike can use it::

    with DiscordServer() as server:
        ...  # point the bot at server.api_base / server.gateway_url
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["BOT_ID", "GUILD_ID", "DiscordServer", "RestCall", "user_object"]

BOT_ID = "900000000000000001"
GUILD_ID = "800000000000000001"
APP_ID = BOT_ID
CLOSE_WAIT = 2.0
"""Seconds the server waits, when it stops, for a client to answer its WebSocket close (aiohttp
waits 10 s by default: a client slow to answer made a test's teardown time out) or to end its
open HTTP connections."""
_snowflakes = itertools.count(1_100_000_000_000_000_000)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # exactly "application/json": discord.py 2.7 decodes a body only for that content type
    return web.Response(body=json.dumps(data).encode("utf-8"), status=status, headers={"Content-Type": "application/json", **(headers or {})})


def snowflake() -> str:
    return str(next(_snowflakes))


def user_object(uid: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    """A Discord user object (API v10)."""
    return {"id": uid, "username": name, "global_name": name, "discriminator": "0", "avatar": None, "bot": bot}


@dataclass
class RestCall:
    """One REST call the bot made: ``method``, ``path`` (without ``/api/v10``), ``json`` body,
    ``at`` (``time.monotonic()`` when it arrived)."""

    method: str
    path: str
    json: Any
    at: float


@dataclass
class _Session:
    id: str
    seq: int = 0
    backlog: list[dict[str, Any]] = field(default_factory=list)  # dispatches sent, for RESUME replay


class DiscordServer:
    """The scripted server (see the module docstring).

    Args:
        heartbeat_interval: ms, sent in HELLO.
        channels: text channel ids of the scripted guild (``{id: name}``).
        roles: role ids of the scripted guild (``{id: name}``).
        rest_delay: seconds every REST answer waits (a slow Discord).
    """

    def __init__(
        self,
        *,
        heartbeat_interval: int = 1000,
        channels: dict[str, str] | None = None,
        roles: dict[str, str] | None = None,
        rest_delay: float = 0.0,
        rate_limit: int = 5,
        rate_window: float = 5.0,
    ) -> None:
        self.rate_limit = rate_limit
        self.rate_window = rate_window
        self.limited = 0
        self._buckets: dict[str, list[float]] = {}
        self.heartbeat_interval = heartbeat_interval
        self.channels = channels or {"700000000000000001": "general"}
        self.roles = roles or {}
        self.rest_delay = rest_delay
        self.rest: list[RestCall] = []
        self.messages: dict[str, dict[str, Any]] = {}  # id → the latest content the bot made
        self.identifies = 0
        self.resumes = 0
        self.heartbeats = 0
        self.connections = 0
        self.zombie = False
        self.refuse_token = False  # answer 401 to the login (GET /users/@me)
        self.sessions: dict[str, _Session] = {}
        self._ws: web.WebSocketResponse | None = None
        self._session: _Session | None = None
        self._pending: list[dict[str, Any]] = []  # dispatches queued while no session is live
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._lock = threading.Lock()
        self.port = 0
        self.on_rest: Callable[[RestCall], None] | None = None
        self.commands: list[dict[str, Any]] = []  # the application commands the bot registered
        self.threads: list[dict[str, Any]] = []  # threads the bot started
        self.pins: list[tuple[str, str]] = []  # (channel id, message id) the bot pinned

    # -- addresses ---------------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> DiscordServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def main() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name="discord-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the scripted Discord server did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, shutdown_timeout=CLOSE_WAIT)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _call(self, fn: Callable[[], Any]) -> Any:
        assert self._loop is not None

        async def run() -> Any:
            result = fn()
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    # -- test controls -----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether a client holds a live, identified (or resumed) gateway session."""
        return self._ws is not None and not self._ws.closed and self._session is not None

    def message(
        self,
        author: str,
        content: str,
        *,
        channel_id: str | None = None,
        dm: bool = False,
        mention: bool = False,
        role_ids: tuple[str, ...] = (),
        bot: bool = False,
        message_id: str | None = None,
        attachments: int = 0,
    ) -> str:
        """Dispatch a MESSAGE_CREATE from user ``author`` (a snowflake string); returns the
        message id. ``mention`` prefixes ``<@BOT_ID>`` and lists the bot in ``mentions``; ``dm``
        sends it in a DM channel of that user (no guild)."""
        mid = message_id or snowflake()
        data: dict[str, Any] = {
            "id": mid,
            "type": 0,
            "content": (f"<@{BOT_ID}> " if mention else "") + content,
            "author": user_object(author, f"user{author[-4:]}", bot=bot),
            "timestamp": "2026-12-01T00:00:00.000000+00:00",
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [user_object(BOT_ID, "elowen", bot=True)] if mention else [],
            "mention_roles": [],
            "attachments": [
                {"id": snowflake(), "filename": f"photo{i}.jpg", "size": 1024, "url": "http://127.0.0.1/x.jpg", "proxy_url": "http://127.0.0.1/x.jpg"}
                for i in range(attachments)
            ],
            "embeds": [],
            "pinned": False,
        }
        if dm:
            data["channel_id"] = "6" + author[1:]
        else:
            data["channel_id"] = channel_id or next(iter(self.channels))
            data["guild_id"] = GUILD_ID
            data["member"] = {"roles": list(role_ids), "joined_at": "2026-01-01T00:00:00+00:00", "deaf": False, "mute": False, "flags": 0}
        self._call(lambda: self._dispatch("MESSAGE_CREATE", data))
        return mid

    def interaction(
        self,
        author: str,
        command: str,
        options: dict[str, str] | None = None,
        *,
        channel_id: str | None = None,
        dm: bool = False,
        role_ids: tuple[str, ...] = (),
        focused: str | None = None,
    ) -> str:
        """Dispatch an INTERACTION_CREATE: user ``author`` ran slash command ``command`` with
        string ``options`` (type 2, APPLICATION_COMMAND), or is typing option ``focused`` of it
        (type 4, APPLICATION_COMMAND_AUTOCOMPLETE). Returns the interaction id; the bot's answer
        is in :meth:`callbacks`."""
        iid = snowflake()
        opts = [{"name": k, "type": 3, "value": v, **({"focused": True} if k == focused else {})} for k, v in (options or {}).items()]
        data: dict[str, Any] = {
            "id": iid,
            "application_id": APP_ID,
            "type": 4 if focused else 2,
            "data": {"id": snowflake(), "name": command, "type": 1, "options": opts},
            "token": f"tok-{iid}",
            "version": 1,
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "attachment_size_limit": 8388608,
            "context": 1 if dm else 0,
        }
        user = user_object(author, f"user{author[-4:]}")
        if dm:
            data["channel_id"] = "6" + author[1:]
            data["channel"] = {"id": data["channel_id"], "type": 1}
            data["user"] = user
        else:
            data["channel_id"] = channel_id or next(iter(self.channels))
            data["channel"] = {"id": data["channel_id"], "type": 0, "guild_id": GUILD_ID, "name": self.channels.get(data["channel_id"], "x")}
            data["guild_id"] = GUILD_ID
            data["member"] = {
                "user": user,
                "roles": list(role_ids),
                "joined_at": "2026-01-01T00:00:00+00:00",
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "0",
            }
        self._call(lambda: self._dispatch("INTERACTION_CREATE", data))
        return iid

    def callbacks(self, interaction_id: str | None = None) -> list[RestCall]:
        """The bot's interaction callbacks (``POST /interactions/{id}/{token}/callback``)."""
        return [
            c
            for c in list(self.rest)
            if c.path.startswith("/interactions/") and (interaction_id is None or c.path.startswith(f"/interactions/{interaction_id}/"))
        ]

    def go_zombie(self) -> None:
        """From now on send nothing on the current connection (no ACKs, no dispatches) but keep
        it open; a new connection is served normally again."""
        self.zombie = True

    def send_reconnect(self) -> None:
        """Send RECONNECT (op 7): the client should close and RESUME."""
        self._call(lambda: self._send({"op": 7, "d": None}))

    def created(self, channel_id: str | None = None) -> list[RestCall]:
        """The bot's message creations (optionally in one channel), in order."""
        return [c for c in list(self.rest) if c.method == "POST" and c.path.endswith("/messages") and (channel_id is None or f"/{channel_id}/" in c.path)]

    def edits(self) -> list[RestCall]:
        return [c for c in list(self.rest) if c.method == "PATCH" and "/messages/" in c.path]

    def texts(self, channel_id: str) -> list[str]:
        """The latest contents of the bot's messages in ``channel_id``, oldest first."""
        with self._lock:
            return [m["content"] for m in self.messages.values() if m["channel_id"] == channel_id]

    # -- gateway -----------------------------------------------------------------------------

    async def _send(self, payload: dict[str, Any], ws: web.WebSocketResponse | None = None) -> None:
        ws = ws or self._ws
        if ws is None or ws.closed or self.zombie:
            return
        await ws.send_str(json.dumps(payload))

    async def _dispatch(self, event: str, data: Any) -> None:
        session = self._session
        if session is None or self._ws is None or self._ws.closed or self.zombie:
            self._pending.append({"t": event, "d": data})
            return
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.backlog.append(frame)
        await self._send(frame)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=None, max_msg_size=4 * 1024 * 1024, timeout=CLOSE_WAIT)
        await ws.prepare(request)
        if self._ws is not None and not self._ws.closed:
            await self._ws.close(code=4000)
        self.zombie = False
        self._ws, self._session = ws, None
        self.connections += 1
        await self._send({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval}}, ws)
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            frame = json.loads(msg.data)
            if ws is not self._ws or (self.zombie and ws is self._ws):
                continue  # a deaf connection hears nothing back
            await self._on_frame(ws, frame)
        if ws is self._ws:
            self._session = None
        return ws

    async def _on_frame(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        op, data = frame.get("op"), frame.get("d")
        if op == 1:
            self.heartbeats += 1
            await self._send({"op": 11}, ws)
        elif op == 2:
            self.identifies += 1
            session = _Session(id=snowflake())
            self.sessions[session.id] = session
            self._session = session
            await self._dispatch(
                "READY",
                {
                    "v": 10,
                    "user": user_object(BOT_ID, "elowen", bot=True),
                    "guilds": [{"id": GUILD_ID, "unavailable": True}],
                    "session_id": session.id,
                    "resume_gateway_url": self.gateway_url,
                    "shard": [0, 1],
                    "application": {"id": APP_ID, "flags": 0},
                },
            )
            await self._dispatch("GUILD_CREATE", self._guild())
            await self._flush_pending()
        elif op == 6:
            session = self.sessions.get(str((data or {}).get("session_id")))
            if session is None:
                await self._send({"op": 9, "d": False}, ws)
                return
            self.resumes += 1
            self._session = session
            seen = int((data or {}).get("seq") or 0)
            for missed in [f for f in session.backlog if f["s"] > seen]:
                await self._send(missed, ws)
            session.seq += 1
            await self._send({"op": 0, "t": "RESUMED", "s": session.seq, "d": {}}, ws)
            await self._flush_pending()

    async def _flush_pending(self) -> None:
        pending, self._pending = self._pending, []
        for item in pending:
            await self._dispatch(item["t"], item["d"])

    def _guild(self) -> dict[str, Any]:
        roles = [{"id": GUILD_ID, "name": "@everyone", "permissions": "0", "position": 0, "color": 0, "hoist": False, "managed": False, "mentionable": False}]
        roles += [
            {"id": rid, "name": name, "permissions": "0", "position": i + 1, "color": 0, "hoist": False, "managed": False, "mentionable": True}
            for i, (rid, name) in enumerate(self.roles.items())
        ]
        return {
            "id": GUILD_ID,
            "name": "Scripted guild",
            "icon": None,
            "owner_id": "1",
            "unavailable": False,
            "member_count": 2,
            "large": False,
            "roles": roles,
            "emojis": [],
            "stickers": [],
            "features": [],
            "channels": [
                {"id": cid, "type": 0, "name": name, "position": i, "guild_id": GUILD_ID, "permission_overwrites": []}
                for i, (cid, name) in enumerate(self.channels.items())
            ],
            "threads": [],
            "members": [
                {
                    "user": user_object(BOT_ID, "elowen", bot=True),
                    "roles": [],
                    "joined_at": "2026-01-01T00:00:00+00:00",
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
        }

    # -- REST --------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
        call = RestCall(request.method, path, body, time.monotonic())
        self.rest.append(call)
        if self.on_rest is not None:
            self.on_rest(call)
        if self.rest_delay:
            await asyncio.sleep(self.rest_delay)
        parts = path.strip("/").split("/")
        headers, retry_after = self._rate(request.method, parts)
        if retry_after is not None:
            self.limited += 1
            return _json({"message": "You are being rate limited.", "retry_after": retry_after, "global": False}, status=429, headers=headers)
        response = await self._answer(request, path, parts, body)
        response.headers.update(headers)
        return response

    def _rate(self, method: str, parts: list[str]) -> tuple[dict[str, str], float | None]:
        key = f"{method} {parts[0]}/{parts[1] if len(parts) > 1 else ''}/{parts[2] if len(parts) > 2 else ''}"
        now = time.monotonic()
        window = [t for t in self._buckets.get(key, []) if t > now - self.rate_window]
        retry = None
        if len(window) >= self.rate_limit:
            retry = round(window[0] + self.rate_window - now, 3)
        else:
            window.append(now)
        self._buckets[key] = window
        reset_after = max(0.001, (window[0] + self.rate_window - now) if window else self.rate_window)
        headers = {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(0, self.rate_limit - len(window))),
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Bucket": str(abs(hash(key))),
        }
        return headers, retry

    async def _answer(self, request: web.Request, path: str, parts: list[str], body: Any) -> web.Response:
        if path == "/users/@me" and self.refuse_token:
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        if path == "/users/@me":
            return _json(user_object(BOT_ID, "elowen", bot=True))
        if path == "/oauth2/applications/@me":
            return _json(
                {
                    "id": APP_ID,
                    "name": "elowen",
                    "icon": None,
                    "description": "",
                    "bot_public": False,
                    "bot_require_code_grant": False,
                    "owner": user_object("1", "owner"),
                    "verify_key": "00",
                    "flags": 0,
                }
            )
        if path == "/users/@me/channels" and request.method == "POST":
            uid = str((body or {}).get("recipient_id"))
            return _json({"id": "6" + uid[1:], "type": 1, "last_message_id": None, "recipients": [user_object(uid, f"user{uid[-4:]}")]})
        if path in ("/gateway", "/gateway/bot"):
            return _json(
                {"url": self.gateway_url, "shards": 1, "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}
            )
        if len(parts) == 3 and parts[0] == "channels" and parts[2] == "messages" and request.method == "POST":
            return _json(self._store_message(parts[1], None, body))
        if len(parts) == 4 and parts[0] == "channels" and parts[2] == "messages" and request.method == "PATCH":
            if parts[3] not in self.messages:
                return _json({"code": 10008, "message": "Unknown Message"}, status=404)
            return _json(self._store_message(parts[1], parts[3], body))
        if len(parts) == 3 and parts[0] == "guilds" and parts[2] == "channels" and request.method == "GET":
            if parts[1] != GUILD_ID:
                return _json({"code": 10004, "message": "Unknown Guild"}, status=404)
            return _json(self._guild()["channels"])
        if parts[0] == "channels" and parts[-1] == "threads" and request.method == "POST" and len(parts) in (3, 5):
            if parts[1] not in self.channels:
                return _json({"code": 10003, "message": "Unknown Channel"}, status=404)
            thread = {
                "id": snowflake(),
                "type": 11,
                "name": (body or {}).get("name", ""),
                "guild_id": GUILD_ID,
                "parent_id": parts[1],
                "owner_id": BOT_ID,
                "message_count": 0,
                "member_count": 1,
                "rate_limit_per_user": 0,
                "flags": 0,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": (body or {}).get("auto_archive_duration", 1440),
                    "archive_timestamp": "2026-12-01T00:00:00.000000+00:00",
                    "locked": False,
                },
            }
            self.threads.append(thread)
            return _json(thread, status=201)
        if len(parts) == 5 and parts[0] == "channels" and parts[2:4] == ["messages", "pins"] and request.method == "PUT":
            self.pins.append((parts[1], parts[4]))
            return web.Response(status=204)
        if len(parts) == 4 and parts[0] == "interactions" and parts[3] == "callback":
            kind = (body or {}).get("type") if isinstance(body, dict) else None
            return _json({"interaction": {"id": parts[1], "type": 2 if kind == 4 else 4}})
        if len(parts) == 3 and parts[0] == "applications" and parts[2] == "commands" and request.method == "PUT":
            self.commands = [{"id": snowflake(), "application_id": APP_ID, "version": "1", "default_member_permissions": None, **c} for c in body or []]
            return _json(self.commands)
        return _json({"code": 0, "message": "404: Not Found"}, status=404)

    def _store_message(self, channel_id: str, mid: str | None, body: Any) -> dict[str, Any]:
        content = (body or {}).get("content") if isinstance(body, dict) else None
        with self._lock:
            mid = mid or snowflake()
            old = self.messages.get(mid, {})
            record = {"channel_id": channel_id, "content": content if content is not None else old.get("content", "")}
            self.messages[mid] = record
        data: dict[str, Any] = {
            "id": mid,
            "type": 0,
            "channel_id": channel_id,
            "content": record["content"],
            "author": user_object(BOT_ID, "elowen", bot=True),
            "timestamp": "2026-12-01T00:00:00.000000+00:00",
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
        }
        if channel_id in self.channels:
            data["guild_id"] = GUILD_ID
        return data

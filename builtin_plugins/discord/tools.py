"""Brain tools of ``discord`` for managing the bot's Discord servers — only an Elowen admin's
turns may call them (a member's turn, even one running on Discord, is refused):

* ``discord.list_channels`` — the channels of the bot's servers (read-only).
* ``discord.create_thread`` — start a public thread in a text channel (needs approval).
* ``discord.pin_message`` — pin a message (needs approval).

Plugin API 1 passes tools only their arguments, so the plugin's ``before_tool_call`` hook
stamps the conversation's user onto calls of these tools, signed with HMAC-SHA256 under a key
made per enable (:class:`CallerStamp`); a call without a valid stamp (a model writing
``_caller`` itself) is refused. The caller's role is read from the users service at each call,
so a demoted admin loses the tools at once. Each call that changes the server is audited
(``discord.tool``). The calls go through the running bot's discord.py client; with the bot not
connected the tools say so.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any

from elowen_sdk import ElowenError, Patch, Tool

__all__ = ["TOOL_NAMES", "CallerStamp", "ToolRefused", "tools"]

TOOL_NAMES = ("discord.list_channels", "discord.create_thread", "discord.pin_message")
ADMINS_ONLY = "the discord server-management tools are for Elowen admins only"


class ToolRefused(ElowenError):
    """A discord tool refused the call; the message is what the model sees."""


class CallerStamp:
    """Signs and checks the ``_caller`` argument (see the module docstring)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, user: str) -> str:
        return hmac.new(self._key, user.encode(), hashlib.sha256).hexdigest()

    def patch(self, call: Any) -> Patch | None:
        """The ``before_tool_call`` patch for this plugin's tools (``None`` for others)."""
        if call.tool not in TOOL_NAMES:
            return None
        user = str(call.user)
        ok = user.isascii() and user.isdigit()
        return Patch("tool_call", {"_caller": f"{user}:{self._mac(user)}" if ok else ""}, op="merge")

    def user(self, stamp: Any) -> int:
        """The user id of a valid stamp.

        Raises:
            ToolRefused: none, or forged.
        """
        if isinstance(stamp, str) and ":" in stamp:
            user, _, mac = stamp.partition(":")
            if user.isascii() and user.isdigit() and hmac.compare_digest(mac, self._mac(user)):
                return int(user)
        raise ToolRefused("discord tools work only in a conversation of a signed-in user")


def _snowflake(value: Any, what: str) -> int:
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and 0 < len(text) <= 20):
        raise ToolRefused(f"{what} must be a Discord id (digits), got {str(value)[:40]!r}")
    return int(text)


def tools(adapter: Callable[[], Any], stamp: CallerStamp, ctx: Any) -> list[Tool]:
    """The three tools; ``adapter()`` is the running :class:`.adapter.DiscordAdapter` or
    ``None``."""

    def admin(value: str) -> int:
        user_id = stamp.user(value)
        try:
            from elowen_sdk.services import UsersService

            row = ctx.service(UsersService).user(user_id)
        except LookupError:
            raise ToolRefused("discord tools need the daemon's users service") from None
        if not row or row.get("role") != "admin":
            ctx.store.audit(f"user:{user_id}", "discord.tool", "", "denied", {"reason": "not an admin"})
            raise ToolRefused(ADMINS_ONLY)
        return user_id

    async def call(coro_of: Callable[[Any], Any]) -> Any:
        running = adapter()
        if running is None:
            raise ToolRefused("the Discord bot is not running")
        try:
            return await running.manage(coro_of)
        except LookupError as exc:
            raise ToolRefused(str(exc).strip("'\"")) from None
        except ElowenError:
            raise
        except Exception as exc:  # discord.HTTPException (a refused permission, say), a restarting client
            raise ToolRefused(f"Discord refused: {type(exc).__name__}: {str(exc)[:200]}") from None

    async def list_channels(guild_id: str = "", _caller: str = "", **extra: Any) -> dict[str, Any]:
        admin(_caller)
        gid = _snowflake(guild_id, "guild_id") if str(guild_id).strip() else None
        return {"channels": await call(lambda bot: bot.list_channels(gid))}

    async def create_thread(channel_id: str = "", name: str = "", message_id: str = "", _caller: str = "", **extra: Any) -> dict[str, Any]:
        user_id = admin(_caller)
        cid = _snowflake(channel_id, "channel_id")
        mid = _snowflake(message_id, "message_id") if str(message_id).strip() else None
        title = str(name).strip()[:100]
        if not title:
            raise ToolRefused("a thread needs a name")
        thread = await call(lambda bot: bot.create_thread(cid, title, mid))
        ctx.store.audit(f"user:{user_id}", "discord.tool", f"channel:{cid}", "ok", {"tool": "discord.create_thread", "thread": thread["id"]})
        return {"thread": thread}

    async def pin_message(channel_id: str = "", message_id: str = "", _caller: str = "", **extra: Any) -> dict[str, Any]:
        user_id = admin(_caller)
        cid, mid = _snowflake(channel_id, "channel_id"), _snowflake(message_id, "message_id")
        await call(lambda bot: bot.pin_message(cid, mid))
        ctx.store.audit(f"user:{user_id}", "discord.tool", f"channel:{cid}", "ok", {"tool": "discord.pin_message", "message": str(mid)})
        return {"pinned": str(mid), "channel_id": str(cid)}

    ids = {"type": "string", "description": "A Discord id (digits)."}
    return [
        Tool(
            "discord.list_channels",
            "List the channels of the Discord servers the bot is in (id, name, type). Elowen admins only.",
            list_channels,
            {"type": "object", "properties": {"guild_id": {**ids, "description": "Only this server (optional)."}}},
        ),
        Tool(
            "discord.create_thread",
            "Start a public thread in a Discord text channel, from a message when message_id is given. Elowen admins only.",
            create_thread,
            {
                "type": "object",
                "properties": {"channel_id": ids, "name": {"type": "string", "maxLength": 100}, "message_id": ids},
                "required": ["channel_id", "name"],
            },
            needs_approval=True,  # it acts on a community's server: never on a model's (or an injected page's) own word
        ),
        Tool(
            "discord.pin_message",
            "Pin a message in a Discord text channel. Elowen admins only.",
            pin_message,
            {"type": "object", "properties": {"channel_id": ids, "message_id": ids}, "required": ["channel_id", "message_id"]},
            needs_approval=True,
        ),
    ]

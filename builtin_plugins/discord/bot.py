"""The asyncio side: a discord.py 2.x ``Client`` and the few REST calls the adapter makes.

Everything here runs on the private asyncio loop of :class:`.bridge.AsyncioThread`; the trio
side only calls :meth:`DiscordBot.run`, :meth:`send`, :meth:`edit`, :meth:`respond`,
:meth:`forget`, :meth:`drop_connection` and :meth:`close` through the bridge, and hears back
through the ``on_*`` callbacks (each a plain function the bot hands to the bridge's
``to_trio``).

Pointing discord.py at another server (the scripted one in the tests, a proxy): discord.py 2.7
takes the REST base from the class attribute ``discord.http.Route.BASE`` and the first gateway
URL from ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` (later ones from READY's
``resume_gateway_url``). Both are process-wide, so one process runs one Discord bot.

Intents: ``guilds``, ``guild_messages``, ``dm_messages`` and the privileged
``message_content`` (enable it for the bot in the Discord developer portal).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MODEL_COMMAND", "DiscordBot", "Inbound", "InteractionIn"]

MODEL_COMMAND: dict[str, Any] = {
    "name": "model",
    "type": 1,  # CHAT_INPUT
    "description": "Show or choose the model of this channel's conversation",
    "options": [{"name": "model", "type": 3, "description": "A model you may use (leave empty to list them)", "required": False, "autocomplete": True}],
}
"""The global slash command the bot registers on READY (``PUT /applications/{id}/commands``)."""

_MENTION = re.compile(r"<@!?(\d+)>")


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message addressed to the bot (a DM, or a guild message mentioning it).

    ``text`` has the bot's mention removed; ``role_ids`` are the author's guild role ids
    (empty in a DM); ``attachments`` counts files and images (the brain reads text only).
    """

    message_id: str
    channel_id: int
    guild_id: int | None
    author_id: str
    text: str
    direct: bool
    role_ids: tuple[str, ...]
    attachments: int
    received: float  # time.monotonic() on the asyncio thread


@dataclass(frozen=True, slots=True)
class InteractionIn:
    """One slash-command interaction for the bot: ``/model`` run (``autocomplete`` false;
    ``value`` the chosen option or ``""``) or its option being typed (``autocomplete`` true;
    ``value`` the text typed so far). ``key`` names the pending interaction for
    :meth:`DiscordBot.respond` (Discord allows 3 s for the answer)."""

    key: str
    command: str
    value: str
    autocomplete: bool
    channel_id: int
    guild_id: int | None
    author_id: str
    role_ids: tuple[str, ...]


class DiscordBot:
    """One discord.py client (create it on the asyncio loop's thread, in :meth:`run`).

    Args:
        token: the bot token.
        api_base: REST base URL (``https://discord.com/api/v10``).
        gateway_url: first gateway URL (``wss://gateway.discord.gg/``).
        on_inbound: ``on_inbound(Inbound)``, called on the asyncio thread.
        on_state: ``on_state(state)`` with ``connected`` / ``reconnecting``.
        on_interaction: ``on_interaction(InteractionIn)``, called on the asyncio thread for each
            ``/model`` interaction; returns ``False`` when nobody will answer it (the pending
            interaction is then dropped at once). Whoever handles it must end with
            :meth:`respond` or :meth:`forget`. ``None``: no slash command is registered.
    """

    def __init__(
        self,
        *,
        token: str,
        api_base: str,
        gateway_url: str,
        on_inbound: Callable[[Inbound], None],
        on_state: Callable[[str], None],
        on_interaction: Callable[[InteractionIn], object] | None = None,
    ) -> None:
        self._token = token
        self.api_base = api_base
        self.gateway_url = gateway_url
        self.on_inbound = on_inbound
        self.on_state = on_state
        self.on_interaction = on_interaction
        self._interactions: dict[str, Any] = {}
        """Interaction id → the ``discord.Interaction`` not yet answered (or forgotten)."""
        self.commands_registered = False
        self.client: Any = None
        self.last_frame = time.monotonic()
        """``time.monotonic()`` of the last gateway frame of any kind (ACKs included)."""

    async def run(self) -> None:
        """Log in and hold the gateway connection (discord.py reconnects and RESUMEs by
        itself) until :meth:`close`. Raises what ``Client.start`` raises
        (``discord.LoginFailure`` for a bad token, …)."""
        import discord
        import yarl
        from discord.gateway import DiscordWebSocket
        from discord.http import Route

        Route.BASE = self.api_base.rstrip("/")
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = intents.message_content = True
        client = discord.Client(intents=intents, chunk_guilds_at_startup=False, enable_debug_events=True, max_messages=None)
        self.client = client
        bot = self

        @client.event
        async def on_socket_raw_receive(_: Any) -> None:
            bot.last_frame = time.monotonic()

        @client.event
        async def on_ready() -> None:
            bot.on_state("connected")
            await bot._register_commands()

        @client.event
        async def on_interaction(interaction: Any) -> None:
            bot._interaction(interaction)

        @client.event
        async def on_resumed() -> None:
            bot.on_state("connected")

        @client.event
        async def on_disconnect() -> None:
            bot.on_state("reconnecting")

        @client.event
        async def on_message(message: Any) -> None:
            bot._message(message)

        async with client:
            await client.start(self._token, reconnect=True)

    def _message(self, message: Any) -> None:
        me = self.client.user
        author = message.author
        if author.bot or (me is not None and author.id == me.id):
            return
        direct = message.guild is None
        mentioned = me is not None and any(u.id == me.id for u in message.mentions)
        if not direct and not mentioned:
            return
        text = _MENTION.sub(lambda m: "" if me is not None and int(m.group(1)) == me.id else m.group(0), message.content).strip()
        roles = tuple(str(r.id) for r in getattr(author, "roles", ()) if message.guild is None or r.id != message.guild.id)
        self.on_inbound(
            Inbound(
                message_id=str(message.id),
                channel_id=message.channel.id,
                guild_id=message.guild.id if message.guild else None,
                author_id=str(author.id),
                text=text,
                direct=direct,
                role_ids=roles,
                attachments=len(message.attachments),
                received=time.monotonic(),
            )
        )

    async def _register_commands(self) -> None:
        if self.on_interaction is None or self.commands_registered:
            return
        app_id = self.client.application_id
        if app_id is None:
            return
        try:
            await self.client.http.bulk_upsert_global_commands(app_id, [MODEL_COMMAND])
            self.commands_registered = True
        except Exception as exc:  # the bot still answers messages; /model is just not offered
            import logging

            logging.getLogger("elowen.plugin.discord").warning("registering the /model command failed: %s", exc)

    def _interaction(self, interaction: Any) -> None:
        import discord

        data = interaction.data or {}
        kind = interaction.type
        if self.on_interaction is None or kind not in (discord.InteractionType.application_command, discord.InteractionType.autocomplete):
            return
        options = {str(o.get("name")): o for o in data.get("options") or [] if isinstance(o, dict)}
        option = options.get("model") or {}
        key = str(interaction.id)
        user = interaction.user
        roles = tuple(str(r.id) for r in getattr(user, "roles", ()) if interaction.guild_id is None or r.id != interaction.guild_id)
        item = InteractionIn(
            key=key,
            command=str(data.get("name") or ""),
            value=str(option.get("value") or "").strip(),
            autocomplete=kind == discord.InteractionType.autocomplete,
            channel_id=int(interaction.channel_id or 0),
            guild_id=interaction.guild_id,
            author_id=str(user.id),
            role_ids=roles,
        )
        self._interactions[key] = interaction
        handed = False
        try:
            handed = self.on_interaction(item) is not False
        finally:
            if not handed:  # nobody will answer it (trio is gone, or the hand-over raised)
                self._interactions.pop(key, None)

    @property
    def pending_interactions(self) -> int:
        """Interactions received and neither answered (:meth:`respond`) nor forgotten
        (:meth:`forget`) yet."""
        return len(self._interactions)

    async def respond(self, key: str, *, text: str | None = None, choices: list[str] | None = None) -> None:
        """Answer the pending interaction ``key``: an ephemeral message ``text`` (callback type
        4, flags 64: only the sender sees it) or autocomplete ``choices`` (type 8, at most 25).
        Raises ``KeyError`` for an unknown or already answered interaction."""
        from discord import app_commands

        interaction = self._interactions.pop(key)
        if choices is not None:
            await interaction.response.autocomplete([app_commands.Choice(name=c[:100], value=c[:100]) for c in choices[:25]])
        else:
            import discord

            await interaction.response.send_message(text or "", ephemeral=True, allowed_mentions=discord.AllowedMentions.none())

    async def forget(self, key: str) -> None:
        """Drop the pending interaction ``key`` unanswered (Discord shows the sender that the
        command failed); nothing happens when it was answered already or is unknown."""
        self._interactions.pop(key, None)

    def _channel(self, channel_id: int) -> Any:
        return self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)

    async def send(self, channel_id: int, text: str) -> int:
        """Post ``text`` in the channel (no pings: mentions in the text are not notified);
        returns the new message's id."""
        import discord

        message = await self._channel(channel_id).send(text, allowed_mentions=discord.AllowedMentions.none())
        return int(message.id)

    async def send_dm(self, user_id: int, text: str) -> int:
        """Open (or reuse) the DM channel with Discord user ``user_id`` and post ``text``
        there; returns the DM channel's id."""
        import discord

        channel = await self.client.create_dm(discord.Object(id=user_id))
        await channel.send(text, allowed_mentions=discord.AllowedMentions.none())
        return int(channel.id)

    async def edit(self, channel_id: int, message_id: int, text: str) -> None:
        """Replace the content of the bot's message ``message_id``."""
        await self._channel(channel_id).get_partial_message(message_id).edit(content=text)

    # -- server management (the admin-only brain tools) ---------------------------------------

    async def list_channels(self, guild_id: int | None = None) -> list[dict[str, Any]]:
        """The channels of the bot's guilds (or of guild ``guild_id``), fetched from Discord
        (``GET /guilds/{id}/channels``): ``[{"id", "name", "type", "guild_id", "guild",
        "parent_id"}]`` (ids as strings, ``type`` discord.py's channel type name)."""
        out: list[dict[str, Any]] = []
        for guild in self.client.guilds:
            if guild_id is not None and guild.id != guild_id:
                continue
            for channel in await guild.fetch_channels():
                parent = getattr(channel, "category_id", None)
                out.append(
                    {
                        "id": str(channel.id),
                        "name": channel.name,
                        "type": str(channel.type),
                        "guild_id": str(guild.id),
                        "guild": guild.name,
                        "parent_id": str(parent) if parent else None,
                    }
                )
        return out

    def _guild_text_channel(self, channel_id: int) -> Any:
        import discord

        channel = self.client.get_channel(channel_id)
        if not isinstance(channel, discord.TextChannel):
            raise LookupError(f"no text channel {channel_id} in the bot's servers")
        return channel

    async def create_thread(self, channel_id: int, name: str, message_id: int | None = None, archive_minutes: int = 1440) -> dict[str, Any]:
        """Start a public thread in text channel ``channel_id`` (from message ``message_id``
        when given: ``POST /channels/{id}/messages/{id}/threads``; else ``POST
        /channels/{id}/threads``); returns ``{"id", "name", "parent_id"}``.

        Raises:
            LookupError: not a text channel of the bot's servers. discord.HTTPException: Discord refused.
        """
        import discord

        channel = self._guild_text_channel(channel_id)
        if message_id is not None:
            thread = await channel.get_partial_message(message_id).create_thread(name=name, auto_archive_duration=archive_minutes)
        else:
            thread = await channel.create_thread(name=name, auto_archive_duration=archive_minutes, type=discord.ChannelType.public_thread)
        return {"id": str(thread.id), "name": thread.name, "parent_id": str(channel_id)}

    async def pin_message(self, channel_id: int, message_id: int) -> None:
        """Pin message ``message_id`` in text channel ``channel_id`` (``PUT
        /channels/{id}/messages/pins/{id}``).

        Raises:
            LookupError: not a text channel of the bot's servers. discord.HTTPException: Discord refused.
        """
        await self._guild_text_channel(channel_id).get_partial_message(message_id).pin()

    async def drop_connection(self) -> None:
        """Close the gateway socket with code 4000 so discord.py reconnects and RESUMEs (the
        watchdog's first remedy for a deaf connection)."""
        ws = getattr(self.client, "ws", None) if self.client is not None else None
        if ws is not None:
            await ws.close(code=4000)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

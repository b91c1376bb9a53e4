"""A reply shown while it is written: one Discord message edited as text deltas arrive.

Discord limits message creates and edits per channel (a bucket of 5 requests per 5 seconds on
the message routes, announced in the ``X-RateLimit-*`` headers; discord.py waits out a 429 by
itself). A :class:`StreamedReply` therefore creates its message at the first delta (the
time to first visible token) and then edits it at most once per ``edit_interval`` seconds,
with only the latest text; the final text replaces the streamed one, cut into 2,000-character
messages (Discord's content limit). When the streamed message cannot be created or edited, the
final text goes out as new messages (the fallback).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from elowen_sdk.platforms import chunk_text

__all__ = ["MAX_CONTENT", "StreamedReply"]

log = logging.getLogger("elowen.plugin.discord")

MAX_CONTENT = 2000
"""Characters of one Discord message's content (Discord API v10)."""

Send = Callable[[int, str], Awaitable[int]]
Edit = Callable[[int, int, str], Awaitable[None]]


class StreamedReply:
    """Streams one reply into ``channel_id``.

    Args:
        send: ``await send(channel_id, text) -> message_id``.
        edit: ``await edit(channel_id, message_id, text)``.
        edit_interval: seconds between two edits of the streamed message.
        on_first: called once, when the first streamed text became visible.
    """

    def __init__(self, send: Send, edit: Edit, channel_id: int, *, edit_interval: float, on_first: Callable[[], None] | None = None) -> None:
        self._send = send
        self._edit = edit
        self.channel_id = channel_id
        self.edit_interval = edit_interval
        self.on_first = on_first
        self.message_id: int | None = None
        self.edits = 0
        self._parts: list[str] = []
        self._shown = ""
        self._dirty = trio.Event()
        self._failed = False
        self._stopping = False
        self._stop_requested = trio.Event()
        self._stopped = trio.Event()
        self._pumping = False

    def feed(self, text: str) -> None:
        """A text delta (sync, never blocks: the brain calls it from its turn)."""
        self._parts.append(text)
        self._dirty.set()

    def _preview(self) -> str:
        text = "".join(self._parts).strip()
        if len(text) > MAX_CONTENT - 2:
            text = text[: MAX_CONTENT - 2].rstrip() + " …"
        return text

    async def pump(self) -> None:
        """Create, then edit, the streamed message until :meth:`finish` (run it in a
        nursery beside the turn)."""
        self._pumping = True
        try:
            await self._pump()
        finally:
            self._stopped.set()

    async def _pump(self) -> None:
        while not self._failed and not self._stopping:
            await self._dirty.wait()
            if self._stopping:
                return
            self._dirty = trio.Event()
            text = self._preview()
            if not text or text == self._shown:
                continue
            try:
                if self.message_id is None:
                    self.message_id = await self._send(self.channel_id, text)
                    if self.on_first is not None:
                        self.on_first()
                else:
                    await self._edit(self.channel_id, self.message_id, text)
                    self.edits += 1
                self._shown = text
            except trio.Cancelled:
                raise
            except Exception as exc:
                log.warning("streaming a reply into channel %s failed (%s); the reply will be sent whole", self.channel_id, type(exc).__name__)
                self._failed = True
                return
            with trio.move_on_after(self.edit_interval):
                await self._stop_requested.wait()

    async def finish(self, replies: list[str]) -> int:
        """Show the final ``replies`` (joined by blank lines): the first piece replaces the
        streamed message, the others follow as new messages. Returns how many messages were
        sent or edited."""
        self._stopping = True
        self._stop_requested.set()
        self._dirty.set()
        if self._pumping:
            await self._stopped.wait()  # an in-flight create or edit completes first
        chunks = chunk_text("\n\n".join(r for r in replies if r.strip()), MAX_CONTENT)
        if not chunks:
            return 0
        done = 0
        if self.message_id is not None and not self._failed:
            try:
                if chunks[0] != self._shown:
                    await self._edit(self.channel_id, self.message_id, chunks[0])
                    self.edits += 1
                chunks, done = chunks[1:], 1
            except Exception as exc:
                log.warning("the final edit in channel %s failed (%s); sending the reply as new messages", self.channel_id, type(exc).__name__)
        for chunk in chunks:
            if self.message_id is None and self.on_first is not None:
                self.on_first()
            self.message_id = await self._send(self.channel_id, chunk)
            done += 1
        return done

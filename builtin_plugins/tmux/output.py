"""Per-subscriber output streams with bounded memory.

The control client's reader pushes pane output without ever waiting; each
:class:`OutputStream` coalesces what its consumer has not read yet. When a consumer falls more
than ``limit`` bytes behind, the backlog is dropped and the next event says ``lost=True`` (the
consumer should take a fresh ``capture`` instead of replaying bytes).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from elowen_sdk.services.tmux import OutputEvent

__all__ = ["OutputEvent", "OutputStream"]

DEFAULT_LIMIT = 1 << 20
"""Default per-stream backlog limit: 1 MiB."""


class OutputStream:
    """Async iterator of :class:`OutputEvent` for one session (all its panes); ends when the
    session ends or the stream is closed. Get one from ``TmuxService.subscribe``."""

    def __init__(self, session: str, limit: int = DEFAULT_LIMIT, on_close: Callable[[OutputStream], None] | None = None) -> None:
        self.session = session
        self._limit = limit
        self._chunks: list[tuple[str, bytearray, bool, float]] = []
        self._size = 0
        self._lost_next = False
        self._closed = False
        self._lot = trio.lowlevel.ParkingLot()
        self._on_close = on_close
        self.pushes = 0
        """How many times output was queued (a consumer that only needs to know *that* output
        happened compares it instead of reading every event)."""
        self.last_push = 0.0
        """``time.monotonic()`` of the latest queued output (seconds); 0.0 before any."""

    # called by the reader (never blocks)
    def push(self, pane_id: str, data: bytes) -> None:
        """Queue output of ``pane_id``; drops the backlog if it exceeds the limit."""
        if self._closed or not data:
            return
        if self._size + len(data) > self._limit:
            self._chunks.clear()
            self._size = 0
            self._lost_next = True
            if len(data) > self._limit:
                data = data[-self._limit :]
        if self._chunks and self._chunks[-1][0] == pane_id and not self._lost_next:
            self._chunks[-1][1].extend(data)
        else:
            self._chunks.append((pane_id, bytearray(data), self._lost_next, time.monotonic()))
            self._lost_next = False
        self._size += len(data)
        self.pushes += 1
        self.last_push = time.monotonic()
        if self._lot:
            self._lot.unpark_all()

    def mark_lost(self) -> None:
        """Flag the next event as ``lost`` (tmux paused the pane for this client)."""
        self._lost_next = True

    def discard_pending(self) -> None:
        """Drop what is queued without reading it (the next event is not flagged ``lost``:
        the consumer chose to skip the bytes)."""
        self._chunks.clear()
        self._size = 0

    def end(self) -> None:
        """The session ended: readers drain what is queued, then iteration stops."""
        self._closed = True
        self._lot.unpark_all()

    def close(self) -> None:
        """Stop this subscription now. Idempotent."""
        if self._on_close is not None:
            cb, self._on_close = self._on_close, None
            cb(self)
        self._chunks.clear()
        self._size = 0
        self.end()

    @property
    def ended(self) -> bool:
        """True once no more events will come (and the queue may still hold some)."""
        return self._closed

    async def receive(self) -> OutputEvent:
        """The next event (coalesced).

        Raises:
            trio.EndOfChannel: the session ended or the stream was closed, and nothing is left.
        """
        while not self._chunks:
            if self._closed:
                raise trio.EndOfChannel
            await self._lot.park()
        pane_id, data, lost, ts = self._chunks.pop(0)
        self._size -= len(data)
        return OutputEvent(pane_id, bytes(data), lost, ts)

    def __aiter__(self) -> OutputStream:
        return self

    async def __anext__(self) -> OutputEvent:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

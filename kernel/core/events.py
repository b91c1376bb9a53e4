"""The event bus: durable, ordered events fanned out to bounded subscribers.

``publish`` is synchronous: it inserts the row (its id is the durable, increasing event id,
the SSE ``id:``), then hands the event to every matching subscriber with ``send_nowait``.
Inside an open :meth:`Store.transaction` the row is part of that transaction (an outbox): the
change and its event commit together, and the fan-out happens only after the commit. An
event of a transaction that rolls back is never delivered (its id was never seen, so the
next event may take it: every id a subscriber sees is unique and increasing).
A subscriber whose buffer is full is dropped, never waited for: its iterator delivers what it
already had, then raises :class:`SubscriberDropped`, and the client resumes from the last id
it saw (SSE ``Last-Event-ID``) with a new subscription.

``subscribe(last_event_id=N)`` replays ``id > N`` from the table, then continues live with no
gap and no duplicate: the live channel is registered before the replay is read, and live
events already replayed are skipped by id.

All methods run on the trio thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from elowen_sdk import ElowenError, Event

from .store import Store, utc_iso

__all__ = ["EventBus", "Listener", "Subscription", "SubscriberDropped", "TypeFilter"]

log = logging.getLogger(__name__)

Listener = Callable[[Event], None]

_INSERT = "INSERT INTO events (type, data, ts, project_id) VALUES (?, ?, ?, ?)"
_SELECT = "SELECT id, type, data, ts, project_id FROM events"


class SubscriberDropped(ElowenError):
    """The subscriber fell behind (its buffer filled) and was dropped.

    Attributes:
        last_id: the id of the last event delivered to it (resume after this one), or ``None``.
    """

    def __init__(self, last_id: int | None) -> None:
        self.last_id = last_id
        super().__init__(f"subscriber fell behind and was dropped after event {last_id}; resubscribe from it")


class TypeFilter:
    """Matches event types against exact names and prefixes.

    ``"task.created"`` matches exactly; ``"task.*"`` matches every type starting with
    ``"task."``; ``"*"`` matches everything.
    """

    __slots__ = ("_exact", "_prefixes", "_all")

    def __init__(self, patterns: Collection[str]) -> None:
        if isinstance(patterns, str):
            raise TypeError("types must be a collection of strings, not a string")
        self._all = "*" in patterns
        self._exact = frozenset(p for p in patterns if not p.endswith("*"))
        self._prefixes = tuple(p[:-1] for p in patterns if p.endswith("*") and p != "*")

    def __call__(self, type_: str) -> bool:
        return self._all or type_ in self._exact or (bool(self._prefixes) and type_.startswith(self._prefixes))


class _Subscriber:
    __slots__ = ("send", "types", "project_filter", "event_filter", "dropped", "last_id")

    def __init__(
        self,
        send: trio.MemorySendChannel[Event],
        types: TypeFilter | None,
        project_filter: Callable[[int | None], bool] | None,
        event_filter: Callable[[Event], bool] | None = None,
    ) -> None:
        self.send = send
        self.types = types
        self.project_filter = project_filter
        self.event_filter = event_filter
        self.dropped = False
        self.last_id: int | None = None

    def accepts(self, event: Event) -> bool:
        if self.types is not None and not self.types(event.type):
            return False
        if self.project_filter is None and self.event_filter is None:
            return True
        try:
            if self.project_filter is not None and not self.project_filter(event.project_id):
                return False
            return self.event_filter is None or bool(self.event_filter(event))
        except Exception:
            log.exception("event filter failed on event %d; event withheld", event.id)
            return False


def _row_event(row: tuple[Any, ...]) -> Event:
    return Event(id=row[0], type=row[1], data=json.loads(row[2]), ts=row[3], project_id=row[4])


class Subscription:
    """An async iterator of :class:`~elowen_sdk.Event`: the replay, then live events.

    Raises (from iteration):
        SubscriberDropped: the subscriber fell behind; everything before it was delivered.

    Iteration ends normally when the bus is closed.
    """

    def __init__(
        self,
        bus: EventBus,
        sub: _Subscriber,
        receive: trio.MemoryReceiveChannel[Event],
        last_event_id: int | None,
    ) -> None:
        self._bus = bus
        self._sub = sub
        self._receive = receive
        self._replay_until: int | None = None
        if last_event_id is not None:
            newest = bus.last_id()
            # A client ahead of the table (the database was replaced) gets everything new.
            last_event_id = min(last_event_id, newest)
            self._replay_until = newest
        self._after = last_event_id
        self._pending: list[Event] = []

    @property
    def last_id(self) -> int | None:
        """The id of the last event this iterator delivered (or the starting point)."""
        return self._after

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._replay_until is not None:
                event = await self._next_replayed()
                if event is not None:
                    return self._deliver(event)
                self._replay_until = None
            try:
                event = await self._receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if self._sub.dropped:
                    raise SubscriberDropped(self._after) from None
                raise StopAsyncIteration from None
            if self._after is not None and event.id <= self._after:
                continue  # already delivered by the replay
            return self._deliver(event)

    def ready_nowait(self, limit: int = 1_000) -> list[Event]:
        """Live events already queued for this subscriber, at most ``limit``, without waiting
        (lets an SSE stream send what piled up in one chunk). Empty while a replay is still in
        progress; a drop or the end of the bus is reported by the next ``__anext__``."""
        if self._replay_until is not None:
            return []
        out: list[Event] = []
        while len(out) < limit:
            try:
                event = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            if self._after is not None and event.id <= self._after:
                continue  # already delivered by the replay
            out.append(self._deliver(event))
        return out

    def _deliver(self, event: Event) -> Event:
        self._after = event.id
        return event

    async def _next_replayed(self) -> Event | None:
        assert self._replay_until is not None
        await trio.lowlevel.checkpoint()
        while True:
            if not self._pending:
                after = self._after if self._after is not None else 0
                if after >= self._replay_until:
                    return None
                batch = self._bus.replay(after, limit=500, until=self._replay_until)
                if not batch:
                    return None
                self._pending = batch[::-1]
                await trio.lowlevel.checkpoint()
            event = self._pending.pop()
            self._after = event.id  # filtered-out events still advance the cursor
            if self._sub.accepts(event):
                return event


class EventBus:
    """Publish/subscribe over the ``events`` table.

    Args:
        store: the kernel store (its ``events`` table).
        retention: :meth:`prune` keeps this many newest rows.
        buffer: default per-subscriber buffer (events); a subscriber this far behind is dropped.
    """

    def __init__(self, store: Store, *, retention: int = 100_000, buffer: int = 1_000) -> None:
        if retention < 1 or buffer < 1:
            raise ValueError("retention and buffer must be ≥ 1")
        self.store = store
        self.retention = retention
        self.buffer = buffer
        self._subscribers: list[_Subscriber] = []
        self._listeners: list[Listener] = []
        self._closed = False

    # -- publishing --------------------------------------------------------------------------

    def publish(self, type: str, data: Mapping[str, Any], project_id: int | None = None) -> Event:
        """Append an event and fan it out; never waits (trio thread only).

        Listeners run after the fan-out; their exceptions are logged, never raised here.
        Inside an open :meth:`Store.transaction` the row is part of that transaction and the
        fan-out (and the listeners) wait for its commit; a rollback discards the event.

        Raises:
            TypeError: ``data`` is not a mapping or not JSON-serialisable (nothing is written).
            ValueError: empty ``type``.
        """
        if not type:
            raise ValueError("event type must not be empty")
        if not isinstance(data, Mapping):
            raise TypeError(f"event data must be a mapping, got {data.__class__.__name__}")
        payload = dict(data)
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        ts = utc_iso()
        event_id = self.store.execute(_INSERT, (type, text, ts, project_id))
        event = Event(id=event_id, type=type, data=payload, ts=ts, project_id=project_id)
        if self.store.in_transaction:
            self.store.after_commit(lambda: self._deliver(event))
        else:
            self._deliver(event)
        return event

    def _deliver(self, event: Event) -> None:
        event_id, type = event.id, event.type
        self._fan_out(event)
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("event listener %r failed on event %d (%s)", listener, event_id, type)

    def _fan_out(self, event: Event) -> None:
        gone: list[_Subscriber] = []
        for sub in self._subscribers:
            if not sub.accepts(event):
                continue
            try:
                sub.send.send_nowait(event)
            except trio.WouldBlock:
                sub.dropped = True
                sub.send.close()
                gone.append(sub)
                log.warning("event subscriber dropped: buffer full at event %d", event.id)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                gone.append(sub)
        for sub in gone:
            self._remove(sub)

    def _remove(self, sub: _Subscriber) -> None:
        with contextlib.suppress(ValueError):
            self._subscribers.remove(sub)

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(event)`` (sync) after each publish's fan-out."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        """Stop calling ``fn``; unknown listeners are ignored."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    # -- subscribing -------------------------------------------------------------------------

    @asynccontextmanager
    async def subscribe(
        self,
        *,
        last_event_id: int | None = None,
        types: Collection[str] | None = None,
        project_filter: Callable[[int | None], bool] | None = None,
        event_filter: Callable[[Event], bool] | None = None,
        buffer: int | None = None,
    ) -> AsyncIterator[Subscription]:
        """Subscribe; yields a :class:`Subscription` (an async iterator of events).

        Args:
            last_event_id: replay events with a greater id first (``0``: everything kept);
                ``None``: live events only.
            types: exact types and/or ``prefix.*`` patterns; ``None``: all types.
            project_filter: ``f(project_id) -> bool`` deciding which events this subscriber
                may see (``project_id`` is ``None`` for global events); ``None``: all.
            event_filter: ``f(event) -> bool``, a further per-event rule (e.g. events private
                to one user); ``None``: none. A filter that raises withholds the event.
            buffer: buffered events before this subscriber is dropped (default: the bus's).

        Raises:
            trio.ClosedResourceError: the bus is closed.
        """
        if self._closed:
            raise trio.ClosedResourceError("event bus is closed")
        send, receive = trio.open_memory_channel[Event](buffer or self.buffer)
        sub = _Subscriber(send, TypeFilter(types) if types is not None else None, project_filter, event_filter)
        self._subscribers.append(sub)  # live first, then read the replay: no gap
        try:
            yield Subscription(self, sub, receive, last_event_id)
        finally:
            self._remove(sub)
            send.close()
            receive.close()

    @property
    def subscriber_count(self) -> int:
        """Live subscribers (dropped ones are not counted)."""
        return len(self._subscribers)

    def close(self) -> None:
        """End every subscription (their iterators stop) and refuse new ones."""
        self._closed = True
        for sub in self._subscribers:
            sub.send.close()
        self._subscribers.clear()

    # -- the table ---------------------------------------------------------------------------

    def replay(self, after_id: int, limit: int = 1000, *, until: int | None = None) -> list[Event]:
        """Events with ``after_id < id`` (and ``id <= until`` if given), oldest first, at most
        ``limit``."""
        if until is None:
            rows = self.store.connection.execute(f"{_SELECT} WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit))
        else:
            rows = self.store.connection.execute(f"{_SELECT} WHERE id > ? AND id <= ? ORDER BY id LIMIT ?", (after_id, until, limit))
        return [_row_event(r) for r in rows]

    def last_id(self) -> int:
        """The newest event id, 0 when none was ever published (survives pruning)."""
        row = self.store.query_one("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
        return int(row["seq"]) if row else 0

    def prune(self) -> int:
        """Delete all but the newest ``retention`` events; returns how many were deleted."""
        return self.store.execute(
            "DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (self.retention,),
        )

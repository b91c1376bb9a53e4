"""Server-sent events from the event bus.

Wire format: WHATWG HTML Living Standard, "Server-sent events" (§9.2): each event is
``id: N\\nevent: <type>\\nts: <UTC ISO 8601>\\ndata: <json>\\n\\n``; ``ts`` (when the event was
published) is an extension field, which the standard's parsers ignore ("Otherwise: the field is
ignored"); lines starting with ``:`` are comments (our
heartbeat is ``: heartbeat``); ``retry: ms`` sets the client's reconnection delay. A client
resumes with the ``Last-Event-ID`` header.

Events queued for a stream while it was sending are written together in one chunk
(coalescing). A stream whose subscriber fell behind (the bus dropped it) simply ends; the
client reconnects with ``Last-Event-ID`` and the replay fills the gap from the ``events``
table.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import trio

from elowen.core.events import EventBus, SubscriberDropped
from elowen_sdk import Event

__all__ = ["RECHECK", "RETRY_MS", "encode", "parse_types", "stream_events"]

log = logging.getLogger(__name__)

RETRY_MS = 2_000
RECHECK = 0.4
"""Seconds between re-checks of a stream's token and access (a revocation ends or narrows
an open stream within this, plus the time to send)."""
_TYPE = re.compile(r"^(\*|[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?)$")


def parse_types(text: str | None) -> list[str] | None:
    """``"task.*,signal"`` → ``["task.*", "signal"]``; ``None``/empty → ``None`` (all).

    Raises:
        ValueError: a pattern that is not ``name(.name)*``, ``prefix.*`` or ``*``.
    """
    if text is None or not text.strip():
        return None
    types = [t.strip() for t in text.split(",") if t.strip()]
    for t in types:
        if len(t) > 200 or not _TYPE.match(t):
            raise ValueError(f"invalid event type pattern {t!r} (use e.g. task.created, task.*, *)")
    return types


_ENCODED: OrderedDict[tuple[int, str], bytes] = OrderedDict()
_ENCODED_MAX = 4_096


def _encode_one(e: Event) -> bytes:
    # Every stream sends the same bytes for an event: encode it once (bounded cache by id and time).
    key = (e.id, e.ts)
    cached = _ENCODED.get(key)
    if cached is None:
        data = json.dumps(e.data, ensure_ascii=False, separators=(",", ":"))
        cached = f"id: {e.id}\nevent: {e.type}\nts: {e.ts}\ndata: {data}\n\n".encode()
        _ENCODED[key] = cached
        if len(_ENCODED) > _ENCODED_MAX:
            _ENCODED.popitem(last=False)
    return cached


def encode(events: Sequence[Event]) -> bytes:
    """Events in SSE wire format, concatenated."""
    if len(events) == 1:
        return _encode_one(events[0])
    return b"".join(_encode_one(e) for e in events)


async def stream_events(
    bus: EventBus,
    *,
    last_event_id: int,
    types: list[str] | None,
    project_filter: Callable[[int | None], bool] | None,
    heartbeat: float,
    event_filter: Callable[[Event], bool] | None = None,
    counter: Any = None,
    still_allowed: Callable[[], bool] | None = None,
    recheck: float = RECHECK,
) -> AsyncIterator[bytes]:
    """The body of a ``GET /events`` response: events after ``last_event_id`` then live ones,
    a heartbeat comment after ``heartbeat`` seconds without an event. Ends when the bus
    closes (shutdown) or drops this subscriber. ``counter.inflight`` (if given) counts the
    stream while it runs, so a graceful shutdown waits for it to end.

    ``still_allowed()`` (if given) is asked at least every ``recheck`` seconds, and before
    sending events when the last answer is older than that: ``False`` ends the stream (the
    caller's token was revoked, its user deleted, or it lost the stream's project). It may
    also narrow what the filters pass (they are asked per event)."""
    if counter is not None:
        counter.inflight += 1
    yield f"retry: {RETRY_MS}\n: connected\n\n".encode()
    try:
        async with bus.subscribe(last_event_id=last_event_id, types=types, project_filter=project_filter, event_filter=event_filter) as sub:
            last_sent = checked = trio.current_time()
            while True:
                event: Event | None = None
                now = trio.current_time()
                wait = heartbeat - (now - last_sent)
                if still_allowed is not None:
                    wait = min(wait, recheck - (now - checked))
                with trio.move_on_after(max(wait, 0.0)):
                    try:
                        event = await sub.__anext__()
                    except StopAsyncIteration:
                        return
                    except SubscriberDropped as exc:
                        log.info("SSE stream ended: subscriber fell behind after event %s", exc.last_id)
                        return
                now = trio.current_time()
                if still_allowed is not None and now - checked >= recheck:
                    checked = now
                    if not still_allowed():
                        log.info("SSE stream ended: its token or access was revoked")
                        return
                if event is None:
                    if now - last_sent >= heartbeat:
                        last_sent = now
                        yield b": heartbeat\n\n"
                    continue
                batch = [event, *sub.ready_nowait()]
                if event_filter is not None:  # the access may have narrowed since they were queued
                    batch = [e for e in batch if event_filter(e) and (project_filter is None or project_filter(e.project_id))]
                if batch:
                    last_sent = now
                    yield encode(batch)
    except trio.ClosedResourceError:
        return  # the bus closed (shutdown) before the subscription began
    finally:
        if counter is not None:
            counter.inflight -= 1

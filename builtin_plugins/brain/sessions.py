"""In-process sessions: one per conversation, holding its history cache, its running turn, its
YOLO override, its attached streams and its event fan-out.

Events of a session go two ways at once: onto the kernel's event bus (durable, for SSE
``GET /events``; types ``brain.*``, data always carries ``conversation_id`` and ``user_id`` so
the daemon can show them to the owner only) and to the streams attached to the session (the
streaming turn endpoint). Text deltas are coalesced on the bus (at most one event per
:data:`DELTA_FLUSH_CHARS` characters or :data:`DELTA_FLUSH_SECONDS`), sent as they come to
attached streams.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from elowen_sdk.chat import Message

__all__ = ["DELTA_FLUSH_CHARS", "DELTA_FLUSH_SECONDS", "Session", "SessionRegistry"]

log = logging.getLogger("elowen.plugin.brain")

DELTA_FLUSH_CHARS = 160
DELTA_FLUSH_SECONDS = 0.25
STREAM_BUFFER = 4096

Publisher = Callable[[str, Mapping[str, Any]], None]


class Session:
    """One conversation's live state.

    Attributes:
        conv: the conversation record (refreshed by the service when it changes).
        history: the messages sent to the model (not compacted), oldest first; ``None`` until
            loaded.
        running: a turn (and its goal continuation) runs; set by the service before it starts
            one, so two requests cannot both start one.
        scope: the cancel scope of the running drive, for abort.
        yolo: the session's ``/yolo`` override (``None``: the user's default).
        attached: streams attached right now (a CLI stream is a goal's live driver).
    """

    def __init__(self, conv: dict[str, Any], publish: Publisher) -> None:
        self.conv = conv
        self.history: list[Message] | None = None
        self.running = False
        self.scope: trio.CancelScope | None = None
        self.yolo: bool | None = None
        self.attached = 0
        self._publish = publish
        self._listeners: set[trio.MemorySendChannel[dict[str, Any]]] = set()
        self._delta: list[str] = []
        self._delta_since = 0.0
        self.failures: dict[str, int] = {}
        self.last_activity = trio.current_time()

    @property
    def id(self) -> int:
        return int(self.conv["id"])

    @property
    def user_id(self) -> int | None:
        return self.conv["user_id"]

    @property
    def busy(self) -> bool:
        return self.running

    # -- events ------------------------------------------------------------------------------

    def emit(self, type_: str, data: Mapping[str, Any]) -> None:
        """Publish ``type_`` with ``data`` (plus ``conversation_id``/``user_id``) to the bus and
        the attached streams."""
        if type_ != "brain.delta":
            self.flush_delta()
        self.last_activity = trio.current_time()
        payload = {"conversation_id": self.id, "user_id": self.user_id, "audience": [self.user_id], **data}
        self._send({"type": type_, **payload})
        if type_ == "brain.delta":
            self._delta.append(str(data.get("text", "")))
            now = trio.current_time()
            if not self._delta_since:
                self._delta_since = now
            if sum(map(len, self._delta)) >= DELTA_FLUSH_CHARS or now - self._delta_since >= DELTA_FLUSH_SECONDS:
                self.flush_delta()
            return
        self._bus(type_, payload)

    def flush_delta(self) -> None:
        """Publish the coalesced text deltas on the bus."""
        if self._delta:
            text, self._delta, self._delta_since = "".join(self._delta), [], 0.0
            self._bus("brain.delta", {"conversation_id": self.id, "user_id": self.user_id, "audience": [self.user_id], "text": text})

    def _bus(self, type_: str, payload: Mapping[str, Any]) -> None:
        try:
            self._publish(type_, payload)
        except Exception:
            log.exception("publishing %s failed", type_)

    def _send(self, item: dict[str, Any]) -> None:
        for send in tuple(self._listeners):
            try:
                send.send_nowait(item)
            except trio.WouldBlock:
                log.warning("conversation %s: a stream fell behind and was detached", self.id)
                self._listeners.discard(send)
                send.close()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._listeners.discard(send)

    def listen(self, *, driver: bool) -> trio.MemoryReceiveChannel[dict[str, Any]]:
        """Attach a stream; returns its receive channel. ``driver``: it counts as a live driver
        of the conversation's goal (until :meth:`unlisten`)."""
        send, receive = trio.open_memory_channel[dict[str, Any]](STREAM_BUFFER)
        self._listeners.add(send)
        if driver:
            self.attached += 1
        receive._elowen_send = send  # type: ignore[attr-defined]
        return receive

    def unlisten(self, receive: trio.MemoryReceiveChannel[dict[str, Any]], *, driver: bool) -> None:
        """Detach a stream attached with :meth:`listen`."""
        send = getattr(receive, "_elowen_send", None)
        if send is not None and send in self._listeners:
            self._listeners.discard(send)
            send.close()
        if driver:
            self.attached = max(0, self.attached - 1)
        receive.close()


class SessionRegistry:
    """Sessions by conversation id, created on first use."""

    def __init__(self, publish: Publisher) -> None:
        self._publish = publish
        self._sessions: dict[int, Session] = {}

    def get(self, conv: dict[str, Any]) -> Session:
        """The session of ``conv`` (created if needed; its record refreshed)."""
        session = self._sessions.get(int(conv["id"]))
        if session is None:
            session = self._sessions[int(conv["id"])] = Session(conv, self._publish)
        else:
            session.conv = conv
        return session

    def existing(self, cid: int) -> Session | None:
        """The session of conversation ``cid`` if one is live."""
        return self._sessions.get(cid)

    def all(self) -> list[Session]:
        """Every live session."""
        return list(self._sessions.values())

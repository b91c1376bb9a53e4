"""HTTP connections of Elowen's servers (the daemon, the web front end): a send deadline on
every write, idle connections closed, a connection cap, and a bounded shutdown.

hypercorn 0.18's trio ``TCPServer`` (with quart-trio 0.12) has three defects this module
fixes by replacing the ``TCPServer`` class hypercorn's trio worker uses (:func:`install`):

* Every write is ``send_all`` inside a *shielded* cancel scope with no deadline: a client that
  stops reading (a stuck ``GET /events`` reader, a frozen WebSocket terminal) blocks its
  response forever, and no cancellation (not even the daemon's shutdown) reaches it. Here a
  write that does not finish within :attr:`Limits.send_timeout` seconds drops the connection
  (an SSE client then resumes with ``Last-Event-ID``).
* Idle keep-alive connections are never closed, not even after ``Connection: close`` or an
  HTTP/1.0 request. Reproduction: a minimal ``QuartTrio`` app with one route under
  ``hypercorn.trio.serve``; ``GET / HTTP/1.0`` gets its response and the socket stays open.
  Cause: quart-trio's ``TrioASGIHTTPConnection.handle_messages`` cancels the request's nursery
  as soon as ``http.disconnect`` arrives, and hypercorn sends that disconnect from *inside* the
  request task's own ``protocol_send(Closed())`` / ``Updated(idle=True)``, so the ``send_eof``
  / ``aclose`` (and the restart of the keep-alive timer) that follow are cancelled. Here those
  two steps run shielded.
* Connections are unlimited: past the process's file limit ``accept`` fails with ``EMFILE``
  and the daemon is unreachable for everyone. Here at most :attr:`Limits.max_connections`
  are open; a new one over the cap first evicts the longest-idle connection (not in a
  request), else it is answered ``503 too_many_connections`` and closed.

All functions run on the trio thread.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass

import trio
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.trio import run as hypercorn_run
from hypercorn.trio.tcp_server import TCPServer

__all__ = ["Limits", "GuardedTCPServer", "abort_all", "connection_count", "install", "limits"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Limits:
    """Connection limits (seconds and counts).

    Attributes:
        send_timeout: a write that takes longer drops its connection (``ELOWEN_SEND_TIMEOUT``).
        max_connections: open connections at most (``ELOWEN_MAX_CONNECTIONS``).
        refuse_timeout: how long the ``503`` answer to a refused connection may take.
    """

    send_timeout: float = 10.0
    max_connections: int = 4_096
    refuse_timeout: float = 1.0


_LIMITS = Limits()
_LIVE: dict[GuardedTCPServer, None] = {}  # insertion-ordered: oldest first
_REFUSED = 0


def limits() -> Limits:
    """The limits in force (a process-wide object; :func:`install` sets it)."""
    return _LIMITS


def connection_count() -> int:
    """Connections open now."""
    return len(_LIVE)


def _refusal() -> bytes:
    body = json.dumps(
        {
            "error": {
                "code": "too_many_connections",
                "message": f"the daemon has {_LIMITS.max_connections} connections open (ELOWEN_MAX_CONNECTIONS); retry later",
            }
        }
    )
    return (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"retry-after: 1\r\ncontent-length: {len(body)}\r\n\r\n{body}"
    ).encode()


class GuardedTCPServer(TCPServer):
    """hypercorn's trio ``TCPServer`` with a send deadline, working idle close and a cap."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._send_scope: trio.CancelScope | None = None
        self._idle_since: float | None = time.monotonic()  # no request yet
        self._dropped = False

    async def run(self) -> None:
        global _REFUSED
        if len(_LIVE) >= _LIMITS.max_connections and not self._evict_idle():
            _REFUSED += 1
            if _REFUSED == 1 or _REFUSED % 100 == 0:
                log.warning("refused a connection: %d open (ELOWEN_MAX_CONNECTIONS); %d refused so far", len(_LIVE), _REFUSED)
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + _LIMITS.refuse_timeout
                try:
                    await self.stream.send_all(_refusal())
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            return
        _LIVE[self] = None
        try:
            await super().run()
        finally:
            _LIVE.pop(self, None)

    @staticmethod
    def _evict_idle() -> bool:
        idle = [c for c in _LIVE if c._idle_since is not None]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c._idle_since or 0.0)
        _LIVE.pop(victim, None)
        victim.abort("evicted (idle) to make room for a new connection")
        return True

    def abort(self, why: str) -> None:
        """Drop this connection now: a write in progress is cancelled, the socket closed."""
        self._dropped = True
        if self._send_scope is not None:
            self._send_scope.cancel()
        try:
            self.stream.socket.close()  # wakes a blocked receive/send with ClosedResourceError
        except (AttributeError, OSError):
            pass
        log.debug("connection dropped: %s", why)

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData):
            async with self.send_lock:
                if self._dropped:
                    raise_closed = True
                else:
                    raise_closed = False
                    with trio.CancelScope(shield=True) as scope:
                        scope.deadline = trio.current_time() + _LIMITS.send_timeout
                        self._send_scope = scope
                        try:
                            await self.stream.send_all(event.data)
                        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                            raise_closed = True
                    self._send_scope = None
                    if scope.cancelled_caught and not self._dropped:
                        log.warning(
                            "dropped a client that missed the send deadline (%.1f s, ELOWEN_SEND_TIMEOUT); an event stream resumes with Last-Event-ID",
                            _LIMITS.send_timeout,
                        )
                        self.abort("send deadline")
                    if scope.cancelled_caught:
                        raise_closed = True
            if raise_closed:
                with trio.CancelScope(shield=True):
                    await self.protocol.handle(Closed())
        elif isinstance(event, Closed):
            # shielded: quart-trio cancels the request task that is sending this (see above)
            with trio.CancelScope(shield=True):
                await self._close()
                await self.protocol.handle(Closed())
        elif isinstance(event, Updated):
            self._idle_since = time.monotonic() if event.idle else None
            with trio.CancelScope(shield=True):
                if event.idle:
                    await self.idle_task.restart(self._task_group, self._idle_timeout)
                else:
                    await self.idle_task.stop()

    async def _close(self) -> None:
        try:
            await super()._close()
        except OSError:
            pass


def abort_all(why: str = "shutdown") -> int:
    """Drop every open connection at once (writes in progress cancelled); returns how many."""
    conns = list(_LIVE)
    for conn in conns:
        conn.abort(why)
    return len(conns)


def install(*, send_timeout: float | None = None, max_connections: int | None = None) -> Limits:
    """Make hypercorn's trio worker use :class:`GuardedTCPServer` (process-wide) and set the
    limits (``None``: keep the current value). Returns the limits.

    Raises:
        ValueError: a limit that is not positive.
    """
    if send_timeout is not None:
        if not (send_timeout > 0 and math.isfinite(send_timeout)):
            raise ValueError(f"the send timeout must be a positive number of seconds, got {send_timeout}")
        _LIMITS.send_timeout = send_timeout
    if max_connections is not None:
        if max_connections < 1:
            raise ValueError(f"the connection cap must be ≥ 1, got {max_connections}")
        _LIMITS.max_connections = max_connections
    hypercorn_run.TCPServer = GuardedTCPServer  # type: ignore[misc]
    return _LIMITS

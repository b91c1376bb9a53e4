"""Single-use tickets for the live-terminal WebSocket (``POST /sessions/{name}/ticket``)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

__all__ = ["Ticket", "Tickets"]


@dataclass(frozen=True, slots=True)
class Ticket:
    """A single-use terminal ticket: ``session``, ``input`` allowed, ``expires`` (monotonic
    seconds), the ``user_id`` it was issued to."""

    session: str
    input: bool
    expires: float
    user_id: int


class Tickets:
    """Issues and redeems :class:`Ticket` s, each valid ``ttl`` seconds (kept in memory: a
    restart invalidates them, which is what a 30-second ticket wants)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._tickets: dict[str, Ticket] = {}

    def issue(self, session: str, *, input: bool, user_id: int) -> str:
        """A fresh ticket string for ``session``."""
        now = time.monotonic()
        self._tickets = {k: t for k, t in self._tickets.items() if t.expires > now}
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = Ticket(session, input, now + self.ttl, user_id)
        return ticket

    def redeem(self, ticket: str, session: str) -> Ticket | None:
        """The ticket's grant if valid for ``session`` (it is consumed either way)."""
        grant = self._tickets.pop(ticket, None)
        if grant is None or grant.expires < time.monotonic() or grant.session != session:
            return None
        return grant

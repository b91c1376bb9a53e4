"""Server-side login sessions.

The browser holds only a random session id (cookie ``elowen_session``: HttpOnly,
SameSite=Strict); the daemon token it logged in with stays here, in memory. Restarting the
web process therefore logs everyone out (by design: nothing secret is written to disk).
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COOKIE_NAME", "SessionStore", "WebSession"]

COOKIE_NAME = "elowen_session"


@dataclass(slots=True)
class WebSession:
    """One logged-in browser.

    Attributes:
        id: the cookie value (43 URL-safe characters).
        token: the daemon token (never sent to the browser).
        user: the daemon's ``GET /users/me`` answer at login.
        csrf: the per-session CSRF token, given to pages in a meta tag.
        last_seen: ``time.monotonic()`` of the last request.
    """

    id: str
    token: str
    user: dict[str, Any]
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def is_admin(self) -> bool:
        return self.user.get("role") == "admin"

    def csrf_ok(self, candidate: str | None) -> bool:
        """Whether ``candidate`` is this session's CSRF token (constant-time compare)."""
        return bool(candidate) and hmac.compare_digest(candidate.encode(), self.csrf.encode())  # type: ignore[union-attr]


class SessionStore:
    """Sessions by id, expiring after ``idle`` seconds without use."""

    def __init__(self, idle: float) -> None:
        self._idle = idle
        self._sessions: dict[str, WebSession] = {}

    def create(self, token: str, user: dict[str, Any]) -> WebSession:
        """A new session for ``token`` (its id is fresh: no session fixation)."""
        self._expire()
        session = WebSession(id=secrets.token_urlsafe(32), token=token, user=user)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> WebSession | None:
        """The live session with that id (refreshing its idle timer), or ``None``."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_seen > self._idle:
            del self._sessions[session_id]
            return None
        session.last_seen = now
        return session

    def drop(self, session_id: str | None) -> None:
        """Forget a session (logout, or the daemon refused its token)."""
        if session_id:
            self._sessions.pop(session_id, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for sid in [s.id for s in self._sessions.values() if now - s.last_seen > self._idle]:
            del self._sessions[sid]

    def __len__(self) -> int:
        return len(self._sessions)

"""The web process's shared state, reachable from any request as :func:`web_state`."""

from __future__ import annotations

from dataclasses import dataclass, field

from quart import current_app

from .config import WebConfig
from .sessions import SessionStore
from .upstream import Upstream

__all__ = ["EXTENSION", "WebState", "web_state"]

EXTENSION = "elowen.web"


@dataclass(slots=True)
class WebState:
    """Configuration, login sessions and the daemon client.

    ``last_event_id`` is the highest event id relayed to any browser (the timeline starts a
    little before it so a fresh page shows recent history)."""

    config: WebConfig
    sessions: SessionStore
    upstream: Upstream | None = None
    last_event_id: int = 0
    streams: int = field(default=0)

    @property
    def daemon(self) -> Upstream:
        assert self.upstream is not None, "the daemon client exists while serving"
        return self.upstream


def web_state() -> WebState:
    """The running app's :class:`WebState`."""
    return current_app.extensions[EXTENSION]  # type: ignore[no-any-return]

"""The webhook platform's limits and config checks, shared by the inbound route and the adapter."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

__all__ = ["MAX_TEXT", "MAX_USER", "MIN_SECRET", "RateLog", "config_problem", "host_of"]

MIN_SECRET = 16
"""Characters the shared secret needs at least (shorter: the platform is not configured)."""
MAX_TEXT = 8_000
"""Characters an inbound message may have (longer: ``413 too_long``). A chat message, not a
document: the brain's channel turns take at most this much."""
MAX_USER = 200
"""Characters a sender id may have."""


def host_of(url: str) -> str:
    """Only the host (and a non-default port) of ``url`` — what the plugin's logs name, since
    webhook URLs often carry tokens in their path or query. ``"(invalid URL)"`` if it has none."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "(invalid URL)"
    if not parsed.host:
        return "(invalid URL)"
    return f"{parsed.host}:{parsed.port}" if parsed.port else parsed.host


def config_problem(config: Mapping[str, Any]) -> str | None:
    """Why the platform cannot work with ``config`` (``secret``, ``callback_url``), or ``None``.

    The secret must have at least :data:`MIN_SECRET` characters; the callback URL must be an
    absolute ``http``/``https`` URL with a host.
    """
    secret, callback = str(config.get("secret") or ""), str(config.get("callback_url") or "").strip()
    missing = [key for key, value in (("secret", secret), ("callback_url", callback)) if not value]
    if missing:
        return f"set the webhook plugin's {' and '.join(missing)} first"
    if len(secret) < MIN_SECRET:
        return f"the webhook plugin's secret is too short: use at least {MIN_SECRET} characters"
    try:
        url = httpx.URL(callback)
    except (httpx.InvalidURL, TypeError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        return "the webhook plugin's callback_url must be an absolute http:// or https:// URL"
    return None


class RateLog:
    """Counts events and says when to report them: at most once per ``interval`` seconds.

    ``hit()`` returns the number of events since the last report when a report is due (the
    first event reports at once), else ``None``.
    """

    def __init__(self, interval: float = 60.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._count = 0
        self._last: float | None = None

    def hit(self) -> int | None:
        """Count one event; the count to report now, or ``None``."""
        self._count += 1
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            return None
        count, self._count, self._last = self._count, 0, now
        return count

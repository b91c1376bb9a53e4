"""Pane activity for the liveness sweep: whether an agent's screen still changes.

:class:`ActivityTracker` — pane activity from the capture's hash and length over time:
``active`` → ``idle`` → ``stalled``; one stall *episode* lasts until the screen changes again.
Pure: callers pass ``now`` (monotonic seconds).
"""

from __future__ import annotations

__all__ = ["ActivityTracker"]


class ActivityTracker:
    """Pane activity from ``(hash, length)`` of successive captures.

    ``state(now)`` is ``active`` while the screen changed within ``idle_after`` seconds,
    ``idle`` after that, ``stalled`` after ``stall_after`` seconds without a change. A stall
    *episode* starts when ``stalled`` is first reported and ends when the screen changes;
    :meth:`new_stall` is true once per episode.
    """

    __slots__ = ("idle_after", "stall_after", "_key", "last_change", "_in_stall")

    def __init__(self, *, idle_after: float = 30.0, stall_after: float = 300.0, now: float = 0.0) -> None:
        if not 0 < idle_after <= stall_after:
            raise ValueError("need 0 < idle_after <= stall_after")
        self.idle_after = idle_after
        self.stall_after = stall_after
        self._key: tuple[str, int] | None = None
        self.last_change = now
        self._in_stall = False

    def observe(self, shash: str, length: int, now: float) -> bool:
        """Record a capture; returns whether the screen changed (a change ends a stall episode)."""
        key = (shash, length)
        if key == self._key:
            return False
        self._key = key
        self.last_change = now
        self._in_stall = False
        return True

    def state(self, now: float) -> str:
        """``active``, ``idle`` or ``stalled``."""
        quiet = now - self.last_change
        if quiet >= self.stall_after:
            return "stalled"
        return "idle" if quiet >= self.idle_after else "active"

    def new_stall(self, now: float) -> bool:
        """True the first time ``stalled`` is seen in an episode (raise one ``check`` then)."""
        if self._in_stall or self.state(now) != "stalled":
            return False
        self._in_stall = True
        return True

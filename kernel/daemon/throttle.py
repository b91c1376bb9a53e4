"""Brute-force protection for ``POST /auth/login``: failed attempts per user name in a
sliding window.

After :attr:`LoginThrottle.limit` failures for one name within :attr:`LoginThrottle.window`
seconds, logins for that name are refused (429 ``too_many_attempts`` with ``Retry-After``)
until the oldest of those failures leaves the window; attempts made meanwhile are not checked
and do not extend it. A successful login clears the name's failures. Names that do not exist
are counted the same way (no user enumeration).

Refused attempts are audited sparingly (an attacker hammering one name must not grow the
audit table without bound): :meth:`LoginThrottle.refused` says when to write a "throttled" row
(at most one per name per :attr:`LoginThrottle.window`) and how many refused attempts it
stands for; the ones not written are counted in memory and reported by the next row for that
name (the next "throttled" row, or :meth:`LoginThrottle.take_unaudited` for the next attempt
that is checked).

The record is in memory only: a daemon restart forgets it. At most :attr:`max_names` names are
tracked (failures and refusals each); past that, the names whose latest entry is oldest are
forgotten first.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

__all__ = ["LoginThrottle"]


class LoginThrottle:
    """Failed logins per name.

    Args:
        limit: failures allowed within ``window`` (the next attempt is refused).
        window: seconds.
        max_names: names tracked at most.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, *, limit: int = 5, window: float = 60.0, max_names: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self.max_names = max_names
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        # name -> [time of the last audited refusal, refusals not audited since]
        self._refusals: OrderedDict[str, list[float]] = OrderedDict()

    def _recent(self, name: str, now: float) -> deque[float] | None:
        times = self._failures.get(name)
        if times is None:
            return None
        while times and now - times[0] >= self.window:
            times.popleft()
        if not times:
            del self._failures[name]
            return None
        return times

    def retry_after(self, name: str) -> int | None:
        """Whole seconds (≥ 1) until ``name`` may try again, or ``None`` if it may now."""
        now = self._clock()
        times = self._recent(name, now)
        if times is None or len(times) < self.limit:
            return None
        return max(1, math.ceil(times[-self.limit] + self.window - now))

    def failed(self, name: str) -> None:
        """Record a failed login for ``name``."""
        now = self._clock()
        times = self._recent(name, now)
        if times is None:
            times = self._failures[name] = deque(maxlen=self.limit)
        times.append(now)
        self._failures.move_to_end(name)
        while len(self._failures) > self.max_names:
            self._failures.popitem(last=False)

    def refused(self, name: str) -> int | None:
        """Record an attempt for ``name`` refused because it is throttled. Returns how many
        refused attempts an audit row written now should stand for (this one plus those not
        audited since the last row), or ``None`` when a row was already written for ``name``
        less than :attr:`window` seconds ago (this attempt is only counted)."""
        now = self._clock()
        entry = self._refusals.get(name)
        if entry is not None and now - entry[0] < self.window:
            entry[1] += 1
            self._refusals.move_to_end(name)
            return None
        attempts = 1 + (int(entry[1]) if entry is not None else 0)
        self._refusals[name] = [now, 0]
        self._refusals.move_to_end(name)
        while len(self._refusals) > self.max_names:
            self._refusals.popitem(last=False)
        return attempts

    def take_unaudited(self, name: str) -> int:
        """How many refused attempts for ``name`` no audit row has reported yet; resets the
        count (the caller puts it into the row it writes next for ``name``)."""
        entry = self._refusals.get(name)
        if entry is None:
            return 0
        count = int(entry[1])
        if self._clock() - entry[0] >= self.window:
            del self._refusals[name]
        else:
            entry[1] = 0
        return count

    def succeeded(self, name: str) -> None:
        """Forget ``name``'s failures."""
        self._failures.pop(name, None)

    def __len__(self) -> int:
        return len(self._failures)

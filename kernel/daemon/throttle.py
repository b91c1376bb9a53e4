"""Brute-force protection for ``POST /auth/login``: failed attempts per user name in a
sliding window.

After :attr:`LoginThrottle.limit` failures for one name within :attr:`LoginThrottle.window`
seconds, logins for that name are refused (429 ``too_many_attempts`` with ``Retry-After``)
until the oldest of those failures leaves the window; attempts made meanwhile are not checked
and do not extend it. A successful login clears the name's failures. Names that do not exist
are counted the same way (no user enumeration).

The record is in memory only: a daemon restart forgets it. At most :attr:`max_names` names are
tracked; past that, the names whose latest failure is oldest are forgotten first.
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

    def __init__(
        self, *, limit: int = 5, window: float = 60.0, max_names: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window = window
        self.max_names = max_names
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

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

    def succeeded(self, name: str) -> None:
        """Forget ``name``'s failures."""
        self._failures.pop(name, None)

    def __len__(self) -> int:
        return len(self._failures)

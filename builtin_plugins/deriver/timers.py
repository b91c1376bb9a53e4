"""Debounce wake-ups shared by every watched pane, and a cheap uncontended lock."""

from __future__ import annotations

import heapq
import itertools

import trio

__all__ = ["TIMER_GRID", "Locked", "Timers"]

TIMER_GRID = 0.01
"""Seconds: debounce timers due within this long of the earliest one fire with it (one wake-up
of :class:`Timers` serves them all; a timer fires at most this much late)."""


class Timers:
    """The debounce wake-ups of every pane, served by one task (:meth:`run`).

    A trio sleep costs a deadline and a cancellation; with 50 busy panes that was hundreds of
    cancelled sleeps a second. Here a waiting pane parks on an event and :meth:`run` sleeps once
    per :data:`TIMER_GRID` batch. When :meth:`run` is not running, :meth:`sleep_until` falls
    back to ``trio.sleep``. Times are ``trio.current_time()`` seconds.
    """

    def __init__(self, grid: float = TIMER_GRID) -> None:
        self.grid = grid
        self.running = False
        self._heap: list[tuple[float, int, trio.Event]] = []
        self._seq = itertools.count()
        self._changed = trio.Event()
        self._target: float | None = None

    async def sleep_until(self, when: float) -> None:
        """Return at ``when`` (at most :attr:`grid` later)."""
        if not self.running:
            await trio.sleep_until(when)
            return
        event = trio.Event()
        heapq.heappush(self._heap, (when, next(self._seq), event))
        if self._target is None or when + self.grid < self._target:
            self._changed.set()
        await event.wait()

    async def run(self) -> None:
        """Fire due timers until cancelled (then every waiter is released)."""
        self.running = True
        heap = self._heap
        try:
            while True:
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    heapq.heappop(heap)[2].set()
                self._changed = trio.Event()
                if heap:
                    self._target = heap[0][0] + self.grid
                    with trio.move_on_at(self._target):
                        await self._changed.wait()
                else:
                    self._target = None
                    await self._changed.wait()
        finally:
            self.running = False
            self._target = None
            while heap:
                heapq.heappop(heap)[2].set()


class Locked:
    """``async with Locked(lock)``: like ``async with lock`` but an uncontended lock is taken
    without a scheduling round trip (the body has checkpoints of its own)."""

    __slots__ = ("lock",)

    def __init__(self, lock: trio.Lock) -> None:
        self.lock = lock

    async def __aenter__(self) -> None:
        try:
            self.lock.acquire_nowait()
        except trio.WouldBlock:
            await self.lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.lock.release()

"""``Timers``: the shared debounce wake-ups of the supervisor (real trio clock, no tmux)."""

from __future__ import annotations

import trio

from elowen_builtins.deriver.timers import Timers


async def test_waiters_wake_in_order_not_early_and_within_the_grid() -> None:
    timers = Timers(grid=0.01)
    woke: dict[int, float] = {}

    async def wait(i: int, delay: float) -> None:
        await timers.sleep_until(start + delay)
        woke[i] = trio.current_time() - start

    async with trio.open_nursery() as nursery:
        nursery.start_soon(timers.run)
        await trio.sleep(0)
        start = trio.current_time()
        async with trio.open_nursery() as inner:
            for i, delay in enumerate((0.08, 0.02, 0.05, 0.051)):
                inner.start_soon(wait, i, delay)
        nursery.cancel_scope.cancel()
    for i, delay in enumerate((0.08, 0.02, 0.05, 0.051)):
        assert delay <= woke[i] < delay + 0.01 + 0.03  # the grid plus scheduling slack
    assert woke[1] < woke[2] < woke[0]


async def test_without_the_runner_it_sleeps_itself() -> None:
    timers = Timers()
    start = trio.current_time()
    await timers.sleep_until(start + 0.03)
    assert trio.current_time() - start >= 0.03


async def test_stopping_the_runner_releases_waiters() -> None:
    timers = Timers()
    released = trio.Event()

    async def wait() -> None:
        await timers.sleep_until(trio.current_time() + 3600)
        released.set()

    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as runner:
            runner.start_soon(timers.run)
            await trio.sleep(0.01)
            outer.start_soon(wait)
            await trio.sleep(0.01)
            runner.cancel_scope.cancel()
        with trio.fail_after(1):
            await released.wait()
    assert not timers.running

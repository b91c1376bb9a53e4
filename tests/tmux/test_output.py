"""OutputStream: coalescing, bounded backlog, end of stream (no tmux needed)."""

from __future__ import annotations

import trio

from elowen_builtins.tmux import OutputStream


async def test_coalesces_per_pane() -> None:
    s = OutputStream("demo")
    s.push("%1", b"ab")
    s.push("%1", b"cd")
    s.push("%2", b"x")
    s.push("%1", b"e")
    got = [await s.receive() for _ in range(3)]
    assert [(e.pane_id, e.data, e.lost) for e in got] == [("%1", b"abcd", False), ("%2", b"x", False), ("%1", b"e", False)]


async def test_slow_consumer_is_bounded_and_told() -> None:
    s = OutputStream("demo", limit=100)
    for _ in range(50):
        s.push("%1", b"0123456789")
    assert s._size <= 100
    first = await s.receive()
    assert first.lost
    assert len(first.data) <= 100
    s.push("%1", b"z")
    nxt = await s.receive()
    assert nxt.data == b"z" and not nxt.lost


async def test_end_drains_then_stops() -> None:
    s = OutputStream("demo")
    s.push("%1", b"last")
    s.end()
    assert [e.data async for e in s] == [b"last"]


async def test_receive_waits_for_push() -> None:
    s = OutputStream("demo")
    got: list[bytes] = []

    async def consume() -> None:
        got.append((await s.receive()).data)

    async with trio.open_nursery() as n:
        n.start_soon(consume)
        await trio.sleep(0.01)
        assert got == []
        s.push("%1", b"hi")
    assert got == [b"hi"]


async def test_close_calls_back_once() -> None:
    closed: list[OutputStream] = []
    s = OutputStream("demo", on_close=closed.append)
    s.close()
    s.close()
    assert closed == [s]
    assert [e async for e in s] == []


async def test_push_counters_and_discard() -> None:
    s = OutputStream("demo")
    assert s.pushes == 0 and s.last_push == 0.0
    s.push("%1", b"ab")
    s.push("%1", b"cd")
    assert s.pushes == 2 and s.last_push > 0
    s.discard_pending()
    s.push("%1", b"e")
    got = await s.receive()
    assert (got.data, got.lost) == (b"e", False)

"""The shared platform helpers (elowen_sdk.platforms): secret files, chunking, replays, the
stranger rule, plain-word approvals, per-sender queues."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from elowen_sdk.platforms import PAIRING_WORDS, RecentIds, SecretError, SenderQueues, StrangerGate, approval_command, chunk_text, mask, read_secret


def test_read_secret_demands_a_private_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    with pytest.raises(SecretError, match="does not exist"):
        read_secret(path)
    path.write_text("  s3cret-value \n")
    path.chmod(0o644)
    with pytest.raises(SecretError, match="chmod 600") as exc:
        read_secret(path)
    assert "s3cret" not in str(exc.value)
    path.chmod(0o600)
    assert read_secret(path) == "s3cret-value"
    path.write_text("\n")
    with pytest.raises(SecretError, match="empty"):
        read_secret(path)
    link = tmp_path / "link"
    os.symlink(path, link)
    with pytest.raises(SecretError, match="not a regular file"):
        read_secret(link)
    assert mask("abcdefghijkl") == "…ijkl" and mask("short") == "…" and mask("") == ""


def test_chunk_text_keeps_within_the_limit_at_natural_boundaries() -> None:
    head = ("first paragraph " * 4).strip()  # 63 characters: a break past half the limit
    text = head + "\n\n" + "word " * 100
    pieces = chunk_text(text, 100)
    assert all(len(p) <= 100 for p in pieces) and pieces[0] == head
    assert " ".join(" ".join(pieces).split()) == " ".join(text.split())
    assert chunk_text("x" * 250, 100) == ["x" * 100, "x" * 100, "x" * 50]
    assert chunk_text("   ", 100) == []
    with pytest.raises(ValueError):
        chunk_text("a", 3)


def test_recent_ids_drop_replays_within_their_window() -> None:
    recent = RecentIds(size=2)
    assert not recent.seen("a") and recent.seen("a") and recent.duplicates == 1
    recent.seen("b")
    recent.seen("c")  # "a" falls out of the window
    assert not recent.seen("a")


def test_stranger_gate_silent_by_default_and_caps_pending_codes() -> None:
    now = [0.0]
    off = StrangerGate(pairing=False, clock=lambda: now[0])
    assert not off.may_pair("u1", "link", direct=True) and off.silenced == 1
    gate = StrangerGate(pairing=True, max_pending=2, ttl=60, clock=lambda: now[0])
    assert not gate.may_pair("u1", "hello", direct=True), "only a pairing word asks for a code"
    assert not gate.may_pair("u1", "link", direct=False), "only in a direct message"
    assert gate.may_pair("u1", "LINK", direct=True)
    assert not gate.may_pair("u1", "link", direct=True), "one live code per sender"
    assert gate.may_pair("u2", "/pair", direct=True)
    assert not gate.may_pair("u3", "link", direct=True) and gate.codes_refused == 1
    now[0] = 61.0  # codes expired
    assert gate.pending == 0 and gate.may_pair("u3", "link", direct=True)
    gate.linked("u3")
    assert gate.pending == 0 and {"link", "pair"} <= PAIRING_WORDS


def test_plain_words_answer_approvals() -> None:
    assert approval_command("approve 12") == "/allow 12"
    assert approval_command("Reject #7") == "/reject 7"
    assert approval_command("yes 3") == "/allow 3"
    assert approval_command("approve the plan") == "approve the plan"
    assert approval_command("hello") == "hello"


async def test_sender_queues_keep_each_senders_order_and_run_senders_side_by_side() -> None:
    """Forty items put in one burst (as a consumer loop or a thread's callbacks deliver them):
    each sender's are handled one at a time in the order put, while the two senders overlap."""
    handled: list[tuple[str, int]] = []
    running: dict[str, int] = {"a": 0, "b": 0}
    overlapped = False

    async def handle(item: tuple[str, int]) -> None:
        nonlocal overlapped
        sender, _ = item
        running[sender] += 1
        assert running[sender] == 1, "two items of one sender at once"
        overlapped = overlapped or all(running.values())
        await trio.sleep(0.001)
        await trio.lowlevel.checkpoint()
        handled.append(item)
        running[sender] -= 1

    queues: SenderQueues[tuple[str, int]] = SenderQueues(handle)
    async with trio.open_nursery() as nursery:
        for i in range(20):
            for sender in ("a", "b"):
                queues.put(sender, (sender, i), nursery.start_soon)
        assert len(queues) == 2 and queues.waiting("a") == 20
    for sender in ("a", "b"):
        assert [i for s, i in handled if s == sender] == list(range(20))
    assert overlapped, "the senders were handled one after the other"
    assert len(queues) == 0 and queues.waiting("a") == 0
    # a sender that comes back later gets a new drain
    async with trio.open_nursery() as nursery:
        queues.put("a", ("a", 99), nursery.start_soon)
    assert handled[-1] == ("a", 99) and len(queues) == 0


async def test_sender_queues_drop_a_sender_whose_handler_raised() -> None:
    seen: list[int] = []

    async def handle(item: int) -> None:
        seen.append(item)
        if item == 1:
            raise RuntimeError("handler bug")

    queues: SenderQueues[int] = SenderQueues(handle)
    with pytest.raises(BaseExceptionGroup) as exc:
        async with trio.open_nursery() as nursery:
            for i in range(3):
                queues.put("s", i, nursery.start_soon)
    assert exc.group_contains(RuntimeError, match="handler bug")
    assert seen == [0, 1] and len(queues) == 0  # nothing left behind for the next message to wait on


async def test_sender_queues_refuse_past_their_limit_per_sender() -> None:
    gate = trio.Event()
    handled: list[tuple[str, int]] = []

    async def handle(item: tuple[str, int]) -> None:
        await gate.wait()
        handled.append(item)

    queues: SenderQueues[tuple[str, int]] = SenderQueues(handle, limit=3)
    async with trio.open_nursery() as nursery:
        accepted = [queues.put("flood", ("flood", i), nursery.start_soon) for i in range(10)]
        assert queues.put("other", ("other", 0), nursery.start_soon), "another sender is not held back by the flood"
        assert accepted == [True] * 3 + [False] * 7 and queues.refused == 7
        gate.set()
    assert [i for s, i in handled if s == "flood"] == [0, 1, 2] and ("other", 0) in handled

"""The shared platform helpers (elowen_sdk.platforms): secret files, chunking, replays, the
stranger rule, plain-word approvals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from elowen_sdk.platforms import PAIRING_WORDS, RecentIds, SecretError, StrangerGate, approval_command, chunk_text, mask, read_secret


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

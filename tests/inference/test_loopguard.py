"""The loop guard that ends a local model's reply once it repeats a sentence a third time."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from elowen_builtins.inference.loopguard import MIN_SEGMENT, LoopGuard

LOOP = "Hello! I'm glad to help you today. " * 40  # what SmolLM2-135M answered "hello" with once


def _feed_in_pieces(guard: LoopGuard, text: str, size: int = 3) -> int:
    """Feed like a token stream; returns how many characters were fed before it said stop."""
    for i in range(0, len(text), size):
        if guard.feed(text[i : i + size]):
            return i + size
    guard.finish()
    return len(text)


def test_a_looping_reply_is_cut_before_the_third_repetition_and_stops_early() -> None:
    guard = LoopGuard()
    fed = _feed_in_pieces(guard, LOOP)
    assert guard.looped
    # "Hello!" is too short to count; the third "I'm glad to help you today." is cut
    assert guard.text == "Hello! I'm glad to help you today. Hello! I'm glad to help you today. Hello!"
    assert fed < len(LOOP) // 10  # generation stopped soon after the loop began


def test_a_reply_without_repeats_is_kept_whole() -> None:
    reply = "Sure. Here is the plan:\n1. Read the file.\n2. Fix the bug.\n3. Run the tests.\nDone."
    guard = LoopGuard()
    _feed_in_pieces(guard, reply)
    assert not guard.looped and guard.text == reply


def test_short_segments_repeat_freely_code_fences_and_braces() -> None:
    reply = "```python\nx = 1\n```\n```python\ny = 2\n```\n```python\nz = 3\n```\n}\n}\n}\n"
    guard = LoopGuard()
    _feed_in_pieces(guard, reply)
    assert not guard.looped and guard.text == reply


def test_a_loop_in_the_last_unterminated_line_counts_at_finish() -> None:
    guard = LoopGuard()
    text = "This line repeats here.\nThis line repeats here.\nThis line repeats here."
    assert not any(guard.feed(c) for c in text)
    assert guard.finish() and guard.text == "This line repeats here.\nThis line repeats here."


def test_disabled_guard_only_collects() -> None:
    guard = LoopGuard(enabled=False)
    _feed_in_pieces(guard, LOOP)
    assert not guard.looped and guard.text == LOOP


def _worst(text: str) -> int:
    segments = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) >= MIN_SEGMENT]
    return max([*Counter(segments).values(), 0])


sentences = st.sampled_from(["The cat sat on the mat.", "It was a sunny day!", "Why is the sky blue?", "ok.", "Line of code here\n"])


@given(st.lists(sentences, max_size=30), st.integers(min_value=1, max_value=9))
def test_any_stream_ends_with_no_long_segment_more_than_twice(parts: list[str], size: int) -> None:
    text = " ".join(parts)
    guard = LoopGuard()
    _feed_in_pieces(guard, text, size)
    assert _worst(guard.text) <= 2
    assert text.startswith(guard.text)  # only ever cut, never rewritten
    assert guard.looped == (_worst(text) > 2)

"""The control client's byte-level fast paths against the general protocol parser (no tmux)."""

from __future__ import annotations

import random

from elowen_builtins.tmux.control import _decode_output, _find_block_end
from elowen_builtins.tmux.protocol import decode_octal


def test_decode_output_matches_decode_octal() -> None:
    samples = [b"", b"abc", b"a\\015\\012", b"\\134x\\033[1m", b"\\999", b"x\\01", b"\\", b"end\\", b"\\777"]
    rng = random.Random(7)
    samples += [bytes(rng.choice(b"\\0123456789ab") for _ in range(rng.randrange(14))) for _ in range(5000)]
    for data in samples:
        assert _decode_output(data) == decode_octal(data), data


def test_block_end_needs_the_same_key_at_a_line_start() -> None:
    key = b"1700000000 42"
    body = b"line one\nx%end 1700000000 42 1\n%end 1700000000 41 1\n%begin 1700000000 42 1\n"
    buf = bytearray(body + b"%end 1700000000 42 1\nrest")
    found = _find_block_end(buf, 0, key)
    assert found is not None
    term, after, is_error = found
    assert (buf[term:after], is_error) == (b"%end 1700000000 42 1\n", False)
    assert bytes(buf[: term - 1]).split(b"\n") == body[:-1].split(b"\n")


def test_block_end_error_and_incomplete() -> None:
    key = b"5 6"
    assert _find_block_end(bytearray(b"oops\n%error 5 6 1"), 0, key) is None  # line not complete
    assert _find_block_end(bytearray(b"oops\n%error 5 6 1\n"), 0, key) == (5, 18, True)
    assert _find_block_end(bytearray(b"%end 5 6 1\n"), 0, key) == (0, 11, False)  # empty body
    assert _find_block_end(bytearray(b"ab\n%end 5 6 x\n"), 0, key) is None  # not a framing line

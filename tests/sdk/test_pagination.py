"""The one cursor format of every list route (``elowen_sdk.pagination``)."""

from __future__ import annotations

import base64

import pytest

from elowen_sdk import ElowenError, HTTPError
from elowen_sdk.pagination import BadCursor, decode_cursor, encode_cursor, page


def test_round_trip_and_opaque_shape() -> None:
    for value in (0, 1, 42, 10**18 - 1):
        cursor = encode_cursor(value)
        assert "=" not in cursor and cursor.isascii()
        assert decode_cursor(cursor) == value
    assert encode_cursor(7) == base64.urlsafe_b64encode(b"v1:7").decode().rstrip("=")  # the daemon's format since v1
    assert decode_cursor(None) is None and decode_cursor("") is None
    with pytest.raises(ValueError):
        encode_cursor(-1)


@pytest.mark.parametrize("bad", ["garbage!", "!!", "djE6LTE", "djE6", "ZDEy", "bzU", "YzoxMg", "djI6NQ", "djE6MTIzNDU2Nzg5MDEyMzQ1Njc4OTA", "djE6wrI"])
def test_refuses_what_it_did_not_produce(bad: str) -> None:
    """Garbage, ``v1:-1``, ``v1:``, the old per-plugin formats ``d12`` / ``o5`` / ``c:12``, another
    version, more than 18 digits, a non-ASCII digit: all ``BadCursor`` (400 ``bad_cursor``)."""
    with pytest.raises(BadCursor) as info:
        decode_cursor(bad)
    err = info.value
    assert isinstance(err, HTTPError) and isinstance(err, ElowenError) and isinstance(err, ValueError)
    assert (err.status, err.code) == (400, "bad_cursor")


def test_page_from_limit_plus_one_rows() -> None:
    rows = [{"id": i} for i in range(1, 6)]
    first = page(rows[:3], 2)
    assert first["items"] == [{"id": 1}, {"id": 2}] and decode_cursor(first["next_cursor"]) == 2
    last = page(rows[3:], 2)
    assert last == {"items": [{"id": 4}, {"id": 5}], "next_cursor": None}
    assert page([], 2) == {"items": [], "next_cursor": None}
    assert decode_cursor(page([{"k": 9}, {"k": 3}], 1, key="k")["next_cursor"]) == 9

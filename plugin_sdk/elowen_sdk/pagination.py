"""One pagination format for every list route, the daemon's and the plugins'.

A page answers ``{"items": [...], "next_cursor": "<opaque>" | None}`` (``None``: the last page).
The cursor is the key (an id) of the page's last item, encoded as unpadded URL-safe base64 of
``"v1:<id>"``; a client treats it as opaque and sends it back as ``?cursor=``. The route decides
the order (ascending ids, or newest first: then it reads ``id < after``)::

    from elowen_sdk.pagination import decode_cursor, page

    after = decode_cursor(req.query.get("cursor"))          # BadCursor (400) on garbage
    rows = store.query("SELECT ... WHERE id > ? ORDER BY id LIMIT ?", (after or 0, limit + 1))
    return page(rows, limit)                                # fetch one more than the limit
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from .types import HTTPError

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "BadCursor", "decode_cursor", "encode_cursor", "page"]

DEFAULT_LIMIT = 50
"""Items per page when the query gives no ``limit``."""
MAX_LIMIT = 500
"""The largest ``limit`` a list route accepts."""

_VERSION = "v1"
_MAX_DIGITS = 18  # ids are SQLite integers (< 2**63)


class BadCursor(HTTPError, ValueError):
    """A ``cursor`` this format did not produce: answered ``400 bad_cursor`` by a route that
    lets it propagate (it is an :class:`~elowen_sdk.HTTPError`)."""

    def __init__(self) -> None:
        super().__init__(400, "bad_cursor", "invalid cursor; use next_cursor from the previous page")


def encode_cursor(last_id: int) -> str:
    """The opaque cursor continuing after key ``last_id`` (an integer ≥ 0)."""
    value = int(last_id)
    if value < 0:
        raise ValueError(f"a cursor key must be >= 0, not {value}")
    return base64.urlsafe_b64encode(f"{_VERSION}:{value}".encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    """The key a cursor continues after; ``None`` for no cursor (``None`` or ``""``).

    Raises:
        BadCursor: not a cursor of this format (400 ``bad_cursor``).
    """
    if cursor is None or cursor == "":
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        prefix, _, value = text.partition(":")
        if prefix != _VERSION or not value.isascii() or not value.isdigit() or len(value) > _MAX_DIGITS:
            raise ValueError(text)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor() from None


def page(rows: Sequence[Mapping[str, Any]], limit: int, key: str = "id") -> dict[str, Any]:
    """``{"items": rows[:limit], "next_cursor": cursor | None}`` from up to ``limit + 1``
    fetched rows: a row beyond ``limit`` means there is a next page, which continues after
    the last item's ``key``."""
    items = list(rows[:limit])
    more = len(rows) > limit
    return {"items": items, "next_cursor": encode_cursor(items[-1][key]) if more and items else None}

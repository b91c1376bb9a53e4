"""Validation of row ids coming from HTTP requests (path parameters and JSON bodies).

SQLite stores integers as signed 64-bit values; a larger Python ``int`` bound as a query
parameter raises ``OverflowError`` (which would surface as a 500). Every id the overseer routes
accept therefore goes through :func:`path_id` (strings from ``Request.params``/``query``) or
:func:`body_id` (JSON values) first.
"""

from __future__ import annotations

import re
from typing import Any

from elowen_sdk import HTTPError

__all__ = ["MAX_ID", "body_id", "body_ids", "path_id"]

MAX_ID = 2**63 - 1
"""The largest id SQLite can hold (``INTEGER PRIMARY KEY`` is a signed 64-bit value)."""

_DIGITS = re.compile(r"[0-9]{1,19}")


def parse_id(value: Any) -> int | None:
    """``value`` as an id in ``1..MAX_ID``, or ``None`` when it is not one.

    Accepts a JSON integer (not a ``bool``) or a string of ASCII digits; anything else (signs,
    spaces, Unicode digits, floats, zero, values above ``MAX_ID``) gives ``None``.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not _DIGITS.fullmatch(value):
            return None
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_ID:
        return None
    return value


def path_id(value: str, what: str = "id") -> int:
    """A path parameter as an id; raises ``HTTPError(404, "not_found")`` when it is not one
    (an id that cannot exist is simply not found)."""
    parsed = parse_id(value)
    if parsed is None:
        raise HTTPError(404, "not_found", f"{what} {value!r} not found")
    return parsed


def body_id(value: Any, field: str, *, strings: bool = False) -> int:
    """A JSON body value as an id (with ``strings``, a digit string too, as in a query);
    raises ``HTTPError(422, "validation_error")`` when it is not one."""
    parsed = parse_id(value) if strings or not isinstance(value, str) else None
    if parsed is None:
        raise HTTPError(422, "validation_error", f"{field} must be a positive integer id (at most {MAX_ID})")
    return parsed


def body_ids(value: Any, field: str, *, allow_empty: bool = False) -> list[int]:
    """A JSON list of ids; raises ``HTTPError(422, "validation_error")`` when ``value`` is not a
    list, is empty (unless ``allow_empty``) or holds anything but ids."""
    if not isinstance(value, list) or (not value and not allow_empty):
        raise HTTPError(422, "validation_error", f"{field} must be a {'' if allow_empty else 'non-empty '}list of ids")
    return [body_id(v, field) for v in value]

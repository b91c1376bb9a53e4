"""The kernel store as a plugin sees it (``ctx.store``, capability ``store``), and the
timestamp format every table uses.

The store is one SQLite file (WAL) behind a synchronous API that runs on the trio thread:
never ``await`` inside :meth:`Store.transaction`, other tasks share the connection. A plugin
reads and writes only its own tables (declared in its schema file); other plugins' data is
reached through their services.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

__all__ = ["Params", "Store", "utc_iso"]

Params = Sequence[Any] | Mapping[str, Any]
"""Statement parameters: positional (``?``) or named (``:name``)."""


def utc_iso(t: float | None = None) -> str:
    """``t`` (seconds since the epoch; now if ``None``) as UTC ISO 8601 with milliseconds,
    e.g. ``"2026-11-30T12:00:00.123Z"``: the format of every timestamp column and API field
    (it sorts as text in time order)."""
    if t is None:
        t = time.time()
    secs = int(t)
    ms = int((t - secs) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"


class Store(Protocol):
    """The kernel store (``ctx.store``)."""

    def query(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        """Run one statement; every row as ``{column: value}``."""
        ...

    def query_one(self, sql: str, params: Params = ()) -> dict[str, Any] | None:
        """The first row of :meth:`query`, or ``None`` when there is none."""
        ...

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run a statement (or a script of several). Returns, for an ``INSERT``/``REPLACE``, the
        new row's rowid (0 when no row was inserted); otherwise the number of rows changed."""
        ...

    def executemany(self, sql: str, seq: Iterable[Params]) -> None:
        """Run one statement for each parameter set in ``seq``."""
        ...

    def transaction(self) -> AbstractContextManager[Store]:
        """A transaction (``BEGIN IMMEDIATE``; nested use opens a savepoint): commits on normal
        exit, rolls back on any exception, which propagates."""
        ...

    def audit(self, actor: str, action: str, target: str = "", outcome: str = "ok", detail: Mapping[str, Any] | None = None) -> None:
        """Queue an audit record (never blocks); ``detail`` must be JSON-serialisable."""
        ...

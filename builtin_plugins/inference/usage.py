"""Token usage per relay call, in the ``inference_usage`` table (``schema.sql``).

One small insert per call, on the trio thread (the kernel store's connection is trio-only; a
single-row WAL commit with ``synchronous = NORMAL`` takes microseconds). A failed write is
logged and never fails the chat call.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from .types import Usage

__all__ = ["SCHEMA_PATH", "UsageLog"]

log = logging.getLogger("elowen.plugin.inference")

SCHEMA_PATH = Path(__file__).with_name("schema.sql")

_INSERT = "INSERT INTO inference_usage (ts, provider, model, input_tokens, output_tokens, latency_ms, ok, purpose) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


def _utc_iso() -> str:
    """Now as UTC ISO 8601 with milliseconds (``2026-11-30T12:00:00.123Z``)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


class UsageLog:
    """Writes and reads ``inference_usage`` through the kernel store (``None``: record nothing).

    The store must have the plugin schema applied (the kernel does it when the plugin is
    enabled; tests call ``store.apply_plugin_schema("inference", SCHEMA_PATH.read_text(), 1)``).
    """

    def __init__(self, store: Any | None) -> None:
        self.store = store

    def record(self, *, provider: str, model: str, usage: Usage, latency_ms: int, ok: bool, purpose: str = "") -> None:
        """Insert one row; errors are logged, not raised."""
        if self.store is None:
            return
        try:
            self.store.execute(
                _INSERT,
                (_utc_iso(), provider, model, usage.input_tokens, usage.output_tokens, int(latency_ms), 1 if ok else 0, purpose),
            )
        except Exception:
            log.exception("could not record inference usage for %s/%s", provider, model)

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest ``limit`` rows, newest first, as dicts of the table's columns."""
        if self.store is None:
            return []
        return self.store.query("SELECT * FROM inference_usage ORDER BY id DESC LIMIT ?", (int(limit),))

    def totals(self, since: str | None = None) -> list[dict[str, Any]]:
        """Per provider and model: ``{provider, model, calls, failed, input_tokens,
        output_tokens, latency_ms_avg}``, over rows with ``ts >= since`` (ISO 8601) or all."""
        if self.store is None:
            return []
        return self.store.query(
            "SELECT provider, model, COUNT(*) AS calls, SUM(1 - ok) AS failed, "
            "SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
            "CAST(AVG(latency_ms) AS INTEGER) AS latency_ms_avg FROM inference_usage "
            "WHERE ts >= ? GROUP BY provider, model ORDER BY provider, model",
            (since or "",),
        )

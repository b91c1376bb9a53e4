"""A small SSE reader for the tests (WHATWG "Server-sent events" parsing)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class SseEvent:
    id: int | None
    type: str
    data: Any
    received: float  # time.perf_counter()


async def read_sse(response: httpx.Response, *, comments: list[str] | None = None) -> AsyncIterator[SseEvent]:
    """Events of a streaming response; comment lines go to ``comments``."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                yield SseEvent(int(fields["id"]) if "id" in fields else None, fields.get("event", "message"), json.loads(fields["data"]), time.perf_counter())
            fields = {}
            continue
        if line.startswith(":"):
            if comments is not None:
                comments.append(line[1:].strip())
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value

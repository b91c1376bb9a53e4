"""Plugin glue of ``curator``: collects the owner's messages from ``brain.message`` events,
and its loop ``curator.tick`` starts one bounded, fire-and-forget batch per exchange that has
been quiet for ``quiet_seconds`` (at most ``max_batches_per_hour`` per user).

Only ``role = "user"`` messages with a user id are collected (see :mod:`.gate`), and none
marked with an ``origin`` (the brain marks a sub-agent's task, which a model wrote, as
``delegated``); assistant messages only mark the exchange as active. With ``auto = false`` (the default) nothing is
collected.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import trio

from elowen_sdk import Loop, hookimpl
from elowen_sdk.services import InferenceService, MemoryService

from .curate import curate

__all__ = ["on_event", "on_unload", "register_loops"]

log = logging.getLogger("elowen.plugin.curator")

MAX_PENDING_MESSAGES = 20
MAX_CONVERSATIONS = 500


@dataclass(slots=True)
class _Exchange:
    user_id: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    last: float = 0.0


@dataclass(slots=True)
class _State:
    exchanges: dict[str, _Exchange] = field(default_factory=dict)
    batches: dict[int, deque[float]] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)  # the last batches' outcomes (tests, logs)


_states: dict[str, _State] = {}  # plugin name → the state of the current enable


def _state(ctx: Any) -> _State:
    return _states.setdefault(ctx.name, _State())


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    """Collect the owner's messages of each conversation."""
    if event.type != "brain.message" or not ctx.config.get("auto", False):
        return
    data = event.data
    user_id = data.get("user_id")
    conv = str(data.get("conversation_id", ""))
    if not isinstance(user_id, int) or isinstance(user_id, bool) or not conv:
        return
    state = _state(ctx)
    ex = state.exchanges.get(conv)
    if ex is None:
        if len(state.exchanges) >= MAX_CONVERSATIONS:
            return
        ex = state.exchanges[conv] = _Exchange(user_id)
    ex.last = trio.current_time()
    content = data.get("content")
    if data.get("origin") is not None:  # not typed by the owner (a sub-agent's task, written by a model)
        return
    if data.get("role") == "user" and isinstance(content, str) and content.strip() and not content.startswith("/"):
        ex.messages.append({"text": content[:4000], "event_id": event.id})
        del ex.messages[:-MAX_PENDING_MESSAGES]


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    """``curator.tick``: start a batch for every settled exchange."""

    async def tick() -> None:
        state = _state(ctx)
        now = trio.current_time()
        quiet = float(ctx.config.get("quiet_seconds", 120.0))
        for conv, ex in list(state.exchanges.items()):
            if now - ex.last < quiet:
                continue
            del state.exchanges[conv]
            if not ex.messages:
                continue
            window = state.batches.setdefault(ex.user_id, deque())
            while window and now - window[0] > 3600:
                window.popleft()
            if len(window) >= int(ctx.config.get("max_batches_per_hour", 6)):
                log.info("user %s: curation skipped (max_batches_per_hour reached)", ex.user_id)
                continue
            window.append(now)
            ctx.start_soon(_run, ctx, conv, ex, name=f"curator.batch.{conv}")

    register(Loop("curator.tick", float(ctx.config.get("tick_seconds", 5.0)), tick))


async def _run(ctx: Any, conv: str, ex: _Exchange) -> None:
    result: dict[str, Any] = {"conversation_id": conv, "user_id": ex.user_id}
    try:
        with trio.move_on_after(float(ctx.config.get("timeout_seconds", 60.0))) as scope:
            memory = ctx.service(MemoryService)
            relay = ctx.service(InferenceService)
            result.update(await curate(memory, relay, user_id=ex.user_id, conversation_id=conv, messages=ex.messages, config=ctx.config))
        if scope.cancelled_caught:
            result["error"] = "timed out"
            log.warning("curation of conversation %s timed out", conv)
    except Exception as exc:  # fire-and-forget: never into the chat, never out of the nursery
        result["error"] = f"{type(exc).__name__}: {exc}"
        log.exception("curation of conversation %s failed", conv)
    state = _state(ctx)
    state.results.append(result)
    del state.results[:-50]


@hookimpl
def on_unload(ctx: Any) -> None:
    """Drop the collected messages."""
    _states.pop(ctx.name, None)

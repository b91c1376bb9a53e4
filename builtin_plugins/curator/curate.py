"""One curation batch: the owner's settled messages → a model call → gated memory operations.

Bounded: at most ``max_ops`` operations, ``max_input_chars`` of input, ``max_tokens`` of
output, and the caller's time limit. Fire-and-forget: :func:`curate` never raises into its
caller (a failure is logged and returned as ``{"error": ...}``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from elowen_sdk import ElowenError
from elowen_sdk.chat import ChatRequest, Message
from elowen_sdk.services import InferenceService, MemoryService

from .gate import OPS_SCHEMA, grounded, has_secret, looks_like_instruction, owner_text, parse_operations

__all__ = ["ACTOR", "curate", "prompt"]

log = logging.getLogger("elowen.plugin.curator.curate")

ACTOR = "curator"


def prompt(max_ops: int) -> str:
    """The system prompt (``prompt.md`` beside this module)."""
    return resources.files(__package__).joinpath("prompt.md").read_text(encoding="utf-8").format(max_ops=max_ops)


async def curate(
    memory: MemoryService,
    relay: InferenceService,
    *,
    user_id: int,
    conversation_id: str,
    messages: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """Run one batch for ``messages`` (``{"text", "event_id"}`` of the owner's own messages,
    oldest first). Returns ``{"applied": [...], "rejected": [...]}`` or ``{"error": ...}``."""
    max_ops = int(config.get("max_ops", 5))
    texts = owner_text(messages)
    budget = int(config.get("max_input_chars", 6000))
    kept: list[str] = []
    used = 0
    for text in reversed(texts):  # the newest messages first, within the budget
        if used + len(text) > budget:
            break
        kept.insert(0, text)
        used += len(text)
    if not kept:
        return {"applied": [], "rejected": [], "skipped": "no owner text"}
    message_id = str(messages[-1].get("event_id", ""))
    try:
        nearest = await memory.recall(user_id, "\n".join(kept)[-2000:], limit=10, bump=False)
        stored = [{"id": m.id, "text": m.text, "kind": m.kind} for m in nearest]
        request = ChatRequest(
            str(config.get("model", "")),
            [
                Message("system", prompt(max_ops)),
                Message(
                    "user",
                    "Stored memories:\n"
                    + json.dumps(stored, ensure_ascii=False)
                    + "\n\nThe user's messages (data, oldest first):\n"
                    + "\n".join(f"<message>{t}</message>" for t in kept),
                ),
            ],
            response_schema=OPS_SCHEMA,
            schema_name="memory_operations",
            max_tokens=int(config.get("max_tokens", 600)),
            temperature=0.0,
            purpose="curator",
        )
        answer = await relay.chat(request)
    except ElowenError as exc:
        log.warning("curation of conversation %s failed: %s", conversation_id, exc)
        return {"error": str(exc)}
    allowed_ids = {m["id"] for m in stored}
    applied: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for op in parse_operations(answer.text, max_ops=max_ops):
        reason = None
        if any(i not in allowed_ids for i in op.ids):
            reason = "names a memory it was not shown"
        elif op.text and (has_secret(op.text) or looks_like_instruction(op.text)):
            reason = "secret or instruction"
        elif op.text and not grounded(op.text, kept):
            reason = "not grounded in the user's own messages"
        if reason:
            rejected.append({"op": op.op, "reason": reason})
            continue
        try:
            applied.append(await _apply(memory, op, user_id, conversation_id, message_id))
        except (ElowenError, ValueError, LookupError) as exc:
            rejected.append({"op": op.op, "reason": str(exc)})
    if applied or rejected:
        log.info("conversation %s: %d memory operations applied, %d rejected", conversation_id, len(applied), len(rejected))
    return {"applied": applied, "rejected": rejected}


async def _apply(memory: MemoryService, op: Any, user_id: int, conversation_id: str, message_id: str) -> dict[str, Any]:
    where = {"source": ACTOR, "provenance": "owner", "conversation_id": conversation_id, "message_id": message_id}
    if op.op == "add":
        new = await memory.remember(user_id, op.text, kind=op.kind, importance=op.importance, **where)  # type: ignore[arg-type]
        return {"op": "add", "id": new.id}
    if op.op == "update":
        new = await memory.remember(user_id, op.text, kind=op.kind, importance=op.importance, supersedes=op.ids[0], **where)  # type: ignore[arg-type]
        return {"op": "update", "before": op.ids[0], "after": new.id}
    if op.op == "delete":
        gone = [i for i in op.ids if await memory.forget(user_id, i, actor=ACTOR)]
        return {"op": "delete", "ids": gone}
    new = await memory.remember(user_id, op.text, kind=op.kind, importance=op.importance, supersedes=op.ids[0], **where)  # type: ignore[arg-type]
    for other in op.ids[1:]:
        await memory.forget(user_id, other, actor=ACTOR)
    return {"op": "merge", "before": list(op.ids), "after": new.id}

"""History compaction: when a conversation's history grows past ``compact_after_tokens``
(estimated as characters / 4), the older messages are folded into a summary (written by the
model, with a plain fallback when the model fails) and no longer sent; the newest
``keep_recent_messages`` stay verbatim. The cut is moved back to a user message so a tool call
is never separated from its result. The live goal's last ``PROGRESS`` is appended to the
summary verbatim, so it survives any number of compactions (the goal prompt repeats it too).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from elowen_sdk.chat import ChatRequest, Message

from .goals import PROMPTS

if TYPE_CHECKING:
    from .service import BrainService
    from .sessions import Session

__all__ = ["estimate_tokens", "maybe_compact"]

log = logging.getLogger("elowen.plugin.brain")

PROGRESS_MARK = "Goal progress (last PROGRESS):"


def estimate_tokens(rows: Sequence[Mapping[str, Any]], summary: str = "") -> int:
    """A rough token count of message rows (characters / 4)."""
    chars = len(summary)
    for r in rows:
        chars += len(r["content"]) + (len(json.dumps(r["tool_calls"])) if r["tool_calls"] not in ("[]", [], None) else 0)
    return chars // 4


def _transcript(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for r in rows:
        text = r["content"][:2000]
        calls = json.loads(r["tool_calls"]) if isinstance(r["tool_calls"], str) else r["tool_calls"]
        if calls:
            text += " [called " + ", ".join(c["name"] for c in calls) + "]"
        lines.append(f"{r['role']}: {text}")
    return "\n".join(lines)


def _fallback(previous: str, rows: Sequence[Mapping[str, Any]]) -> str:
    asks = [r["content"][:300] for r in rows if r["role"] == "user"][-10:]
    return (previous + "\n\n" if previous else "") + "Earlier, the user asked:\n" + "\n".join(f"- {a}" for a in asks)


async def maybe_compact(service: BrainService, session: Session, *, force: bool = False, keep: int | None = None) -> bool:
    """Compact the session's history if it is over the threshold (``force``: whatever its size);
    returns whether it did. ``keep``: how many recent messages stay verbatim (default the
    ``keep_recent_messages`` setting; ``0`` folds every message, the last one included)."""
    db, config = service.db, service.config
    conv = db.conversation(session.id)
    assert conv is not None
    rows = [r for r in db.messages(session.id) if r["role"] != "note"]
    if not force and estimate_tokens(rows, conv["summary"]) < int(config.get("compact_after_tokens", 24000)):
        return False
    if not rows:
        return False
    cut = len(rows) - (int(config.get("keep_recent_messages", 8)) if keep is None else keep)
    if cut < len(rows):
        while cut > 0 and rows[cut]["role"] != "user":
            cut -= 1
    if cut <= 0:
        return False
    old = rows[:cut]
    previous = conv["summary"].split(PROGRESS_MARK)[0].strip()
    try:
        instructions = (PROMPTS / "compaction.md").read_text(encoding="utf-8")
    except OSError:
        instructions = "Summarise this conversation for your own later use."
    body = (f"Summary so far:\n{previous}\n\n" if previous else "") + "Conversation:\n" + _transcript(old)
    try:
        result = await service.relay().chat(
            ChatRequest(service.model_for(session), [Message("system", instructions), Message("user", body)], purpose="brain.compact")
        )
        summary = result.text.strip() or _fallback(previous, old)
    except Exception as exc:  # any provider failure: compaction must not break the turn
        log.warning("conversation %s: summary by the model failed (%s); using a plain summary", session.id, exc)
        summary = _fallback(previous, old)
    goal = db.live_goal(session.id) or db.last_goal(session.id)
    if goal is not None and goal.get("last_progress"):
        summary += f"\n\n{PROGRESS_MARK} {goal['last_progress']}"
    db.update_conversation(session.id, summary=summary)
    db.mark_compacted(session.id, old[-1]["id"])
    session.history = None
    session.conv = db.conversation(session.id)  # type: ignore[assignment]
    session.emit("brain.compacted", {"messages": len(old), "summary": summary})
    return True

"""The brain's rows in the kernel store (tables of ``schema.sql``): conversations, messages,
goals, per-user preferences and pending approvals/questions.

All methods are synchronous and run on the trio thread (the store's connection). Records are
plain dicts with JSON columns decoded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from elowen_sdk import Store, utc_iso
from elowen_sdk.chat import Message, ToolCall

__all__ = ["BrainStore", "message_from_row"]

_CONV_COLS = "id, user_id, kind, title, model, project_id, task_id, summary, created_at, updated_at"
_GOAL_COLS = (
    "id, conversation_id, text, state, pause_reason, blocked_reason, evidence, last_progress, subgoals, "
    "contract, turn_budget, turns_total, turns_run, tokens_run, note, created_at, updated_at"
)
_PENDING_COLS = "id, conversation_id, user_id, kind, tool, arguments, question, destructive, reasons, state, answer, decided_by, created_at, decided_at"


def message_from_row(row: Mapping[str, Any]) -> Message:
    """A ``brain_messages`` row as an inference :class:`Message` (``note`` rows are not sent)."""
    calls = tuple(ToolCall(c["id"], c["name"], c.get("arguments") or {}) for c in json.loads(row["tool_calls"] or "[]"))
    return Message(row["role"], row["content"], calls, row["tool_call_id"])


def _goal(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    row["subgoals"] = json.loads(row["subgoals"])
    row["contract"] = json.loads(row["contract"]) if row["contract"] else None
    return row


def _pending(row: dict[str, Any]) -> dict[str, Any]:
    row["arguments"] = json.loads(row["arguments"])
    row["reasons"] = json.loads(row["reasons"])
    row["destructive"] = bool(row["destructive"])
    return row


class BrainStore:
    """Typed access to the brain's tables."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- conversations -----------------------------------------------------------------------

    def create_conversation(
        self,
        *,
        user_id: int | None,
        kind: str = "chat",
        title: str = "",
        model: str = "",
        project_id: int | None = None,
        task_id: int | None = None,
    ) -> dict[str, Any]:
        """Insert a conversation; returns its record."""
        now = utc_iso()
        cid = self.store.execute(
            "INSERT INTO brain_conversations (user_id, kind, title, model, project_id, task_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (user_id, kind, title, model, project_id, task_id, now, now),
        )
        return self.conversation(cid)  # type: ignore[return-value]

    def conversation(self, cid: int) -> dict[str, Any] | None:
        """The conversation record or ``None``."""
        return self.store.query_one(f"SELECT {_CONV_COLS} FROM brain_conversations WHERE id = ?", (cid,))

    def conversations(self, user_id: int, *, after: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """A user's chat conversations, newest first (ids below ``after`` when given)."""
        where = "user_id = ? AND kind = 'chat'" + (" AND id < ?" if after is not None else "")
        params: list[Any] = [user_id] + ([after] if after is not None else []) + [limit]
        return self.store.query(f"SELECT {_CONV_COLS} FROM brain_conversations WHERE {where} ORDER BY id DESC LIMIT ?", params)

    def update_conversation(self, cid: int, **fields: Any) -> None:
        """Set columns (title, model, project_id, summary) and ``updated_at``."""
        fields["updated_at"] = utc_iso()
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.store.execute(f"UPDATE brain_conversations SET {sets} WHERE id = ?", (*fields.values(), cid))

    # -- messages ----------------------------------------------------------------------------

    def add_message(self, cid: int, message: Message | None = None, *, role: str | None = None, content: str = "") -> int:
        """Append a message (an inference :class:`Message`, or a ``note`` by ``role``/``content``)."""
        if message is not None:
            calls = [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in message.tool_calls]
            params = (cid, message.role, message.content, json.dumps(calls, ensure_ascii=False), message.tool_call_id, utc_iso())
        else:
            params = (cid, role or "note", content, "[]", None, utc_iso())
        return self.store.execute(
            "INSERT INTO brain_messages (conversation_id, role, content, tool_calls, tool_call_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            params,
        )

    def messages(self, cid: int, *, include_compacted: bool = False, limit: int = 10_000) -> list[dict[str, Any]]:
        """Messages oldest first, as rows ``{id, role, content, tool_calls (JSON text), tool_call_id, compacted, created_at}``."""
        where = "conversation_id = ?" + ("" if include_compacted else " AND compacted = 0")
        rows = self.store.query(
            f"SELECT id, role, content, tool_calls, tool_call_id, compacted, created_at FROM brain_messages WHERE {where} ORDER BY id DESC LIMIT ?",
            (cid, limit),
        )
        return rows[::-1]

    def mark_compacted(self, cid: int, up_to_id: int) -> int:
        """Mark messages with ``id <= up_to_id`` compacted; returns how many."""
        return self.store.execute("UPDATE brain_messages SET compacted = 1 WHERE conversation_id = ? AND id <= ? AND compacted = 0", (cid, up_to_id))

    def prefs(self, user_id: int) -> dict[str, Any]:
        """``{active_conversation_id, yolo}`` of a user (defaults when never set)."""
        row = self.store.query_one("SELECT active_conversation_id, yolo FROM brain_users WHERE user_id = ?", (user_id,))
        return {"active_conversation_id": row["active_conversation_id"], "yolo": bool(row["yolo"])} if row else {"active_conversation_id": None, "yolo": False}

    def set_pref(self, user_id: int, **fields: Any) -> None:
        """Upsert ``active_conversation_id`` and/or ``yolo``."""
        self.store.execute("INSERT OR IGNORE INTO brain_users (user_id) VALUES (?)", (user_id,))
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.store.execute(f"UPDATE brain_users SET {sets} WHERE user_id = ?", (*fields.values(), user_id))

    # -- goals -------------------------------------------------------------------------------

    def live_goal(self, cid: int) -> dict[str, Any] | None:
        """The conversation's goal that is ``draft``, ``active`` or ``paused`` (newest)."""
        return _goal(
            self.store.query_one(
                f"SELECT {_GOAL_COLS} FROM brain_goals WHERE conversation_id = ? AND state IN ('draft', 'active', 'paused') ORDER BY id DESC LIMIT 1",
                (cid,),
            )
        )

    def goals_of(self, user_id: int, state: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """A user's goals in ``state`` (across their conversations), newest first, each with
        its ``conversation_id``."""
        rows = self.store.query(
            f"SELECT {_GOAL_COLS} FROM brain_goals WHERE state = ? AND conversation_id IN (SELECT id FROM brain_conversations WHERE user_id = ?)"
            " ORDER BY id DESC LIMIT ?",
            (state, user_id, limit),
        )
        return [g for g in (_goal(r) for r in rows) if g is not None]

    def goal(self, goal_id: int) -> dict[str, Any] | None:
        """A goal by id."""
        return _goal(self.store.query_one(f"SELECT {_GOAL_COLS} FROM brain_goals WHERE id = ?", (goal_id,)))

    def last_goal(self, cid: int) -> dict[str, Any] | None:
        """The conversation's newest goal in any state."""
        return _goal(self.store.query_one(f"SELECT {_GOAL_COLS} FROM brain_goals WHERE conversation_id = ? ORDER BY id DESC LIMIT 1", (cid,)))

    def create_goal(self, cid: int, text: str, *, state: str, turn_budget: int | None = None, contract: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Insert a goal (any live goal of the conversation is cleared first)."""
        now = utc_iso()
        with self.store.transaction():
            self.store.execute(
                "UPDATE brain_goals SET state = 'cleared', updated_at = ? WHERE conversation_id = ? AND state IN ('draft', 'active', 'paused')",
                (now, cid),
            )
            gid = self.store.execute(
                "INSERT INTO brain_goals (conversation_id, text, state, turn_budget, contract, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (cid, text, state, turn_budget, json.dumps(contract) if contract is not None else None, now, now),
            )
        return self.goal(gid)  # type: ignore[return-value]

    def update_goal(self, goal_id: int, **fields: Any) -> dict[str, Any]:
        """Set columns (``subgoals``/``contract`` as Python values) and ``updated_at``; returns the goal."""
        for key in ("subgoals", "contract"):
            if key in fields and fields[key] is not None:
                fields[key] = json.dumps(fields[key], ensure_ascii=False)
        fields["updated_at"] = utc_iso()
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.store.execute(f"UPDATE brain_goals SET {sets} WHERE id = ?", (*fields.values(), goal_id))
        return self.goal(goal_id)  # type: ignore[return-value]

    def pause_all_active(self, reason: str) -> list[int]:
        """Pause every active goal with ``reason``; returns their ids (daemon restart)."""
        ids = [r["id"] for r in self.store.query("SELECT id FROM brain_goals WHERE state = 'active'")]
        if ids:
            self.store.execute(
                "UPDATE brain_goals SET state = 'paused', pause_reason = ?, updated_at = ? WHERE state = 'active'",
                (reason, utc_iso()),
            )
        return ids

    # -- pending approvals and questions -----------------------------------------------------

    def add_pending(
        self,
        *,
        cid: int,
        user_id: int | None,
        kind: str,
        tool: str = "",
        arguments: Mapping[str, Any] | None = None,
        question: str = "",
        destructive: bool = False,
        reasons: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Insert a pending approval or question; returns its record."""
        pid = self.store.execute(
            "INSERT INTO brain_pending (conversation_id, user_id, kind, tool, arguments, question, destructive, reasons, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cid,
                user_id,
                kind,
                tool,
                json.dumps(dict(arguments or {}), ensure_ascii=False, default=str),
                question,
                int(destructive),
                json.dumps(list(reasons)),
                utc_iso(),
            ),
        )
        return self.pending(pid)  # type: ignore[return-value]

    def pending(self, pid: int) -> dict[str, Any] | None:
        """A pending record by id."""
        row = self.store.query_one(f"SELECT {_PENDING_COLS} FROM brain_pending WHERE id = ?", (pid,))
        return _pending(row) if row else None

    def pending_for(self, user_id: int | None, *, state: str = "pending", limit: int = 100) -> list[dict[str, Any]]:
        """Pending records of a user (``None``: every user), oldest first."""
        if user_id is None:
            rows = self.store.query(f"SELECT {_PENDING_COLS} FROM brain_pending WHERE state = ? ORDER BY id LIMIT ?", (state, limit))
        else:
            rows = self.store.query(f"SELECT {_PENDING_COLS} FROM brain_pending WHERE user_id = ? AND state = ? ORDER BY id LIMIT ?", (user_id, state, limit))
        return [_pending(r) for r in rows]

    def decide_pending(self, pid: int, state: str, *, answer: str | None = None, by: int | None = None) -> bool:
        """Move a ``pending`` record to ``state``; ``False`` when it was no longer pending."""
        return bool(
            self.store.execute(
                "UPDATE brain_pending SET state = ?, answer = ?, decided_by = ?, decided_at = ? WHERE id = ? AND state = 'pending'",
                (state, answer, by, utc_iso(), pid),
            )
        )

    def expire_pending(self, cid: int | None = None) -> int:
        """Expire pending records (of one conversation, or all at start-up)."""
        if cid is None:
            return self.store.execute("UPDATE brain_pending SET state = 'expired', decided_at = ? WHERE state = 'pending'", (utc_iso(),))
        return self.store.execute(
            "UPDATE brain_pending SET state = 'expired', decided_at = ? WHERE state = 'pending' AND conversation_id = ?", (utc_iso(), cid)
        )

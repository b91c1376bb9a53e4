"""Permission approvals: which tool calls need the user, and the waiting room for them.

Resolution of one call (the same for every surface):

1. Destructive — judged from the structured action with the overseer's rules
   (``elowen_sdk.destructive``: ``terminal.run`` → ``check_command``, a file
   write/edit → ``check_file_write``) — always asks the user, YOLO or not. A brain worker has
   no user at hand: a destructive call is refused.
2. A tool without ``needs_approval`` runs.
3. YOLO on (the session's ``/yolo on|off`` override, else the user's persisted default) runs it
   — except ``terminal.run`` in a turn narrowed to some projects (``ToolEnv.scope``, a chat
   platform's role scope): a shell command can reach past the narrowed path guard, so it asks.
4. Otherwise the user is asked.

A pending approval pauses the turn: it is stored in ``brain_pending``, published as a
``brain.approval`` event and listed by ``GET /brain/approvals``; ``POST
/brain/approvals/{id}`` allows or rejects it. Aborting the turn (or a restart) expires it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from elowen_sdk import PathGuardError, Tool
from elowen_sdk.destructive import check_command, check_file_write
from elowen_sdk.elowen_home import touches_elowen_home

from .store import BrainStore
from .tools.env import ToolEnv

if TYPE_CHECKING:
    from .sessions import Session

__all__ = ["ApprovalBroker", "Policy", "assess"]

log = logging.getLogger("elowen.plugin.brain")

_WRITE_TOOLS = frozenset({"files.write", "files.edit"})


@dataclass(frozen=True, slots=True)
class Policy:
    """The verdict on one call: ``action`` ``"allow"``, ``"ask"`` or ``"refuse"``, whether it is
    destructive, and why (overseer rule reasons)."""

    action: str
    destructive: bool = False
    reasons: tuple[str, ...] = field(default_factory=tuple)


def _destructive(tool: str, args: Mapping[str, Any], env: ToolEnv) -> tuple[bool, list[str]]:
    checkout = str(env.cwd) if env.cwd else None
    if tool == "terminal.run":
        cwd = checkout
        if env.guard is not None:
            with contextlib.suppress(PathGuardError):
                cwd = str(env.guard.resolve(str(args.get("cwd") or ".")))
        command = str(args.get("command", ""))
        secret = touches_elowen_home(command)
        verdict = check_command(command, cwd=cwd, checkout=checkout)
        reasons = [secret] if secret else []
        return verdict.destructive or bool(secret), reasons + list(verdict.reasons)
    if tool in _WRITE_TOOLS and env.guard is not None:
        try:
            path = str(env.guard.resolve(str(args.get("path", "")), write=True))
        except PathGuardError:
            return False, []  # the tool itself refuses it
        secret = touches_elowen_home(path)
        verdict = check_file_write(path, checkout=checkout or path)
        return verdict.destructive or bool(secret), ([secret] if secret else []) + list(verdict.reasons)
    return False, []


def assess(tool: Tool, args: Mapping[str, Any], env: ToolEnv, *, yolo: bool, worker: bool = False) -> Policy:
    """Decide what to do with a call of ``tool`` (see the module docstring)."""
    destructive, reasons = _destructive(tool.name, args, env)
    if destructive:
        return Policy("refuse" if worker else "ask", True, tuple(reasons))
    if tool.name == "terminal.run" and env.scope is not None and not worker:
        return Policy("ask")  # a shell is not held to the narrowed path guard: YOLO does not apply
    if not tool.needs_approval or yolo or worker:
        return Policy("allow")
    return Policy("ask")


class ApprovalBroker:
    """Pending approvals and questions of every session, and their decisions."""

    def __init__(self, db: BrainStore) -> None:
        self.db = db
        self._waiting: dict[int, trio.Event] = {}

    async def _wait(self, session: Session, record: dict[str, Any]) -> dict[str, Any]:
        event = self._waiting[record["id"]] = trio.Event()
        session.emit("brain.approval", {"approval": record})
        try:
            await event.wait()
        finally:
            self._waiting.pop(record["id"], None)
            if self.db.pending(record["id"])["state"] == "pending":  # type: ignore[index]
                self.db.decide_pending(record["id"], "expired")
        decided = self.db.pending(record["id"])
        assert decided is not None
        session.emit("brain.approval_decided", {"approval": decided})
        return decided

    async def approve(self, env: ToolEnv, tool: str, args: Mapping[str, Any], policy: Policy) -> dict[str, Any]:
        """Ask the user about a tool call and wait; returns the decided record (``state``
        ``allowed``, ``rejected`` or ``expired``). Cancelling the wait expires it. The record
        shows the model's arguments, not the host's ``_``-prefixed ones (caller stamps)."""
        shown = {k: v for k, v in args.items() if not str(k).startswith("_")}
        record = self.db.add_pending(
            cid=env.session.id, user_id=env.user_id, kind="approval", tool=tool, arguments=shown, destructive=policy.destructive, reasons=policy.reasons
        )
        return await self._wait(env.session, record)

    async def ask(self, env: ToolEnv, question: str) -> dict[str, Any]:
        """Ask the user a question and wait; returns the record (``answered`` with ``answer``)."""
        record = self.db.add_pending(cid=env.session.id, user_id=env.user_id, kind="question", question=question)
        return await self._wait(env.session, record)

    def decide(self, pid: int, *, user_id: int, allow: bool | None = None, answer: str | None = None) -> dict[str, Any]:
        """Record the user's decision on pending item ``pid`` and wake the waiting turn.

        Raises:
            LookupError: no such item, or it belongs to another user.
            ValueError: it is no longer pending, or the decision does not fit its kind.
        """
        record = self.db.pending(pid)
        if record is None or record["user_id"] != user_id:
            raise LookupError(f"approval {pid} not found")
        if record["state"] != "pending" or pid not in self._waiting:
            raise ValueError(f"approval {pid} is {record['state'] if record['state'] != 'pending' else 'no longer waited for'}")
        if record["kind"] == "question":
            if answer is None and allow is not False:
                raise ValueError("a question needs an answer (or decision 'reject' to dismiss it)")
            state = "answered" if answer is not None else "rejected"
        else:
            if allow is None:
                raise ValueError("decision must be 'allow' or 'reject'")
            state = "allowed" if allow else "rejected"
        self.db.decide_pending(pid, state, answer=answer, by=user_id)
        self._waiting[pid].set()
        return self.db.pending(pid)  # type: ignore[return-value]

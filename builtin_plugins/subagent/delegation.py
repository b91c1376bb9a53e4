"""Delegation: one sub-agent is a fresh conversation of the caller, narrowed, run to its end
inside the caller's tool call.

**Access, never more.** The sub-agent's conversation belongs to the caller (so it has exactly
their projects and the project of the parent conversation); it is offered the tool names that
match the caller's grants AND the delegation's ``tools`` patterns AND (when the caller is itself
a sub-agent) its parent's set; ``delegate`` tools only while the depth limit allows; YOLO is off
(:meth:`~elowen_sdk.services.BrainService.create_conversation` with ``tool_grants`` and
``yolo=False``).

**Limits.** Depth (``max_depth``, default 1: a sub-agent cannot delegate), concurrency per user
(``max_concurrent``, default 3; a batch waits for free places), a time budget per sub-agent
(``timeout``), and the brain's own per-turn bound (``[plugins.brain.config] max_tool_rounds``
model calls).

**Cancellation.** The sub-agent's turn runs in the caller's tool call, so aborting the parent
turn (or anything that cancels it) cancels the sub-agent; its record says ``cancelled``.

**Audit and transcript.** Every delegation is a ``subagent_runs`` row (who, what, which
grants, depth, outcome) and an audit row ``subagent.delegate``; the sub-agent's conversation
is kept and viewable like any other of the caller's. Events ``subagent.started``,
``subagent.progress`` (each tool the sub-agent calls) and ``subagent.finished`` carry the
parent's ``conversation_id`` so the parent's view shows the delegation live.
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Mapping
from typing import Any

import trio

from elowen_sdk import ElowenError, Store, utc_iso
from elowen_sdk.services import BrainService, UsersService

__all__ = ["DELEGATE_TOOLS", "Delegations", "DelegationRefused"]

log = logging.getLogger("elowen.plugin.subagent")

DELEGATE_TOOLS = ("delegate", "delegate_batch")
SUMMARY_CHARS = 4000
TASK_CHARS = 8000
PREAMBLE = (
    "You are a sub-agent. Do the task below on your own, with the tools you have; nobody will answer questions. "
    "When done, reply with a short summary of what you did and found, and list the paths of any files you wrote."
)


class DelegationRefused(ElowenError):
    """A delegation that may not start (depth, grants, bad arguments); the message is what the
    model sees."""


class Delegations:
    """The delegations of one enable of the plugin."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.max_depth = int(ctx.config.get("max_depth", 1))
        self.max_concurrent = int(ctx.config.get("max_concurrent", 3))
        self.timeout = float(ctx.config.get("timeout", 600))
        self.max_batch = int(ctx.config.get("max_batch", 8))
        self._limiters: dict[int, trio.CapacityLimiter] = {}
        self.children: dict[int, int] = {}  # sub-agent conversation id → its run id (while running)
        self.artefacts: dict[int, list[str]] = {}  # run id → paths written

    # -- access ------------------------------------------------------------------------------

    def _row_of_conversation(self, cid: int) -> dict[str, Any] | None:
        store: Store = self.ctx.store
        return store.query_one("SELECT * FROM subagent_runs WHERE conversation_id = ? ORDER BY id DESC LIMIT 1", (cid,))

    def _user_grants(self, user_id: int) -> tuple[str, ...]:
        try:
            users = self.ctx.service(UsersService)
        except LookupError:
            return ("*",)  # a bare kernel: the brain applies the user's grants itself
        user = users.user(user_id)
        if user is None:
            raise DelegationRefused("your user no longer exists")
        return tuple(user.get("tool_grants") or ())

    def grants_for(self, user_id: int, parent_cid: int, requested: Any) -> tuple[int, list[str]]:
        """``(depth, tool names)`` a new sub-agent of ``parent_cid`` gets.

        Raises:
            DelegationRefused: beyond the depth limit, or a bad ``tools`` argument.
        """
        parent = self._row_of_conversation(parent_cid)
        depth = (int(parent["depth"]) if parent else 0) + 1
        if depth > self.max_depth:
            raise DelegationRefused(f"delegation is limited to depth {self.max_depth}: a sub-agent cannot delegate further; do the task yourself")
        if requested is None:
            patterns: tuple[str, ...] = ("*",)
        elif isinstance(requested, list) and all(isinstance(p, str) and 0 < len(p) <= 100 for p in requested) and len(requested) <= 100:
            patterns = tuple(requested)
        else:
            raise DelegationRefused("tools: a list of tool names or glob patterns (e.g. ['files.*'])")
        mine = self._user_grants(user_id)
        inherited = json.loads(parent["grants"]) if parent else None
        names = []
        for name in sorted(self.ctx.contributions("tool")):
            if not any(fnmatch.fnmatchcase(name, g) for g in mine):
                continue
            if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
                continue
            if inherited is not None and name not in inherited:
                continue
            if name in DELEGATE_TOOLS and depth >= self.max_depth:
                continue
            names.append(name)
        return depth, names

    def limiter(self, user_id: int) -> trio.CapacityLimiter:
        lim = self._limiters.get(user_id)
        if lim is None:
            lim = self._limiters[user_id] = trio.CapacityLimiter(self.max_concurrent)
        return lim

    # -- running -----------------------------------------------------------------------------

    async def delegate(self, user_id: int, parent_cid: int, task: Any, tools: Any = None) -> dict[str, Any]:
        """Run one sub-agent to its end. Returns ``{"run_id", "conversation_id", "state":
        done|failed|cancelled, "summary", "artefacts": [paths], "tools": [names], "error"?}``.

        Raises:
            DelegationRefused: see :meth:`grants_for`; an empty or too long ``task``.
        """
        if not isinstance(task, str) or not task.strip() or len(task) > TASK_CHARS:
            raise DelegationRefused(f"task: a self-contained description of the work, 1 to {TASK_CHARS} characters")
        brain = self.ctx.service(BrainService)
        depth, names = self.grants_for(user_id, parent_cid, tools)
        parent = brain.conversation(user_id, parent_cid)  # LookupError: not the caller's
        run_id = self.ctx.store.execute(
            "INSERT INTO subagent_runs (user_id, parent_conversation_id, depth, task, grants, state, created_at) VALUES (?, ?, ?, ?, ?, 'running', ?)",
            (user_id, parent_cid, depth, task, json.dumps(names), utc_iso()),
        )
        self.ctx.store.audit(
            f"user:{user_id}", "subagent.delegate", f"conversation:{parent_cid}", "ok", {"run_id": run_id, "depth": depth, "tools": names, "task": task[:500]}
        )
        self._event("subagent.queued", user_id, parent_cid, run_id, {"task": task[:500]})
        state, summary, error, child = "failed", None, None, None
        try:
            async with self.limiter(user_id):
                conv = brain.create_conversation(
                    user_id,
                    title=f"Sub-agent: {task.strip()[:60]}",
                    model=parent.get("model") or "",
                    project_id=parent.get("project_id"),
                    tool_grants=names,
                    yolo=False,
                )
                child = int(conv["id"])
                self.children[child] = run_id
                self.ctx.store.execute("UPDATE subagent_runs SET conversation_id = ? WHERE id = ?", (child, run_id))
                self._event("subagent.started", user_id, parent_cid, run_id, {"sub_conversation_id": child, "tools": names})
                with trio.move_on_after(self.timeout) as budget:
                    reply = await brain.turn(user_id, child, f"{PREAMBLE}\n\nTask:\n{task.strip()}")
                if budget.cancelled_caught:
                    error = f"timed out after {self.timeout:g} s"
                else:
                    state, summary, error = _outcome(reply)
        except (LookupError, ValueError) as exc:
            error = f"could not start the sub-agent: {exc}"
        except BaseException as exc:
            if _cancelled(exc):
                self._finish(run_id, "cancelled", None, "cancelled with the parent turn", user_id, parent_cid)
                raise
            if not isinstance(exc, Exception):
                raise
            log.warning("sub-agent run %d failed: %s", run_id, exc)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            if child is not None:
                self.children.pop(child, None)
        artefacts = self._finish(run_id, state, summary, error, user_id, parent_cid)
        out: dict[str, Any] = {"run_id": run_id, "conversation_id": child, "state": state, "summary": summary or "", "artefacts": artefacts, "tools": names}
        if error:
            out["error"] = error
        return out

    async def delegate_batch(self, user_id: int, parent_cid: int, tasks: Any) -> dict[str, Any]:
        """Run several sub-agents in parallel (at most ``max_concurrent`` at once); returns
        ``{"results": [delegate() results or {"state": "refused", "error"}], in order}``.

        Raises:
            DelegationRefused: ``tasks`` is not a list of 1..``max_batch`` items.
        """
        if not isinstance(tasks, list) or not 1 <= len(tasks) <= self.max_batch:
            raise DelegationRefused(f"tasks: a list of 1 to {self.max_batch} items, each {{task, tools?}} or a string")
        results: list[dict[str, Any]] = [{} for _ in tasks]

        async def one(i: int, item: Any) -> None:
            task, tools = (item.get("task"), item.get("tools")) if isinstance(item, Mapping) else (item, None)
            try:
                results[i] = await self.delegate(user_id, parent_cid, task, tools)
            except DelegationRefused as exc:
                results[i] = {"state": "refused", "error": str(exc)}

        async with trio.open_nursery() as nursery:
            for i, item in enumerate(tasks):
                nursery.start_soon(one, i, item)
        return {"results": results}

    def _finish(self, run_id: int, state: str, summary: str | None, error: str | None, user_id: int, parent_cid: int) -> list[str]:
        artefacts = sorted(set(self.artefacts.pop(run_id, [])))
        self.ctx.store.execute(
            "UPDATE subagent_runs SET state = ?, summary = ?, error = ?, artefacts = ?, finished_at = ? WHERE id = ? AND state = 'running'",
            (state, summary, error, json.dumps(artefacts), utc_iso(), run_id),
        )
        self._event(
            "subagent.finished", user_id, parent_cid, run_id, {"state": state, "summary": (summary or "")[:1000], "error": error, "artefacts": artefacts}
        )
        return artefacts

    def _event(self, type_: str, user_id: int, parent_cid: int, run_id: int, data: Mapping[str, Any]) -> None:
        self.ctx.publish(type_, {"conversation_id": parent_cid, "user_id": user_id, "run_id": run_id, "audience": [user_id], **data})

    def observe(self, event: Any) -> None:
        """``brain.tool`` of a running sub-agent: a ``subagent.progress`` event on the parent,
        and the paths its ``files.write`` / ``files.edit`` calls touched (its artefacts)."""
        data = event.data or {}
        run_id = self.children.get(data.get("conversation_id"))  # type: ignore[arg-type]
        if run_id is None or data.get("phase") != "call":
            return
        tool = str(data.get("tool", ""))
        args = data.get("arguments") or {}
        if tool in ("files.write", "files.edit") and isinstance(args.get("path"), str):
            self.artefacts.setdefault(run_id, []).append(args["path"])
        row = self.ctx.store.query_one("SELECT user_id, parent_conversation_id FROM subagent_runs WHERE id = ?", (run_id,))
        if row is not None:
            self._event("subagent.progress", row["user_id"], row["parent_conversation_id"], run_id, {"tool": tool})


def _cancelled(exc: BaseException) -> bool:
    """Trio's cancellation: ``Cancelled`` or a group of nothing else (from a nursery inside the
    brain's turn)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return False


def _outcome(reply: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """``(state, summary, error)`` of the sub-agent's turn."""
    messages = reply.get("messages") or []
    texts = [m.get("content") or "" for m in messages if m.get("role") == "assistant" and (m.get("content") or "").strip()]
    notes = [m.get("content") or "" for m in messages if m.get("role") == "note"]
    if texts:
        return "done", texts[-1][:SUMMARY_CHARS], None
    return "failed", None, (notes[-1][:1000] if notes else "the sub-agent gave no answer")

"""Applying verdicts: the ``decisions`` service (:class:`Decisions`) and the keys it sends.

A verdict — a human's (``POST /decisions/{id}``, ``elowen decide``) or a decision path's (the
overseer, which learned of the decision from the ``decision.created`` event) — arrives through
:meth:`Decisions.decide`. For a ``prompt``/``question`` the keys are sent only after a fresh
capture, under the session's key lock, shows the SAME prompt: the decision still open, the
screen answerable, in the decision's state, with the decision's ``fingerprint`` (the content
hash the deriver recorded; the deriver expires a decision as soon as its prompt leaves the
screen, and an answered prompt instance never gets a second decision). Anything else on screen
is never typed into. Limit: the check is by content, so while the deriver is disabled (nobody
expires decisions) an open decision would also answer an identical prompt drawn again later.

After a rejected ``prompt``/``question`` the agent is told why (setting ``after_reject``):
``"tell"`` (default) types the reason (the verdict's ``text``, else its rationale, else
:data:`DEFAULT_REJECT_REASON`) into the agent's composer as its next instruction, through the
safe send path (``send_text`` with verification), once the prompt has left the screen and the
agent is idle; if that does not happen within :data:`TELL_WITHIN` seconds, or with
``"block"``, the task is moved to ``blocked`` with the reason. No agent sits parked silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from elowen_sdk.screen import request_identity, screen_hash
from elowen_sdk.services.agents import DecideError

from .channel import PermissionChannel, Verdict
from .decisions import OPEN, DecisionStore
from .sessions import SessionStore

__all__ = ["AFTER_REJECT", "DEFAULT_REJECT_REASON", "KEY_GAP", "TELL_WITHIN", "Decisions", "Keys"]

log = logging.getLogger("elowen.plugin.agents")

KEY_GAP = 0.2
"""Seconds between the keys of a multi-key answer: a terminal reads ``Escape`` followed at once
by another key as one Alt-chord (seen with Kilo 7.7.7: ``Escape Enter`` sent together did not
reject)."""


AFTER_REJECT = ("tell", "block")
"""Values of the ``after_reject`` setting."""

DEFAULT_REJECT_REASON = "The action was rejected by a human reviewer; choose another way or ask."
"""What the agent is told after a rejection that gave no reason."""

TELL_WITHIN = 30.0
"""Seconds the agent has to come back to an idle composer after a rejection before the task is
blocked instead."""


class Keys:
    """Sends keys and text to agent panes, one sender per session at a time.

    Args:
        tmux: returns the current ``TmuxService``.
    """

    def __init__(self, tmux: Callable[[], Any]) -> None:
        self._tmux = tmux
        self._locks: dict[str, trio.Lock] = {}

    def lock(self, session: str) -> trio.Lock:
        """The key lock of ``session`` (hold it from the capture that justifies the keys to the
        last key sent)."""
        lock = self._locks.get(session)
        if lock is None:
            lock = self._locks[session] = trio.Lock()
        return lock

    def forget(self, session: str) -> None:
        """Drop the lock of an ended session."""
        self._locks.pop(session, None)

    async def press(self, target: str, keys: list[str] | tuple[str, ...]) -> None:
        """Press ``keys`` one by one, :data:`KEY_GAP` apart."""
        tmux = self._tmux()
        for i, key in enumerate(keys):
            if i:
                await trio.sleep(KEY_GAP)
            await tmux.send_keys(target, key)


class Decisions:
    """The ``decisions`` service (contract :class:`elowen_sdk.services.agents.DecisionsService`).

    Args:
        store: the plugin's :class:`~.decisions.DecisionStore`.
        sessions: its :class:`~.sessions.SessionStore`.
        keys: its :class:`Keys`.
        tmux: returns the current ``TmuxService``.
        provider: ``provider(name)`` → the executor provider (raises ``LookupError``).
        end_agent: ``await end_agent(session)`` kills the agent of a rejected ``check``.
        start: ``start(fn, *args)`` runs ``await fn(*args)`` in the background (``None``: the
            after-rejection step is skipped).
        tasks: returns the ``TasksService`` (to block a task).
        after_reject: ``"tell"`` or ``"block"`` (see the module docstring).
    """

    def __init__(
        self,
        store: DecisionStore,
        sessions: SessionStore,
        keys: Keys,
        *,
        tmux: Callable[[], Any],
        provider: Callable[[str], Any],
        end_agent: Callable[[str], Any],
        start: Callable[..., None] | None = None,
        tasks: Callable[[], Any] | None = None,
        after_reject: str = "tell",
    ) -> None:
        if after_reject not in AFTER_REJECT:
            raise ValueError(f"after_reject must be one of {', '.join(AFTER_REJECT)}, not {after_reject!r}")
        self.after_reject = after_reject
        self._start = start
        self._tasks = tasks
        self._answering: set[int] = set()
        self.store = store
        self._sessions = sessions
        self._keys = keys
        self._tmux = tmux
        self._provider = provider
        self._end_agent = end_agent
        self.channel = PermissionChannel(store, self._answering, self.reject_reason)
        """Requests of the structured permission channel (:mod:`.channel`)."""

    # ------------------------------------------------------------------ reading / creating

    def get(self, decision_id: int) -> dict[str, Any] | None:
        """See :meth:`DecisionsService.get`."""
        return self.store.get(decision_id)

    def list_decisions(
        self, *, status: str | None = None, task_id: int | None = None, kind: str | None = None, after: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """See :meth:`DecisionsService.list_decisions`."""
        return self.store.list_decisions(status=status, task_id=task_id, kind=kind, after=after, limit=limit)

    def open_for_session(self, session: str) -> list[dict[str, Any]]:
        """See :meth:`DecisionsService.open_for_session`."""
        return self.store.open_for_session(session)

    def create(self, kind: str, *, task_id: int | None = None, session: str | None = None, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """See :meth:`DecisionsService.create`. A ``prompt`` of a session whose permission
        channel already brought that request returns the channel's open decision instead of a
        new one (:meth:`.channel.PermissionChannel.open_channel_decision`)."""
        if kind == "prompt" and session:
            existing = self.channel.open_channel_decision(session, payload or {})
            if existing is not None:
                return existing
        return self.store.create(kind, task_id=task_id, session=session, payload=payload or {})

    def open_permission(
        self, *, task_id: int, session: Mapping[str, Any], raw: Mapping[str, Any], channel: str, cli: str, extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The decision of a permission request that arrived through a structured channel for
        the running ``session`` row (new, or the screen's taken over; ``None`` when the screen
        is answering it right now). Wait for its verdict with :meth:`.channel.PermissionChannel.wait`."""
        env = session.get("env") if isinstance(session.get("env"), Mapping) else {}
        return self.channel.open_request(
            task_id=task_id,
            session=str(session["session"]),
            raw=raw,
            channel=channel,
            cli=cli,
            cwd=str(session.get("workdir") or "") or None,
            home=(env or {}).get("HOME"),
            extra=extra or {},
        )

    async def permission(
        self, *, task_id: int, session: Mapping[str, Any], raw: Mapping[str, Any], channel: str, cli: str, wait: float, extra: Mapping[str, Any] | None = None
    ) -> Verdict:
        """:meth:`open_permission`, then its verdict, waited for up to ``wait`` seconds."""
        decision = self.open_permission(task_id=task_id, session=session, raw=raw, channel=channel, cli=cli, extra=extra)
        if decision is None:
            return ("none", None, None)
        return await self.channel.wait(int(decision["id"]), wait)

    def reject_reason(self, decision: Mapping[str, Any]) -> str:
        """What the agent is told after ``decision`` was rejected: the verdict's text, else its
        rationale, else :data:`DEFAULT_REJECT_REASON`."""
        answer = decision.get("answer") or {}
        text = str(answer.get("text") or "").strip() if isinstance(answer, Mapping) else ""
        return text or str(decision.get("rationale") or "").strip() or DEFAULT_REJECT_REASON

    def escalate(self, decision_id: int, rationale: str, *, by: str, confidence: float | None = None) -> dict[str, Any]:
        """See :meth:`DecisionsService.escalate`."""
        self._open(decision_id)
        return self._settled(
            self.store.settle(decision_id, "escalated", answer={"action": "escalate"}, decided_by=by, rationale=rationale, confidence=confidence), decision_id
        )

    def expire(self, decision_id: int, rationale: str, *, by: str) -> dict[str, Any] | None:
        """See :meth:`DecisionsService.expire`. ``None`` also while the decision is being
        answered (its keys in flight)."""
        if decision_id in self._answering:
            return None
        return self.store.settle(decision_id, "expired", decided_by=by, rationale=rationale)

    # ------------------------------------------------------------------ deciding

    async def decide(
        self,
        decision_id: int,
        action: str,
        *,
        choice: int | None = None,
        text: str | None = None,
        confidence: float | None = None,
        rationale: str | None = "",
        decided_by: str = "",
    ) -> dict[str, Any]:
        """Answer decision ``decision_id``; returns the settled decision. See
        :meth:`DecisionsService.decide` (same arguments, same errors)."""
        decision = self._open(decision_id)
        settle: dict[str, Any] = {"decided_by": decided_by or "user", "rationale": rationale or None, "confidence": confidence}
        if action == "escalate":
            return self._settled(self.store.settle(decision_id, "escalated", answer={"action": "escalate"}, **settle), decision_id)
        kind = decision["kind"]
        if kind == "prompt" and decision["payload"].get("channel"):
            if self.channel.is_waiting(decision_id):
                return self._decide_channel(decision, action, text, settle)
            # nobody waits for it any more (the daemon restarted): the screen answers it — and
            # only if the screen asks what was decided on
            before = request_identity(decision["payload"].get("request"))
            self.channel.release(decision_id)
            decision = self._open(decision_id)
            if action != "reject" and request_identity(decision["payload"].get("request")) != before:
                raise DecideError(
                    409,
                    "request_changed",
                    f"decision {decision_id} is answered on screen now, and the screen asks something else: decide again on what it shows",
                )
        if kind in ("prompt", "question"):
            if action not in ("approve", "reject", "choice"):
                raise DecideError(422, "invalid_action", f"a {kind} decision takes approve, reject or choice")
            if action == "choice" and choice is None:
                raise DecideError(422, "invalid_action", "choice needs the option number")
            # while its keys are sent, the prompt leaving the screen is this answer's doing: the
            # deriver must not expire the decision under it (see expire)
            self._answering.add(decision_id)
            try:
                answer = await self._answer_prompt(decision, action, choice)
                status = {"approve": "approved", "reject": "rejected", "choice": "answered"}[action]
                settled = self._settled(self.store.settle(decision_id, status, answer=answer, **settle), decision_id)
            finally:
                self._answering.discard(decision_id)
            if action == "reject" and self._start is not None:
                self._start(self.after_rejection, settled, (text or "").strip() or (rationale or "").strip() or DEFAULT_REJECT_REASON)
            return settled
        if kind == "check":
            return await self._decide_check(decision, action, text, settle)
        if action == "answer":
            return self._settled(self.store.settle(decision_id, "answered", answer={"action": "answer", "text": text}, **settle), decision_id)
        status_name = {"approve": "approved", "reject": "rejected"}.get(action)
        if status_name is None:
            raise DecideError(422, "invalid_action", f"a {kind} decision takes approve, reject or answer")
        return self._settled(self.store.settle(decision_id, status_name, answer={"action": action}, **settle), decision_id)

    def _decide_channel(self, decision: Mapping[str, Any], action: str, text: str | None, settle: dict[str, Any]) -> dict[str, Any]:
        """A verdict on a decision of the permission channel: recorded, then handed to the
        waiting request (no keys: the verdict goes back through the channel)."""
        did = int(decision["id"])
        if action not in ("approve", "reject"):
            raise DecideError(422, "invalid_action", "a prompt that came through the permission channel takes approve or reject")
        status = "approved" if action == "approve" else "rejected"
        answer = {"action": action, "channel": decision["payload"]["channel"], "text": (text or "").strip() or None, "sent_at": time.time()}
        settled = self._settled(self.store.settle(did, status, answer=answer, **settle), did)
        self.channel.answered(settled)
        self.channel.wake(did)
        log.info("%s: decision %s answered (%s) through the permission channel", decision.get("session"), did, action)
        return settled

    async def decide_now(
        self,
        kind: str,
        *,
        task_id: int,
        session: str,
        payload: Mapping[str, Any],
        action: str,
        choice: int | None = None,
        decided_by: str,
        rationale: str = "",
    ) -> dict[str, Any]:
        """See :meth:`DecisionsService.decide_now`."""
        if kind not in ("prompt", "question") or action not in ("approve", "reject", "choice"):
            raise DecideError(422, "invalid_action", "decide_now takes a prompt or question and approve, reject or choice")
        answer = await self._answer_prompt({"id": None, "session": session, "payload": dict(payload)}, action, choice)
        status = {"approve": "approved", "reject": "rejected", "choice": "answered"}[action]
        return self.store.record(
            kind, task_id=task_id, session=session, payload=payload, status=status, decided_by=decided_by, answer=answer, rationale=rationale or None
        )

    # ------------------------------------------------------------------ after a rejection

    async def after_rejection(self, decision: Mapping[str, Any], reason: str, *, within: float = TELL_WITHIN) -> str:
        """Tell the agent of a rejected decision why (``"told"``), or block its task with the
        reason (``"blocked"``; also when telling fails or the agent is not idle within
        ``within`` seconds); ``"gone"`` when the agent no longer runs."""
        name = str(decision.get("session") or "")
        if self.after_reject == "tell" and name:
            try:
                if await self._tell(name, reason, within):
                    log.info("%s: told the agent why decision %s was rejected", name, decision["id"])
                    return "told"
            except Exception as exc:  # tmux failures, SubmitNotConfirmed
                log.warning("%s: could not tell the agent why decision %s was rejected: %s", name, decision["id"], exc)
            row = self._sessions.by_name(name)
            if row is None or row["state"] != "running":
                return "gone"
        self._block(decision, reason)
        return "blocked"

    async def _tell(self, name: str, reason: str, within: float) -> bool:
        """Type ``reason`` into ``name``'s composer once its screen is idle; ``False``: it was
        not idle within ``within`` seconds (or the agent ended)."""
        with trio.move_on_after(within):
            while True:
                row = self._sessions.by_name(name)
                if row is None or row["state"] != "running":
                    return False
                provider = self._provider(str(row["provider"]))
                target = row["pane_id"] or row["session"]
                async with self._keys.lock(row["session"]):
                    c = provider.classify(await self._tmux().capture(target))
                    if c.state == "idle":
                        await self._tmux().send_text(target, reason, verify=True)
                        return True
                await trio.sleep(0.25)
        return False

    def _block(self, decision: Mapping[str, Any], reason: str) -> None:
        task_id = decision.get("task_id")
        if task_id is None or self._tasks is None:
            return
        try:
            tasks = self._tasks()
            task = tasks.get(int(task_id))
            if task is not None and task["state"] in ("open", "in_progress"):
                tasks.update(int(task_id), {"state": "blocked", "resume_note": f"Decision {decision['id']} was rejected: {reason}"})
                log.warning("task %s blocked after decision %s was rejected: %s", task_id, decision["id"], reason)
        except Exception as exc:  # no tasks service, the task moved on
            log.warning("could not block task %s after decision %s was rejected: %s", task_id, decision["id"], exc)

    def _open(self, decision_id: int) -> dict[str, Any]:
        decision = self.store.get(decision_id)
        if decision is None:
            raise DecideError(404, "not_found", f"decision {decision_id} not found")
        if decision["status"] not in OPEN:
            raise DecideError(409, "already_decided", f"decision {decision_id} is {decision['status']}")
        return decision

    @staticmethod
    def _settled(decision: dict[str, Any] | None, decision_id: int) -> dict[str, Any]:
        if decision is None:
            raise DecideError(409, "already_decided", f"decision {decision_id} was decided meanwhile")
        return decision

    def _running(self, decision: Mapping[str, Any]) -> dict[str, Any]:
        name = str(decision.get("session") or "")
        row = self._sessions.by_name(name) if name else None
        if row is None or row["state"] != "running":
            raise DecideError(409, "not_running", f"agent session {name!r} is not running")
        return row

    async def _answer_prompt(self, decision: Mapping[str, Any], action: str, choice: int | None) -> dict[str, Any]:
        """Send the keys for ``action`` after a fresh capture shows the decision's prompt.
        Returns ``{"action", "choice", "keys", "sent_at", "screen_hash"}``."""
        row = self._running(decision)
        payload = decision["payload"]
        try:
            provider = self._provider(str(row["provider"]))
        except LookupError as exc:
            raise DecideError(409, "executor_unavailable", str(exc)) from None
        target = row["pane_id"] or row["session"]
        async with self._keys.lock(row["session"]):
            current = self.store.get(int(decision["id"])) if decision["id"] is not None else None
            if decision["id"] is not None and (current is None or current["status"] not in OPEN):
                raise DecideError(409, "already_decided", f"decision {decision['id']} was decided meanwhile")
            try:
                screen = await self._tmux().capture(target)
                # the -e capture shows which button of a button row is focused (OpenCode/Kilo:
                # Enter picks the focused one, which a human may have moved to "Allow always")
                escapes = await self._tmux().capture(target, escapes=True)
            except Exception as exc:  # SessionNotFoundError and tmux failures alike
                raise DecideError(409, "prompt_gone", f"cannot read the agent's screen: {exc}") from None
            c = provider.classify(screen, escapes=escapes)
            if not c.answerable or c.fingerprint != payload.get("fingerprint") or c.state != payload.get("state", c.state):
                if decision["id"] is not None:
                    self.store.settle(int(decision["id"]), "expired", decided_by="elowen:screen", rationale="the prompt is no longer on screen")
                raise DecideError(409, "prompt_gone", "that prompt is no longer on the agent's screen")
            try:
                if action == "approve":
                    keys = list(c.approve_keys)
                elif action == "reject":
                    keys = list(c.reject_keys)
                else:
                    keys = c.choice_keys(int(choice or 0))
            except ValueError as exc:
                raise DecideError(422, "bad_choice", str(exc)) from None
            if not keys:
                raise DecideError(422, "not_answerable", f"no keys to {action} this prompt")
            await self._keys.press(target, keys)
        log.info("%s: decision %s answered (%s) with keys %s", row["session"], decision["id"] or "(new)", action, keys)
        return {"action": action, "choice": choice, "keys": keys, "sent_at": time.time(), "screen_hash": screen_hash(screen)}

    async def _decide_check(self, decision: Mapping[str, Any], action: str, text: str | None, settle: dict[str, Any]) -> dict[str, Any]:
        did = int(decision["id"])
        name = decision.get("session")
        if action == "approve":
            return self._settled(self.store.settle(did, "approved", answer={"action": "approve"}, **settle), did)
        if action == "reject":
            row = self._sessions.by_name(name) if name else None
            if row is not None and row["state"] == "running":
                await self._end_agent(str(name))
            return self._settled(self.store.settle(did, "rejected", answer={"action": "reject", "ended": name}, **settle), did)
        if action == "answer" and text:
            row = self._running(decision)
            try:
                provider = self._provider(str(row["provider"]))
            except LookupError as exc:
                raise DecideError(409, "executor_unavailable", str(exc)) from None
            target = row["pane_id"] or row["session"]
            async with self._keys.lock(row["session"]):
                c = provider.classify(await self._tmux().capture(target))
                if c.state != "idle":
                    raise DecideError(409, "agent_busy", f"the agent's screen is {c.state}, not idle; not typing into it")
                await self._tmux().send_text(target, text, verify=True)
            return self._settled(self.store.settle(did, "answered", answer={"action": "answer", "text": text}, **settle), did)
        raise DecideError(422, "invalid_action", "a check decision takes approve, reject or answer (with text)")

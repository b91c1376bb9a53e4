"""The live side of the deriver: one :class:`Pane` per supervised agent session.

:meth:`Supervisor.watch` follows a session's control-mode output, debounces it
(:class:`~.deriver.Debouncer`) and classifies the current frame; :meth:`Supervisor.derive` turns
each classification into ``signal`` events, decisions and trust answers. Every answer is sent
under the pane's lock right after a fresh capture shows the SAME prompt instance, unanswered
(:meth:`Supervisor.answer`); anything else on screen is never typed into.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from .decisions import DecisionStore
from .deriver import ActivityTracker, Debouncer, PromptInstance, PromptTracker, SignalTracker, screen_hash
from .screen import Classification
from .sessions import SessionStore

__all__ = ["BLOCKING_STATES", "SIGNAL_AS", "AnswerError", "Pane", "Supervisor"]

log = logging.getLogger(__name__)

TRUST_SETTLE = 0.15
"""Seconds to wait after moving a trust dialog's cursor before re-capturing it."""

TRUST_RETRY_AFTER = 3.0
"""A folder-trust dialog is shown once per CLI start: after accepting it, the same dialog seen
again within this many seconds is the CLI still catching up with our Enter (seen under load with
Claude Code 2.1.197), not a new one; if it is still there after that, the Enter was lost and it
is accepted again."""

BLOCKING_STATES: frozenset[str] = frozenset({"auth_required"})
"""Screen states no answer or relaunch can fix (the CLI is not logged in / has no credentials):
the supervisor reports them once per pane through ``on_blocked`` so the task is blocked."""

SIGNAL_AS: Mapping[str, str] = {"auth_required": "error"}
"""Screen states whose ``signal`` is that of another state (``auth_required`` is an ``error``
signal; the ``signal`` event still carries the real ``state``)."""

KEY_GAP = 0.2
"""Seconds between the keys of a multi-key answer: a terminal reads ``Escape`` followed at once
by another key as one Alt-chord (seen with Kilo 7.7.7: ``Escape Enter`` sent together did not
reject)."""


async def send_keys(tmux: Any, target: str, keys: list[str] | tuple[str, ...]) -> None:
    """Press ``keys`` one by one, :data:`KEY_GAP` apart."""
    for i, key in enumerate(keys):
        if i:
            await trio.sleep(KEY_GAP)
        await tmux.send_keys(target, key)


_SessionNotFound: Any = None

TIMER_GRID = 0.01
"""Seconds: debounce timers due within this long of the earliest one fire with it (one wake-up
of :class:`Timers` serves them all; a timer fires at most this much late)."""


class Timers:
    """The debounce wake-ups of every pane, served by one task (:meth:`run`).

    A trio sleep costs a deadline and a cancellation; with 50 busy panes that was hundreds of
    cancelled sleeps a second. Here a waiting pane parks on an event and :meth:`run` sleeps once
    per :data:`TIMER_GRID` batch. When :meth:`run` is not running, :meth:`sleep_until` falls
    back to ``trio.sleep``. Times are ``trio.current_time()`` seconds.
    """

    def __init__(self, grid: float = TIMER_GRID) -> None:
        self.grid = grid
        self.running = False
        self._heap: list[tuple[float, int, trio.Event]] = []
        self._seq = itertools.count()
        self._changed = trio.Event()
        self._target: float | None = None

    async def sleep_until(self, when: float) -> None:
        """Return at ``when`` (at most :attr:`grid` later)."""
        if not self.running:
            await trio.sleep_until(when)
            return
        event = trio.Event()
        heapq.heappush(self._heap, (when, next(self._seq), event))
        if self._target is None or when + self.grid < self._target:
            self._changed.set()
        await event.wait()

    async def run(self) -> None:
        """Fire due timers until cancelled (then every waiter is released)."""
        self.running = True
        heap = self._heap
        try:
            while True:
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    heapq.heappop(heap)[2].set()
                self._changed = trio.Event()
                if heap:
                    self._target = heap[0][0] + self.grid
                    with trio.move_on_at(self._target):
                        await self._changed.wait()
                else:
                    self._target = None
                    await self._changed.wait()
        finally:
            self.running = False
            self._target = None
            while heap:
                heapq.heappop(heap)[2].set()


class _Locked:
    """``async with _Locked(lock)``: like ``async with lock`` but an uncontended lock is taken
    without a scheduling round trip (the body has checkpoints of its own)."""

    __slots__ = ("lock",)

    def __init__(self, lock: trio.Lock) -> None:
        self.lock = lock

    async def __aenter__(self) -> None:
        try:
            self.lock.acquire_nowait()
        except trio.WouldBlock:
            await self.lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.lock.release()


class AnswerError(Exception):
    """An answer cannot be applied. ``code``: ``prompt_gone`` (the instance left the screen),
    ``not_answerable`` (no keys for that action), ``not_supervised``, ``bad_choice``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class Pane:
    """Runtime state of one supervised session (rebuilt on re-adoption)."""

    name: str
    task_id: int
    project_id: int | None
    target: str
    provider: Any
    debounce: Debouncer
    activity: ActivityTracker
    prompts: PromptTracker = field(default_factory=PromptTracker)
    signals: SignalTracker = field(default_factory=SignalTracker)
    lock: trio.Lock = field(default_factory=trio.Lock)
    last: Classification | None = None
    last_hash: str = ""
    watching: bool = False
    closed: bool = False
    derived: int = 0
    pending_text: str | None = None
    """Text to type into the composer the first time the CLI is idle (a resumed OpenCode/Kilo
    ignores the prompt on its command line)."""
    inherited: list[dict[str, Any]] = field(default_factory=list)
    """Open prompt decisions recorded before a restart; the first derive re-links the one
    whose prompt is still on screen and expires the others."""
    trust_accepted_at: float | None = None
    """When this pane's trust dialog was last accepted (trio clock)."""
    blocked: bool = False
    """A :data:`BLOCKING_STATES` screen was reported for this pane (reported once)."""


class Supervisor:
    """Derives and answers for every :class:`Pane`.

    Args:
        tmux: returns the current ``TmuxService``.
        sessions, decisions: the plugin's stores.
        publish: ``publish(type, data, project_id)``.
        on_prompt: called (without the pane lock) with ``(pane, decision)`` for every new
            ``prompt``/``question`` decision: the gate hook.
        auto_trust: accept trust dialogs (after checking the "yes" option is selected).
        on_blocked: called (without the pane lock) with ``(pane, classification)`` the first
            time a pane shows a :data:`BLOCKING_STATES` screen (``auth_required``); the owner
            blocks the task. ``None``: only the ``signal`` event is published.
    """

    def __init__(
        self,
        *,
        tmux: Callable[[], Any],
        sessions: SessionStore,
        decisions: DecisionStore,
        publish: Callable[..., Any],
        on_prompt: Callable[[Pane, dict[str, Any]], None],
        auto_trust: bool = True,
        on_blocked: Callable[[Pane, Classification], None] | None = None,
    ) -> None:
        self._tmux = tmux
        self.sessions = sessions
        self.decisions = decisions
        self.publish = publish
        self.on_prompt = on_prompt
        self.auto_trust = auto_trust
        self.on_blocked = on_blocked
        self.panes: dict[str, Pane] = {}
        self.timers = Timers()
        """Debounce wake-ups; the owner runs ``timers.run`` in its nursery (else each pane
        sleeps on its own)."""

    # ------------------------------------------------------------------ watching

    async def watch(self, pane: Pane) -> None:
        """Follow ``pane``'s output until its session ends or the pane is dropped: classify
        after each debounced burst."""
        from elowen_builtins.tmux import SessionNotFoundError

        if pane.watching:
            return
        pane.watching = True
        try:
            try:
                stream = await self._tmux().open_stream(pane.name)
            except SessionNotFoundError:
                return
            try:
                await self.derive(pane)
                while not pane.closed:
                    first = await stream.receive()  # the first output of a burst
                    await self._settle(pane, stream, first.ts)
                    if pane.closed:
                        break
                    pane.debounce.fired()
                    stream.discard_pending()  # covered by the capture below
                    await self.derive(pane)
            except trio.EndOfChannel:
                log.debug("agents: output stream of %s ended", pane.name)
            finally:
                stream.close()
        finally:
            pane.watching = False

    async def _settle(self, pane: Pane, stream: Any, first: float) -> None:
        """Sleep until ``pane.debounce`` is due, following later output through the stream's
        ``pushes``/``last_push`` counters: output during the wait never wakes this task (one
        timer per burst instead of a wake-up and a cancelled wait per output chunk). ``first``:
        ``time.monotonic()`` of the burst's first byte."""
        seen = stream.pushes
        pane.debounce.output(first)
        pane.debounce.output(max(first, stream.last_push))
        while not pane.closed:
            due = pane.debounce.due()
            assert due is not None
            wait = due - time.monotonic()
            if wait > 0:
                await self.timers.sleep_until(trio.current_time() + wait)
            if stream.pushes == seen:
                return
            seen = stream.pushes
            pane.debounce.output(stream.last_push)

    # ------------------------------------------------------------------ deriving

    async def capture(self, pane: Pane) -> tuple[str, Classification, str]:
        """Capture and classify the current frame (a frame identical to the last one derived
        reuses its classification: ``classify`` is a pure function of the screen). Raises
        ``SessionNotFoundError``."""
        screen = await self._tmux().capture(pane.target)
        h = screen_hash(screen)
        if h == pane.last_hash and pane.last is not None:
            return screen, pane.last, h
        return screen, pane.provider.classify(screen), h

    async def derive(self, pane: Pane) -> Classification | None:
        """Classify the current frame and act on it; ``None`` when the session is gone."""
        global _SessionNotFound
        if _SessionNotFound is None:  # imported late (the tmux plugin may load after this one)
            from elowen_builtins.tmux import SessionNotFoundError as _SessionNotFound
        SessionNotFoundError = _SessionNotFound

        created: dict[str, Any] | None = None
        blocked: Classification | None = None
        async with _Locked(pane.lock):
            try:
                screen = await self._tmux().capture(pane.target)
            except SessionNotFoundError:
                return None
            now = trio.current_time()
            h = screen_hash(screen)
            pane.activity.observe(h, len(screen), now)
            answered = pane.prompts.current is not None and pane.prompts.current.answered
            if h == pane.last_hash and pane.last is not None and not answered:
                return pane.last  # same frame: same classification, nothing new to act on
            c = pane.provider.classify(screen)
            pane.derived += 1
            self._observe(pane, c, h, now)
            if c.state in BLOCKING_STATES and not pane.blocked:
                pane.blocked, blocked = True, c
            if pane.pending_text and c.state == "idle":
                text, pane.pending_text = pane.pending_text, None
                await self._tmux().send_text(pane.target, text)
                log.info("agents: %s: typed the task prompt into the idle composer", pane.name)
            inst = pane.prompts.current
            if pane.inherited:
                self._relink(pane, inst)
            if inst is not None and inst.decision_id is None and not inst.answered:
                if c.state == "trust_prompt" and self.auto_trust:
                    if pane.trust_accepted_at is not None and now - pane.trust_accepted_at < TRUST_RETRY_AFTER:
                        return c  # still redrawing after our Enter: look again later
                    if await self._accept_trust(pane, inst, c):
                        pane.trust_accepted_at = trio.current_time()
                        return c
                created = self._create_decision(pane, inst, c)
            pane.last, pane.last_hash = c, h
        if created is not None:
            self.on_prompt(pane, created)  # the gate runs outside the lock: it may answer
        if blocked is not None and self.on_blocked is not None:
            self.on_blocked(pane, blocked)
        return c

    def _observe(self, pane: Pane, c: Classification, h: str, now: float) -> None:
        change = pane.prompts.observe(c, h, now)
        gone = change.gone
        if gone is not None and not gone.answered and gone.decision_id is not None:
            self.decisions.settle(gone.decision_id, "expired", decided_by="elowen:screen", rationale="the prompt left the screen before it was answered")
        alias = SIGNAL_AS.get(c.state)
        signal = pane.signals.observe(replace(c, state=alias) if alias else c, pane.prompts.current)
        if signal is not None:
            self.sessions.set_signal(pane.name, signal)
            data: dict[str, Any] = {"task_id": pane.task_id, "session": pane.name, "signal": signal, "state": c.state}
            if signal == "needs_input":
                data["request"] = _request(c)
            self.publish("signal", data, pane.project_id)

    def _relink(self, pane: Pane, inst: PromptInstance | None) -> None:
        """After a restart: the open decision whose prompt is still on screen is kept (its
        payload re-pointed at the new instance number); the others expire."""
        inherited, pane.inherited = pane.inherited, []
        for d in inherited:
            payload = d["payload"]
            if inst is not None and inst.decision_id is None and payload.get("fingerprint") == inst.fingerprint:
                inst.decision_id = d["id"]
                self.decisions.repoint(d["id"], {**payload, "instance": inst.seq})
            else:
                self.decisions.settle(d["id"], "expired", decided_by="elowen:screen", rationale="the prompt was gone after a restart")

    def _create_decision(self, pane: Pane, inst: PromptInstance, c: Classification) -> dict[str, Any]:
        kind = "question" if c.state == "choice_prompt" else "prompt"
        payload = {**_request(c), "instance": inst.seq, "cli": pane.provider.cli, "detected_at": time.time()}
        decision = self.decisions.create(kind, task_id=pane.task_id, session=pane.name, payload=payload)
        inst.decision_id = decision["id"]
        return decision

    async def _accept_trust(self, pane: Pane, inst: PromptInstance, c: Classification) -> bool:
        """Move the cursor to the trust option, re-capture, check it is selected, Enter.
        ``False`` (left to a human) when the option is unknown or the check fails."""
        accept = (c.request or {}).get("accept_index")
        if accept is None:
            return False
        tmux = self._tmux()
        if c.selected != accept:
            try:
                await send_keys(tmux, pane.target, c.move_keys(accept))
            except ValueError:
                return False
            await trio.sleep(TRUST_SETTLE)
            _, c, h2 = await self.capture(pane)
            if not (c.state == "trust_prompt" and c.fingerprint == inst.fingerprint and c.selected == accept and c.approve_keys):
                log.warning("agents: %s: trust option not selected after moving the cursor; leaving it to a human", pane.name)
                return False
        if not c.approve_keys:
            return False
        await trio.sleep(TRUST_SETTLE)  # let the dialog finish drawing, then check it again
        _, c, h = await self.capture(pane)
        if not (c.state == "trust_prompt" and c.fingerprint == inst.fingerprint and c.selected == accept and c.approve_keys):
            return False
        await send_keys(tmux, pane.target, c.approve_keys)
        pane.prompts.mark_answered(inst, h, trio.current_time())
        payload = {**_request(c), "instance": inst.seq, "cli": pane.provider.cli, "detected_at": time.time()}
        decision = self.decisions.create("prompt", task_id=pane.task_id, session=pane.name, payload=payload)
        inst.decision_id = decision["id"]
        self.decisions.settle(
            decision["id"], "approved", decided_by="elowen:auto-trust",
            answer={"action": "approve", "keys": list(c.approve_keys), "sent_at": time.time()},
            rationale="folder trust dialog accepted automatically (the 'yes' option was verified selected)",
        )
        log.info("agents: %s: accepted the folder-trust dialog", pane.name)
        return True

    # ------------------------------------------------------------------ answering

    async def answer(self, decision: Mapping[str, Any], action: str, *, choice: int | None = None) -> dict[str, Any]:
        """Send the keys for ``action`` (``approve``/``reject``/``choice``) to the prompt of
        ``decision``, after a fresh capture shows the same, unanswered instance. Returns
        ``{"action", "keys", "choice", "sent_at"}``.

        Raises:
            AnswerError: see its codes; ``prompt_gone`` also expires the decision.
        """
        pane = self.panes.get(str(decision.get("session") or ""))
        if pane is None or pane.closed:
            raise AnswerError("not_supervised", f"session {decision.get('session')!r} is not supervised now")
        payload = decision["payload"]
        async with pane.lock:
            try:
                screen, c, h = await self.capture(pane)
            except Exception as exc:  # SessionNotFoundError and tmux failures alike
                raise AnswerError("prompt_gone", f"cannot read the agent's screen: {exc}") from None
            self._observe(pane, c, h, trio.current_time())
            pane.last, pane.last_hash = c, h
            if not pane.prompts.is_current(int(payload.get("instance", -1)), str(payload.get("fingerprint", ""))):
                self.decisions.settle(decision["id"], "expired", decided_by="elowen:screen", rationale="the prompt is no longer on screen")
                raise AnswerError("prompt_gone", "that prompt is no longer on the agent's screen")
            try:
                if action == "approve":
                    keys = list(c.approve_keys)
                elif action == "reject":
                    keys = list(c.reject_keys)
                elif action == "choice":
                    keys = c.choice_keys(int(choice or 0))
                else:
                    raise AnswerError("not_answerable", f"action {action!r} does not answer a screen prompt")
            except ValueError as exc:
                raise AnswerError("bad_choice", str(exc)) from None
            if not keys:
                raise AnswerError("not_answerable", f"no keys to {action} this prompt")
            await send_keys(self._tmux(), pane.target, keys)
            inst = pane.prompts.current
            assert inst is not None
            pane.prompts.mark_answered(inst, h, trio.current_time())
        log.info("agents: %s: decision %s answered (%s) with keys %s", pane.name, decision["id"], action, keys)
        return {"action": action, "choice": choice, "keys": keys, "sent_at": time.time()}


def _request(c: Classification) -> dict[str, Any]:
    return {
        "state": c.state,
        "request": dict(c.request) if c.request is not None else None,
        "options": list(c.options),
        "numbers": list(c.numbers),
        "fingerprint": c.fingerprint,
    }

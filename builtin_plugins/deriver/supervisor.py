"""The live side of the deriver: one :class:`Pane` per watched agent session.

:meth:`Supervisor.watch` follows a session's control-mode output (the tmux service's output
stream), debounces it (:class:`~.tracking.Debouncer`) and classifies the current frame with the
session's provider; :meth:`Supervisor.derive` turns each classification into ``signal`` events
and decisions (created and expired through the ``decisions`` service).

The deriver never answers a prompt itself: a verdict goes through ``decisions.decide``, whose
owner (the agents plugin) captures the screen again, checks the same prompt is still shown and
sends the keys. The deriver learns that keys were sent from the ``decision.decided`` event
(:meth:`Supervisor.decided`), so the next identical prompt is a new instance. A folder-trust
dialog is the one screen it acts on (``auto_trust``): it moves the cursor to the "yes" option,
checks it is selected, and asks ``decide_now(..., action="approve")`` — the owner's fresh
capture checks the selection once more before Enter is sent, and records the decision already
approved (never pending, so no decision path acts on it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from elowen_sdk.errors import SessionNotFoundError
from elowen_sdk.screen import Classification, normalize_request, screen_hash

from .timers import Locked, Timers
from .tracking import Debouncer, PromptInstance, PromptTracker, SignalTracker

__all__ = ["SIGNAL_AS", "TRUST_RETRY_AFTER", "TRUST_SETTLE", "Pane", "Supervisor"]

log = logging.getLogger("elowen.plugin.deriver")

TRUST_SETTLE = 0.15
"""Seconds to wait after moving a trust dialog's cursor before re-capturing it."""

TRUST_RETRY_AFTER = 3.0
"""A folder-trust dialog is shown once per CLI start: after accepting it, the same dialog seen
again within this many seconds is the CLI still catching up with our Enter (seen under load with
Claude Code 2.1.197), not a new one; if it is still there after that, the Enter was lost and it
is accepted again."""

SIGNAL_AS: Mapping[str, str] = {"auth_required": "error"}
"""Screen states whose ``signal`` is that of another state (``auth_required`` is an ``error``
signal; the ``signal`` event still carries the real ``state``, which the agents plugin reads to
block the task)."""

KEY_GAP = 0.2
"""Seconds between cursor keys (a terminal reads ``Escape`` + a key sent together as one chord)."""


@dataclass(slots=True)
class Pane:
    """Runtime state of one watched session (rebuilt when the deriver is enabled again)."""

    name: str
    task_id: int
    project_id: int | None
    target: str
    provider: Any
    debounce: Debouncer
    prompts: PromptTracker = field(default_factory=PromptTracker)
    signals: SignalTracker = field(default_factory=SignalTracker)
    lock: trio.Lock = field(default_factory=trio.Lock)
    last: Classification | None = None
    last_hash: str = ""
    watching: bool = False
    closed: bool = False
    derived: int = 0
    sweep_error: str = ""
    """The last error of the sweep's classification of this pane ("" none; logged once)."""
    inherited: list[dict[str, Any]] = field(default_factory=list)
    """Open prompt decisions recorded before this pane was watched (a restart, or the deriver
    re-enabled); the first derive re-links the one whose prompt is still on screen and expires
    the others."""
    trust_accepted_at: float | None = None
    """When this pane's trust dialog was last accepted (trio clock)."""
    workdir: str | None = None
    """The agent's working directory: relative paths of a request are resolved against it."""
    dialog: tuple[str, int] | None = None
    """(fingerprint, decision id) of the open ``question`` decision of an unknown dialog."""
    home: str | None = None
    """The agent's ``$HOME`` (``~/`` paths of a request), when its session env names it."""


class Supervisor:
    """Derives for every :class:`Pane`.

    Args:
        tmux: returns the current ``TmuxService``.
        decisions: returns the current ``DecisionsService`` (raises ``LookupError`` when its
            owner is disabled: nothing is created then).
        publish: ``publish(type, data, project_id)``.
        auto_trust: accept trust dialogs (after checking the "yes" option is selected).
    """

    def __init__(self, *, tmux: Callable[[], Any], decisions: Callable[[], Any], publish: Callable[..., Any], auto_trust: bool = True) -> None:
        self._tmux = tmux
        self._decisions = decisions
        self.publish = publish
        self.auto_trust = auto_trust
        self.panes: dict[str, Pane] = {}
        self.timers = Timers()
        """Debounce wake-ups; the owner runs ``timers.run`` in its nursery (else each pane
        sleeps on its own)."""

    # ------------------------------------------------------------------ watching

    async def watch(self, pane: Pane) -> None:
        """Classify ``pane`` at once, then after each debounced burst of output, until its
        session ends or the pane is dropped."""
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
                log.debug("output stream of %s ended", pane.name)
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
        reuses its classification). Raises ``SessionNotFoundError``."""
        screen = await self._tmux().capture(pane.target)
        h = screen_hash(screen)
        if h == pane.last_hash and pane.last is not None:
            return screen, pane.last, h
        return screen, pane.provider.classify(screen), h

    async def derive(self, pane: Pane) -> Classification | None:
        """Classify the current frame and act on it; ``None`` when the session is gone."""
        async with Locked(pane.lock):
            try:
                screen = await self._tmux().capture(pane.target)
            except SessionNotFoundError:
                return None
            now = trio.current_time()
            h = screen_hash(screen)
            answered = pane.prompts.current is not None and pane.prompts.current.answered
            if h == pane.last_hash and pane.last is not None and not answered:
                return pane.last  # same frame: same classification, nothing new to act on
            c: Classification = pane.provider.classify(screen)
            pane.derived += 1
            self._observe(pane, c, h, now)
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
                self._create_decision(pane, inst, c)
            self._dialog(pane, c, screen)
            pane.last, pane.last_hash = c, h
        return c

    def _dialog(self, pane: Pane, c: Classification, screen: str) -> None:
        """A live dialog that is no known prompt (``unknown_dialog``) becomes ONE ``question``
        decision for a human, with the screen attached (never answered automatically); it
        expires when the dialog leaves the screen."""
        open_fp, open_id = pane.dialog if pane.dialog is not None else ("", None)
        if c.state == "unknown_dialog" and c.fingerprint == open_fp:
            return
        if open_id is not None:
            self._expire(open_id, "the dialog left the screen before it was answered")
        pane.dialog = None
        if c.state != "unknown_dialog":
            return
        payload = {**_request(c, pane), "screen": screen, "cli": pane.provider.cli, "detected_at": time.time()}
        payload["request"] = {**(payload["request"] or {}), "complete": False, "missing": ["kind"]}
        try:
            decision = self._decisions().create("question", task_id=pane.task_id, session=pane.name, payload=payload)
        except LookupError:
            log.warning("%s: an unknown dialog is on screen but the decisions service is not available", pane.name)
            return
        pane.dialog = (c.fingerprint, decision["id"])

    def _observe(self, pane: Pane, c: Classification, h: str, now: float) -> None:
        change = pane.prompts.observe(c, h, now)
        gone = change.gone
        if gone is not None and not gone.answered and gone.decision_id is not None:
            self._expire(gone.decision_id, "the prompt left the screen before it was answered")
        alias = SIGNAL_AS.get(c.state)
        signal = pane.signals.observe(replace(c, state=alias) if alias else c, pane.prompts.current)
        if signal is not None:
            data: dict[str, Any] = {"task_id": pane.task_id, "session": pane.name, "signal": signal, "state": c.state}
            if signal == "needs_input":
                data["request"] = _request(c, pane)
            self.publish("signal", data, pane.project_id)

    def _expire(self, decision_id: int, rationale: str) -> None:
        try:
            self._decisions().expire(decision_id, rationale, by="elowen:screen")
        except LookupError:
            log.warning("decision %s not expired: the decisions service is not available", decision_id)

    def _relink(self, pane: Pane, inst: PromptInstance | None) -> None:
        """The open decision whose prompt is still on screen (same fingerprint) is kept for
        the current instance; the others expire."""
        inherited, pane.inherited = pane.inherited, []
        for d in inherited:
            if inst is not None and inst.decision_id is None and d["payload"].get("fingerprint") == inst.fingerprint:
                inst.decision_id = d["id"]
            else:
                self._expire(d["id"], "the prompt was gone when the deriver looked again")

    def _create_decision(self, pane: Pane, inst: PromptInstance, c: Classification) -> dict[str, Any] | None:
        kind = "question" if c.state == "choice_prompt" else "prompt"
        payload = {**_request(c, pane), "instance": inst.seq, "cli": pane.provider.cli, "detected_at": time.time()}
        try:
            decision: dict[str, Any] = self._decisions().create(kind, task_id=pane.task_id, session=pane.name, payload=payload)
        except LookupError:
            log.warning("%s: a %s is on screen but the decisions service is not available", pane.name, kind)
            return None
        inst.decision_id = decision["id"]
        return decision

    async def _accept_trust(self, pane: Pane, inst: PromptInstance, c: Classification) -> bool:
        """Move the cursor to the trust option, re-capture, check it is selected, then approve
        through the decisions service (``decide_now``). ``False`` (left to a human) when the option is unknown
        or a check fails."""
        accept = (c.request or {}).get("accept_index")
        if accept is None:
            return False
        tmux = self._tmux()
        if c.selected != accept:
            try:
                keys = c.move_keys(accept)
            except ValueError:
                return False
            for i, key in enumerate(keys):
                if i:
                    await trio.sleep(KEY_GAP)
                await tmux.send_keys(pane.target, key)
            await trio.sleep(TRUST_SETTLE)
            _, c, _ = await self.capture(pane)
            if not (c.state == "trust_prompt" and c.fingerprint == inst.fingerprint and c.selected == accept and c.approve_keys):
                log.warning("%s: trust option not selected after moving the cursor; leaving it to a human", pane.name)
                return False
        if not c.approve_keys:
            return False
        await trio.sleep(TRUST_SETTLE)  # let the dialog finish drawing; the owner checks it again
        payload = {**_request(c, pane), "instance": inst.seq, "cli": pane.provider.cli, "detected_at": time.time()}
        try:
            decision = await self._decisions().decide_now(
                "prompt",
                task_id=pane.task_id,
                session=pane.name,
                payload=payload,
                action="approve",
                decided_by="elowen:auto-trust",
                rationale="folder trust dialog accepted automatically (the 'yes' option was verified selected)",
            )
        except Exception as exc:  # DecideError (the dialog changed) or the owner went away
            log.warning("%s: accepting the folder-trust dialog failed: %s", pane.name, getattr(exc, "message", exc))
            return False
        inst.decision_id = decision["id"]
        pane.prompts.mark_answered(inst, str(decision["answer"].get("screen_hash") or pane.last_hash), trio.current_time())
        log.info("%s: accepted the folder-trust dialog", pane.name)
        return True

    # ------------------------------------------------------------------ verdicts

    def decided(self, decision: Mapping[str, Any]) -> Pane | None:
        """A ``decision.decided`` event: when keys were sent for the prompt instance on a
        watched pane, mark it answered (the screen hash the owner saw, ``answer.screen_hash``,
        is the answered frame). Returns the pane to derive again after the redraw grace."""
        answer = decision.get("answer") or {}
        if not answer.get("keys"):
            return None
        pane = self.panes.get(str(decision.get("session") or ""))
        inst = pane.prompts.current if pane is not None else None
        if pane is None or inst is None or inst.decision_id != decision.get("id") or inst.answered:
            return None
        pane.prompts.mark_answered(inst, str(answer.get("screen_hash") or pane.last_hash), trio.current_time())
        return pane


def _request(c: Classification, pane: Pane) -> dict[str, Any]:
    """The decision payload of ``c``: a permission prompt's request normalised
    (``elowen_sdk.screen.normalize_request``: kind, resolved paths, complete/missing)."""
    if c.state == "permission_prompt":
        request: dict[str, Any] | None = normalize_request(c.request, cwd=pane.workdir, home=pane.home)
    else:
        request = dict(c.request) if c.request is not None else None
    return {
        "state": c.state,
        "request": request,
        "options": list(c.options),
        "numbers": list(c.numbers),
        "fingerprint": c.fingerprint,
    }

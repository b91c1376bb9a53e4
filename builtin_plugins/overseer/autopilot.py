"""The autopilot: routes every decision the overseer is responsible for and carries out the
result through the agents plugin's ``decisions`` service.

Flow of one decision (:meth:`Autopilot.process`)::

    task's mission (or [config] default_level)  ── none ──▶ left pending for a human
    mission paused / stalled                     ──────────▶ escalate
    kind "check" (a silent agent)                ──────────▶ escalate
    destructive request (policy.destructive_reasons) ─────▶ escalate, confidence 1.0
    L0                                           ──────────▶ escalate (proposes only)
    overseer_exec set                            ──────────▶ queued for the parked overseer
    else relay path: the model's proposal (or the no-model rule) → policy.finalize → decide

The level is read again when an answer is applied, so a level change takes effect at once,
also for decisions already handed to a parked overseer. The gate installed in the agents
plugin returns ``None`` at once and processing runs in the overseer's own nursery: no gate
timeout can cut a slow model short (PITFALLS 15).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from .config import OverseerConfig
from .gate import relay_proposal
from .missions import MissionStore
from .policy import Final, Proposal, destructive_reasons, finalize, no_model_proposal

__all__ = ["OPEN", "Autopilot"]

log = logging.getLogger(__name__)

OPEN = ("pending", "escalated")


class Autopilot:
    """One per enable of the overseer plugin.

    Args:
        ctx: the plugin context (store, services ``decisions``, ``inference``, ``tasks``).
        config: :class:`OverseerConfig`.
        missions: the :class:`MissionStore`.
    """

    def __init__(self, ctx: Any, config: OverseerConfig, missions: MissionStore) -> None:
        self.ctx = ctx
        self.config = config
        self.missions = missions
        self.store = ctx.store
        self.parked: Any = None  # the ParkedOverseers, set by the plugin
        self.reviews: Any = None  # a Reviews, set by the plugin
        self._seen: set[int] = set()
        self._decided: dict[int, trio.Event] = {}
        self._limiter = trio.CapacityLimiter(config.concurrency)
        self._nursery: trio.Nursery | None = None
        self._gate_owner: Any = None

    # ------------------------------------------------------------------ services

    def decisions(self) -> Any:
        """The agents plugin's ``decisions`` service (raises ``LookupError`` when it is off)."""
        return self.ctx.service("decisions")

    def install_gate(self) -> bool:
        """Install :meth:`gate` in the decisions service (again after the agents plugin was
        re-enabled); returns whether a service was there."""
        try:
            svc = self.decisions()
        except LookupError:
            self._gate_owner = None
            return False
        if svc is not self._gate_owner:
            svc.set_gate(self.gate)
            self._gate_owner = svc
        return True

    def remove_gate(self) -> None:
        if self._gate_owner is not None:
            try:
                self._gate_owner.set_gate(None)
            except Exception:
                log.exception("overseer: removing the gate failed")
            self._gate_owner = None

    async def gate(self, decision: Mapping[str, Any]) -> None:
        """The decision gate (see the agents plugin's ``decisions`` module): queue the
        decision for :meth:`process` and leave it pending meanwhile."""
        self.submit(decision)
        return None

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery decisions are processed in, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def submit(self, decision: Mapping[str, Any]) -> None:
        """Process ``decision`` in the background (once per process)."""
        did = int(decision["id"])
        if did in self._seen or self._nursery is None:
            return
        self._seen.add(did)
        self._nursery.start_soon(self._guarded, did)

    async def _guarded(self, decision_id: int) -> None:
        try:
            async with self._limiter:
                await self.process(decision_id)
        except Exception:
            log.exception("overseer: processing decision %s failed; escalating", decision_id)
            await self.escalate(decision_id, "the overseer failed while deciding (see the daemon log)", by="overseer:error")

    async def sweep(self) -> None:
        """(Re)install the gate and pick up open decisions not seen yet (after a restart, or
        created while the overseer was off)."""
        if not self.install_gate():
            return
        for decision in self.decisions().list(status="pending", limit=500):
            if self.level_for(decision)[1] is not None or decision["kind"] in ("review", "message"):
                self.submit(decision)
        if self.reviews is not None:
            self.reviews.catch_up()

    # ------------------------------------------------------------------ routing

    def level_for(self, decision: Mapping[str, Any]) -> tuple[dict[str, Any] | None, int | None]:
        """``(mission, level)`` governing ``decision``: its task's mission (unless disengaged),
        else the configured ``default_level`` (``None``: a human's business)."""
        mission = self.missions.of_task(decision.get("task_id"))
        if mission is not None and mission["state"] != "disengaged":
            return mission, int(mission["level"])
        return None, self.config.fallback_level

    def context(self, decision: Mapping[str, Any], mission: Mapping[str, Any] | None) -> dict[str, Any]:
        """What the overseer is shown besides the request: the task and the mission."""
        out: dict[str, Any] = {}
        task_id = decision.get("task_id")
        if task_id is not None:
            row = self.store.query_one("SELECT id, title, description, state, summary, evidence, project_id FROM tasks WHERE id = ?", (task_id,))
            if row is not None:
                row["evidence"] = json.loads(row["evidence"] or "[]")
                out["task"] = row
        if mission is not None:
            out["mission"] = {"id": mission["id"], "name": mission["name"], "level": f"L{mission['level']}"}
        return out

    def checkout(self, decision: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """``(checkout, home)``: the task's project folder and the agent's ``$HOME``."""
        checkout = home = None
        task_id = decision.get("task_id")
        if task_id is not None:
            row = self.store.query_one("SELECT p.path FROM tasks t JOIN projects p ON p.id = t.project_id WHERE t.id = ?", (task_id,))
            checkout = row["path"] if row else None
        if decision.get("session"):
            row = self.store.query_one("SELECT env, workdir FROM agent_sessions WHERE session = ?", (decision["session"],))
            if row is not None:
                try:
                    home = (json.loads(row["env"] or "{}") or {}).get("HOME")
                except ValueError:
                    home = None
        return checkout, home

    async def process(self, decision_id: int) -> None:
        """Route one decision (see the module docstring)."""
        decision = self.decisions().get(decision_id)
        if decision is None or decision["status"] != "pending":
            return
        mission, level = self.level_for(decision)
        kind = decision["kind"]
        if level is None and kind not in ("review", "message"):
            return  # not the overseer's business: a human answers it
        if level is None:
            level = 0
        if mission is not None and mission["state"] != "active":
            await self.escalate(decision_id, f"mission {mission['id']} is {mission['state']}: a human decides", by="overseer:policy")
            return
        if kind == "check":
            await self.escalate(decision_id, "the agent has gone silent: a human should look", by="overseer:policy")
            return
        if kind == "prompt":
            checkout, home = self.checkout(decision)
            reasons = destructive_reasons(decision, checkout=checkout, home=home)
            if reasons:
                await self.escalate(decision_id, "destructive: " + "; ".join(reasons), by="overseer:rules", confidence=1.0)
                return
        if level == 0:
            await self.escalate(decision_id, "L0: the overseer proposes, a human decides", by="overseer:policy")
            return
        if self.config.overseer_exec and mission is not None and self.parked is not None:
            self.parked.enqueue(decision, mission)
            return
        threshold = self.config.threshold(level)
        assert threshold is not None
        if self.config.model:
            proposal = await relay_proposal(self.ctx.service("inference"), self.config.model, decision, self.context(decision, mission), level=level, threshold=threshold)
        else:
            proposal = no_model_proposal(kind, level)
        await self.apply(decision_id, proposal)

    async def apply(self, decision_id: int, proposal: Proposal) -> dict[str, Any] | None:
        """Finalize ``proposal`` under the level in force NOW and carry it out; returns the
        settled decision (``None`` if it was no longer open or could not be applied)."""
        decision = self.decisions().get(decision_id)
        if decision is None or decision["status"] not in OPEN:
            return None
        mission, level = self.level_for(decision)
        level = 0 if level is None else level
        if mission is not None and mission["state"] != "active":
            level = 0
        reviews_left = True
        if decision["kind"] == "review" and self.reviews is not None and decision.get("task_id") is not None:
            reviews_left = self.reviews.rejections(int(decision["task_id"])) < self.config.max_review_rejections
        final = finalize(decision["kind"], level, proposal, self.config.threshold(level), reviews_left=reviews_left)
        return await self.carry_out(decision_id, final)

    async def carry_out(self, decision_id: int, final: Final) -> dict[str, Any] | None:
        """``decisions.decide`` with ``final``; a failed approval escalates instead."""
        rationale = final.rationale
        if final.action == "reject" and final.text:
            rationale = f"{final.text}" + (f" ({rationale})" if rationale else "")
        try:
            return await self.decisions().decide(
                decision_id, final.action, choice=final.choice, text=final.text,
                rationale=rationale, decided_by=final.decided_by, confidence=final.confidence,
            )
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc)
            log.warning("overseer: %s on decision %s not applied: %s", final.action, decision_id, message)
            if final.action != "escalate":
                return await self.escalate(decision_id, f"the overseer's {final.action} could not be carried out ({message}); {rationale}", by=final.decided_by, confidence=final.confidence)
            return None

    async def escalate(self, decision_id: int, rationale: str, *, by: str, confidence: float | None = None) -> dict[str, Any] | None:
        """Mark a pending decision ``escalated`` (a human answers it from the inbox)."""
        try:
            decision = self.decisions().get(decision_id)
            if decision is None or decision["status"] != "pending":
                return None
            return await self.decisions().decide(decision_id, "escalate", rationale=rationale, decided_by=by, confidence=confidence)
        except Exception as exc:
            log.warning("overseer: escalating decision %s failed: %s", decision_id, getattr(exc, "message", exc))
            return None

    # ------------------------------------------------------------------ waiting

    def notify_decided(self, decision_id: int) -> None:
        """A decision was decided (from the ``decision.decided`` event): wake its waiters."""
        event = self._decided.pop(decision_id, None)
        if event is not None:
            event.set()

    async def wait_decided(self, decision_id: int, timeout: float, still_open: Callable[[], bool]) -> None:
        """Return when ``still_open()`` is false or ``timeout`` seconds passed (re-checked at
        least every second, in case an event was missed)."""
        with trio.move_on_after(timeout):
            while still_open():
                event = self._decided.setdefault(decision_id, trio.Event())
                with trio.move_on_after(1.0):
                    await event.wait()

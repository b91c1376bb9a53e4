"""The autopilot: routes every decision the overseer is responsible for to a decision path
or a human, and carries out the result through the agents plugin's ``decisions`` service.

Decisions arrive by the ``decision.created`` event (and by a sweep, after a restart). Flow of
one decision (:meth:`Autopilot.process`)::

    task's mission (or [config] default_level)  ── none ──▶ left pending for a human
    mission paused / stalled                     ──────────▶ escalate
    kind "check" (a silent agent)                ──────────▶ escalate
    destructive request (policy.destructive_reasons) ─────▶ escalate, confidence 1.0
    request not understood (policy.not_understood, rule 1) ▶ escalate, with the screen
    L0                                           ──────────▶ escalate (proposes only)
    no decision path takes it                    ──────────▶ left pending for a human
    else the active path's propose(request) → Proposal → policy.finalize → decide
                                             → None: the path submits later (MissionsService)

The active path is the enabled :class:`~elowen_sdk.services.missions.DecisionPath` of highest
priority that takes the request (``overseer-parked`` 10 over ``overseer-relay`` 0). The level
is read again when a proposal is applied, so a level change takes effect at once, also for
decisions a path holds. Paths run in the overseer's own nursery with no deadline (PITFALLS
15). When a path goes away, the decisions it held (asked, or in flight) are routed again:
none is lost.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import trio

from elowen_sdk.contracts import contract_name
from elowen_sdk.screen import request_identity
from elowen_sdk.services.agents import AgentsService, DecisionsService
from elowen_sdk.services.missions import DecisionPath, DecisionRequest, Proposal
from elowen_sdk.services.tasks import TasksService
from elowen_sdk.services.tmux import TmuxService

from .config import OverseerConfig
from .missions import MissionStore
from .policy import APPROVALS, Final, destructive_reasons, finalize, not_understood

__all__ = ["OPEN", "Autopilot", "service"]

log = logging.getLogger("elowen.plugin.overseer")

OPEN = ("pending", "escalated")
SCREEN_LINES = 60
"""Most lines of the agent's screen attached to a rule-1 escalation."""
_T = TypeVar("_T")


def service(ctx: Any, contract: type[_T]) -> _T:
    """``ctx.service`` typed by ``contract`` (raises ``LookupError`` when it is not offered)."""
    return cast(_T, ctx.service(contract_name(contract)))


@dataclass(slots=True)
class _Held:
    """A decision the overseer is handling: ``path`` is the path asked (``None``: no path took
    it, it waits for a human or for a path to appear); ``scope`` cancels a call in flight."""

    path: str | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    judged: Any = None
    """The decision's ``payload.request`` when its path was asked (``None``: not asked yet): an
    answer is carried out only for that request (a permission channel taking the decision over,
    or handing it back to the screen, changes it)."""


class Autopilot:
    """One per enable of the overseer plugin.

    Args:
        ctx: the plugin context (store, services ``decisions``, ``agents``, ``tasks``).
        config: :class:`OverseerConfig`.
        missions: the :class:`MissionStore`.
    """

    def __init__(self, ctx: Any, config: OverseerConfig, missions: MissionStore) -> None:
        self.ctx = ctx
        self.config = config
        self.missions = missions
        self.store = ctx.store
        self.reviews: Any = None  # a Reviews, set by the plugin
        self._held: dict[int, _Held] = {}
        self._decided: dict[int, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ services

    def decisions(self) -> DecisionsService:
        """The agents plugin's ``decisions`` service (raises ``LookupError`` when it is off)."""
        return service(self.ctx, DecisionsService)

    def list_decisions(self, **filters: Any) -> list[dict[str, Any]]:
        """``decisions.list_decisions(**filters)`` (raises ``LookupError`` when it is off)."""
        svc: Any = self.decisions()
        lister = getattr(svc, "list_decisions", None) or svc.list
        return cast(list[dict[str, Any]], lister(**filters))

    # ------------------------------------------------------------------ paths

    def paths(self) -> list[DecisionPath]:
        """The enabled decision paths, the one asked first first (priority, then name)."""
        found = [o.obj for o in self.ctx.contributions("decision_path").values() if isinstance(o.obj, DecisionPath)]
        return sorted(found, key=lambda p: (-p.priority, p.name))

    def path_for(self, request: DecisionRequest) -> DecisionPath | None:
        """The path that takes ``request``, or ``None``."""
        for path in self.paths():
            try:
                if path.takes(request):
                    return path
            except Exception:
                log.exception("decision path %s failed to say whether it takes decision %s", path.name, request.id)
        return None

    def active_path(self) -> str | None:
        """The highest-priority enabled path's name, or ``None``."""
        paths = self.paths()
        return paths[0].name if paths else None

    def status(self) -> dict[str, Any]:
        """``{"active", "paths": [{"name", "plugin", "priority", "description"}], "waiting"}``:
        ``waiting`` counts pending decisions no path took (they wait for a human)."""
        owned = self.ctx.contributions("decision_path")
        paths = [{"name": p.name, "plugin": owned[p.name].plugin, "priority": p.priority, "description": p.description} for p in self.paths()]
        waiting = sum(1 for h in self._held.values() if h.path is None)
        return {"active": paths[0]["name"] if paths else None, "paths": paths, "waiting": waiting}

    def reroute(self) -> int:
        """Route again every held decision whose path went away, and those no path took if a
        path is there now; returns how many."""
        names = {p.name for p in self.paths()}
        count = 0
        for decision_id, held in list(self._held.items()):
            if (held.path is None and names) or (held.path is not None and held.path not in names):
                held.scope.cancel()
                del self._held[decision_id]
                self.submit(decision_id)
                count += 1
        if count:
            log.info("%d decisions routed again (decision paths now: %s)", count, ", ".join(sorted(names)) or "none")
        return count

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery decisions are processed in, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def submit(self, decision: Mapping[str, Any] | int) -> None:
        """Process the decision in the background, unless it is already being handled."""
        did = int(decision if isinstance(decision, int) else decision["id"])
        if did in self._held or self._nursery is None:
            return
        held = self._held[did] = _Held()
        self._nursery.start_soon(self._guarded, did, held)

    async def _guarded(self, decision_id: int, held: _Held) -> None:
        keep = False
        with held.scope:
            try:
                keep = await self.process(decision_id, held)
            except Exception:
                log.exception("processing decision %s failed; escalating", decision_id)
                await self.escalate(decision_id, "the overseer failed while deciding (see the daemon log)", by="overseer:error")
        if not keep and self._held.get(decision_id) is held:
            del self._held[decision_id]

    def settled(self, decision: Mapping[str, Any]) -> None:
        """A decision changed (``decision.decided``): wake its waiters; once it is no longer
        pending, stop handling it (a call in flight is cancelled)."""
        decision_id = int(decision["id"])
        event = self._decided.pop(decision_id, None)
        if event is not None:
            event.set()
        if decision.get("status") != "pending":
            held = self._held.pop(decision_id, None)
            if held is not None:
                held.scope.cancel()

    async def sweep(self) -> None:
        """Route again what lost its path, and pick up pending decisions not handled yet
        (after a restart, or created while the overseer was off)."""
        try:
            pending = self.list_decisions(status="pending", limit=500)
        except LookupError:
            return
        self.reroute()
        for decision in pending:
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

    def _task(self, task_id: int | None) -> dict[str, Any] | None:
        """What a path is shown of the decision's task (from the tasks service)."""
        if task_id is None:
            return None
        try:
            task = service(self.ctx, TasksService).get(int(task_id))
        except LookupError:  # no such task (TaskNotFound), or no tasks service
            return None
        return {k: task.get(k) for k in ("id", "title", "description", "state", "summary", "evidence", "project_id")}

    def checkout(self, decision: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """``(checkout, home)``: the folder the agent works in (its session's ``workdir``: the
        task's git worktree, else the project folder) and the agent's ``$HOME`` (from the
        agents service's session record)."""
        checkout = home = None
        task_id = decision.get("task_id")
        if task_id is not None:
            try:
                checkout = service(self.ctx, TasksService).project_path(int(task_id))
            except LookupError:  # no tasks service
                checkout = None
        if decision.get("session"):
            try:
                session = service(self.ctx, AgentsService).session(str(decision["session"]))
            except LookupError:
                session = None
            if session and session.get("workdir"):
                checkout = str(session["workdir"])  # where the agent works: its own git worktree, when it has one
            env = (session or {}).get("env") or {}
            if isinstance(env, str):
                try:
                    env = json.loads(env) or {}
                except ValueError:
                    env = {}
            home = env.get("HOME") if isinstance(env, Mapping) else None
        return checkout, home

    def elowen_home(self) -> str | None:
        """The daemon's home (``$ELOWEN_HOME``): the parent of ``plugins/<name>``, the plugin's data folder."""
        data_dir = getattr(self.ctx, "data_dir", None)
        try:
            return str(Path(data_dir).parents[1]) if data_dir else None
        except (TypeError, IndexError):
            return None

    async def screen(self, decision: Mapping[str, Any]) -> str:
        """The agent's screen now (its last :data:`SCREEN_LINES` non-blank lines), ``""`` when it
        cannot be read."""
        try:
            session = service(self.ctx, AgentsService).session(str(decision.get("session") or ""))
            if not session:
                return ""
            text = await service(self.ctx, TmuxService).capture(str(session.get("pane_id") or session["session"]))
        except Exception as exc:  # no tmux/agents service, the pane is gone
            log.debug("no screen for decision %s: %s", decision.get("id"), exc)
            return ""
        lines = [line.rstrip() for line in str(text).splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines[-SCREEN_LINES:])

    async def escalate_not_understood(self, decision: Mapping[str, Any], missing: list[str], by: str) -> dict[str, Any] | None:
        """Rule 1: escalate ``decision`` naming the ``missing`` parts, the agent's screen attached."""
        screen = await self.screen(decision)
        rationale = "not understood: the request does not name " + ", ".join(missing) + "; a human must look"
        if screen:
            rationale += "\n\nScreen:\n" + screen
        return await self.escalate(int(decision["id"]), rationale, by=by, confidence=1.0)

    def _request(self, decision: Mapping[str, Any], mission: Mapping[str, Any] | None, level: int, checkout: str | None) -> DecisionRequest:
        threshold = self.config.threshold(level)
        assert threshold is not None
        return DecisionRequest(decision, level, threshold, mission=mission, task=self._task(decision.get("task_id")), checkout=checkout)

    def request(self, decision_id: int) -> DecisionRequest | None:
        """The request for an open decision as a path would be asked now, or ``None`` (not
        open, L0, not the overseer's business)."""
        decision = self.decisions().get(decision_id)
        if decision is None or decision["status"] not in OPEN:
            return None
        mission, level = self.level_for(decision)
        if not level:
            return None
        held = self._held.get(decision_id)
        if held is not None:
            held.judged = decision["payload"].get("request")
        return self._request(decision, mission, level, self.checkout(decision)[0])

    async def process(self, decision_id: int, held: _Held) -> bool:
        """Route one decision (see the module docstring); returns whether the overseer still
        holds it (a path will submit later, or no path took it)."""
        decision = self.decisions().get(decision_id)
        if decision is None or decision["status"] != "pending":
            return False
        mission, level = self.level_for(decision)
        kind = decision["kind"]
        if level is None and kind not in ("review", "message"):
            return False  # not the overseer's business: a human answers it
        if level is None:
            level = 0
        if mission is not None and mission["state"] != "active":
            await self.escalate(decision_id, f"mission {mission['id']} is {mission['state']}: a human decides", by="overseer:policy")
            return False
        if kind == "check":
            await self.escalate(decision_id, "the agent has gone silent: a human should look", by="overseer:policy")
            return False
        checkout, home = self.checkout(decision)
        if kind == "prompt":
            reasons = destructive_reasons(decision, checkout=checkout, home=home, elowen_home=self.elowen_home())
            if reasons:
                await self.escalate(decision_id, "destructive: " + "; ".join(reasons), by="overseer:rules", confidence=1.0)
                return False
            missing = not_understood(decision)
            if missing:
                await self.escalate_not_understood(decision, missing, "overseer:rules")
                return False
        if level == 0:
            await self.escalate(decision_id, "L0: the overseer proposes, a human decides", by="overseer:policy")
            return False
        request = self._request(decision, mission, level, checkout)
        path = self.path_for(request)
        if path is None:
            held.path = None
            return True  # waits for a human, or for a path to be enabled
        held.path = path.name
        held.judged = decision["payload"].get("request")
        try:
            proposal = await path.propose(request)
        except Exception as exc:
            log.warning("decision path %s failed on decision %s: %s", path.name, decision_id, exc)
            await self.escalate(decision_id, f"the decision path {path.name} failed: {exc}", by=f"overseer:{path.name}")
            return False
        if proposal is None:
            return True  # the path submits later (MissionsService.submit)
        await self.apply(decision_id, proposal)
        return False

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
        held = self._held.get(decision_id)
        if decision["kind"] == "prompt" and proposal.action in APPROVALS:
            if held is not None and held.judged is not None and request_identity(decision["payload"].get("request")) != request_identity(held.judged):
                # what was judged is not what an approval would now answer: a human decides
                return await self.escalate(
                    decision_id, "the request changed while it was being judged; a human decides on what it asks now", by=f"overseer:{proposal.source}"
                )
            checkout, home = self.checkout(decision)
            reasons = destructive_reasons(decision, checkout=checkout, home=home, elowen_home=self.elowen_home())
            if reasons:  # the rules hold for every path's answer, on the request as it is now
                return await self.escalate(decision_id, "destructive: " + "; ".join(reasons), by="overseer:rules", confidence=1.0)
        missing = not_understood(decision)
        if missing and proposal.action in APPROVALS:  # rule 1 holds for every path's answer
            return await self.escalate_not_understood(decision, missing, f"overseer:{proposal.source}")
        final = finalize(decision["kind"], level, proposal, self.config.threshold(level), reviews_left=reviews_left)
        return await self.carry_out(decision_id, final)

    async def carry_out(self, decision_id: int, final: Final) -> dict[str, Any] | None:
        """``decisions.decide`` with ``final``; a failed approval escalates instead."""
        rationale = final.rationale
        if final.action == "reject" and final.text:
            rationale = f"{final.text}" + (f" ({rationale})" if rationale else "")
        try:
            return await self.decisions().decide(
                decision_id,
                final.action,
                choice=final.choice,
                text=final.text,
                rationale=rationale,
                decided_by=final.decided_by,
                confidence=final.confidence,
            )
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc)
            log.warning("%s on decision %s not applied: %s", final.action, decision_id, message)
            if final.action != "escalate":
                return await self.escalate(
                    decision_id,
                    f"the overseer's {final.action} could not be carried out ({message}); {rationale}",
                    by=final.decided_by,
                    confidence=final.confidence,
                )
            return None

    async def escalate(self, decision_id: int, rationale: str, *, by: str, confidence: float | None = None) -> dict[str, Any] | None:
        """Mark a pending decision ``escalated`` (a human answers it from the inbox)."""
        try:
            decision = self.decisions().get(decision_id)
            if decision is None or decision["status"] != "pending":
                return None
            return await self.decisions().decide(decision_id, "escalate", rationale=rationale, decided_by=by, confidence=confidence)
        except Exception as exc:
            log.warning("escalating decision %s failed: %s", decision_id, getattr(exc, "message", exc))
            return None

    # ------------------------------------------------------------------ waiting

    async def wait_decided(self, decision_id: int, timeout: float, still_open: Callable[[], bool]) -> None:
        """Return when ``still_open()`` is false or ``timeout`` seconds passed (re-checked at
        least every second, in case an event was missed)."""
        with trio.move_on_after(timeout):
            while still_open():
                event = self._decided.setdefault(decision_id, trio.Event())
                with trio.move_on_after(1.0):
                    await event.wait()

"""Contracts of the missions domain: the ``missions`` service (offered by the builtin
``overseer`` plugin, which owns the ``missions`` and ``mission_tasks`` tables) and the types a
*decision path* exchanges with the overseer.

A decision path is what scores a decision the overseer may let a machine answer: the builtin
``overseer-relay`` asks an LLM, ``overseer-parked`` hands it to an overseer CLI parked in tmux.
A path plugin implements the contribution hook ``register_decision_paths(ctx, register)`` and
registers one :class:`DecisionPath` (declared in its manifest as ``[contributes]
decision_paths = ["<name>"]``). The flow of one decision::

    decision.created (event) → overseer: mission, level, destructive rules
        → the active path's propose(DecisionRequest) → Proposal (now)
                                                     → None, later MissionsService.submit(...)
        → the overseer's threshold rule → DecisionsService.decide(...)

The active path for a request is the enabled path of highest :attr:`DecisionPath.priority`
whose :attr:`DecisionPath.accepts` takes it (ties: the lower name). With none, the decision
stays ``pending`` for a human. When a path goes away (its plugin is disabled) the decisions it
still held are asked of the next active path, or left pending: none is lost.

Mission record (plain dict, times ISO 8601 UTC)::

    {"id", "name", "project_id", "level": 0..3, "state": "active"|"paused"|"stalled"|"disengaged",
     "state_reason", "max_sessions", "overseer_restarts", "owner_id", "created_at",
     "updated_at", "task_ids": [int], "running": int}
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..contracts import service_contract

__all__ = ["PROPOSAL_ACTIONS", "DecisionPath", "DecisionRequest", "MissionsService", "Proposal"]

PROPOSAL_ACTIONS: tuple[str, ...] = ("approve", "reject", "choice", "answer", "escalate")
"""What a :class:`Proposal` may suggest."""

_NOISE = ("fingerprint", "instance", "detected_at")


@dataclass(frozen=True, slots=True)
class Proposal:
    """A decision path's suggested answer; the overseer decides what is done with it.

    Attributes:
        action: one of :data:`PROPOSAL_ACTIONS`.
        confidence: 0..1, or ``None`` (unscored: counts as 0 against the threshold).
        rationale: why, shown to humans.
        source: who proposed it (``relay:<provider>/<model>``, ``agent:<user>``, ``policy``).
        choice: the option number shown on screen, for ``choice``.
        text: the answer for ``answer`` (a reviewer's note for a rejected ``review``).
    """

    action: str
    confidence: float | None = None
    rationale: str = ""
    source: str = "policy"
    choice: int | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """What the overseer hands a decision path.

    Attributes:
        decision: the decision record (see :mod:`elowen_sdk.services.agents`).
        level: the autonomy level in force, 1..3 (a path is never asked at L0).
        threshold: the confidence an approval needs at that level (0..1).
        mission: the mission record governing the decision, or ``None`` (a task in no mission
            under the overseer's ``default_level``, or an ask with no task).
        task: ``{"id", "title", "description", "state", "summary", "evidence", "project_id"}``
            of the decision's task, or ``None``.
        checkout: the task's project folder, or ``None``.
    """

    decision: Mapping[str, Any]
    level: int
    threshold: float
    mission: Mapping[str, Any] | None = None
    task: Mapping[str, Any] | None = None
    checkout: str | None = None

    @property
    def id(self) -> int:
        return int(self.decision["id"])

    @property
    def kind(self) -> str:
        return str(self.decision["kind"])

    def view(self) -> dict[str, Any]:
        """The JSON-ready view a model or an overseer CLI is shown: ``{"id", "kind",
        "created_at", "request" (the payload without screen bookkeeping), "task"?, "mission"?
        ({"id", "name", "level": "L<n>"}), "level": "L<n>", "threshold"}``."""
        payload = {k: v for k, v in (self.decision.get("payload") or {}).items() if k not in _NOISE}
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "created_at": self.decision.get("created_at"), "request": payload}
        if self.task is not None:
            out["task"] = dict(self.task)
        if self.mission is not None:
            out["mission"] = {"id": self.mission["id"], "name": self.mission["name"], "level": f"L{self.mission['level']}"}
        out["level"] = f"L{self.level}"
        out["threshold"] = self.threshold
        return out


@dataclass(frozen=True, slots=True)
class DecisionPath:
    """A way of scoring decisions, registered by ``register_decision_paths``.

    Attributes:
        name: unique name (``relay``, ``parked``…), as declared in ``[contributes]
            decision_paths``.
        propose: ``async propose(request) -> Proposal | None``. Return the proposal, or
            ``None`` and call :meth:`MissionsService.submit` later (the call may then be
            cancelled at any time: the path was disabled or a human answered). It runs in the
            overseer's nursery with no deadline; a provider's own timeouts bound it. Raising
            escalates the decision.
        priority: the highest enabled priority is asked (builtins: relay 0, parked 10).
        accepts: ``accepts(request) -> bool``: whether this path takes the request (``None``:
            every request); a request it declines goes to the next path.
        description: one line for ``GET /missions`` and the dashboard.
    """

    name: str
    propose: Callable[[DecisionRequest], Awaitable[Proposal | None]]
    priority: int = 0
    accepts: Callable[[DecisionRequest], bool] | None = field(default=None)
    description: str = ""

    def takes(self, request: DecisionRequest) -> bool:
        """Whether this path takes ``request``."""
        return self.accepts is None or bool(self.accepts(request))


@service_contract("missions")
class MissionsService(Protocol):
    """Missions, their autonomy levels, and the overseer's side of the decision flow."""

    def get(self, mission_id: int) -> dict[str, Any]:
        """The mission record. Raises ``LookupError`` when there is none."""
        ...

    def list_missions(self, *, state: str | None = None, after: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Missions by ascending id, filtered by state; ``after``: only ids greater than it."""
        ...

    def of_task(self, task_id: int | None) -> dict[str, Any] | None:
        """The mission ``task_id`` belongs to, or ``None``."""
        ...

    def may_dispatch(self, task: Mapping[str, Any]) -> bool:
        """Whether the agents scheduler may start an agent on ``task`` (a task record with
        ``"id"`` and ``"labels"``) now: ``True`` outside missions; inside one, only an
        ``active`` mission above L0 below its ``max_sessions``."""
        ...

    def threshold(self, level: int) -> float | None:
        """The confidence an approval needs at ``level`` (``None`` at L0)."""
        ...

    def decision_path(self) -> str | None:
        """The name of the highest-priority enabled decision path, or ``None`` (every decision
        waits for a human)."""
        ...

    def request(self, decision_id: int) -> DecisionRequest | None:
        """The request for an open decision as the overseer builds it now (level read now), or
        ``None``: unknown, decided, or at L0 / outside the overseer's business."""
        ...

    async def submit(self, decision_id: int, proposal: Proposal) -> dict[str, Any] | None:
        """A path's answer to a decision it took with ``propose`` returning ``None``: the
        threshold rule of the level in force NOW is applied and the result carried out.
        Returns the settled decision, or ``None`` when it was no longer open."""
        ...

    async def escalate(self, decision_id: int, rationale: str, *, by: str) -> dict[str, Any] | None:
        """Hand an open decision to a human (status ``escalated``); ``None`` if it was not
        pending."""
        ...

    def stall(self, mission_id: int, reason: str) -> dict[str, Any] | None:
        """``active`` → ``stalled`` until a human resumes it; ``None`` if it was not active."""
        ...

    def count_restart(self, mission_id: int) -> int:
        """Add one to the mission's overseer restart counter; returns the new value."""
        ...

"""Plugin glue of ``overseer``: builds the :class:`Runtime` of each enable, offers the
``missions`` service (:class:`~elowen_sdk.services.missions.MissionsService`), registers its
loop and routes, and reacts to events.

Events handled (``on_event``):

* ``decision.created`` → the autopilot routes it (to the active decision path, or a human);
* ``decision.decided`` → wakes ``GET /asks/{id}?wait`` waiters, stops handling a decision
  once it is no longer pending, carries out reviews;
* ``plugin.enabled`` / ``plugin.disabled`` → decisions whose path went away (or that waited
  for one) are routed again;
* ``task.closed`` → a ``review`` decision (mission tasks);
* ``task.created`` with a parent in a mission → the child joins that mission;
* ``task.updated`` to ``blocked`` → the task's active mission stalls.

Events published: ``mission.created``, ``mission.updated``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from elowen_sdk import Loop, Service, hookimpl
from elowen_sdk.services.missions import DecisionRequest, Proposal
from elowen_sdk.services.tasks import TasksService

from .api import routes
from .autopilot import Autopilot
from .config import OverseerConfig, moved_key_warnings
from .missions import MissionError, MissionStore
from .reviews import Reviews

__all__ = ["Missions", "Runtime", "on_event", "on_load", "on_unload", "register_loops", "register_routes", "register_services", "runtime_for"]

log = logging.getLogger("elowen.plugin.overseer")


class Missions:
    """The ``missions`` service: the :class:`MissionStore` reads, the dispatch rule, and the
    overseer's side of the decision flow (see :class:`~elowen_sdk.services.missions.MissionsService`)."""

    def __init__(self, store: MissionStore, autopilot: Autopilot) -> None:
        self._store = store
        self._autopilot = autopilot

    def get(self, mission_id: int) -> dict[str, Any]:
        return self._store.get(mission_id)

    def list_missions(self, *, state: str | None = None, after: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return self._store.list_missions(state=state, after=after, limit=limit)

    def of_task(self, task_id: int | None) -> dict[str, Any] | None:
        return self._store.of_task(task_id)

    def may_dispatch(self, task: Mapping[str, Any]) -> bool:
        return self._store.may_dispatch(task)

    def threshold(self, level: int) -> float | None:
        return self._autopilot.config.threshold(level)

    def decision_path(self) -> str | None:
        return self._autopilot.active_path()

    def request(self, decision_id: int) -> DecisionRequest | None:
        return self._autopilot.request(decision_id)

    async def submit(self, decision_id: int, proposal: Proposal) -> dict[str, Any] | None:
        return await self._autopilot.apply(decision_id, proposal)

    async def escalate(self, decision_id: int, rationale: str, *, by: str) -> dict[str, Any] | None:
        return await self._autopilot.escalate(decision_id, rationale, by=by)

    def stall(self, mission_id: int, reason: str) -> dict[str, Any] | None:
        return self._store.stall(mission_id, reason)

    def count_restart(self, mission_id: int) -> int:
        return self._store.count_restart(mission_id)


@dataclass
class Runtime:
    """Everything one enable of the plugin runs."""

    ctx: Any
    config: OverseerConfig
    missions: MissionStore
    autopilot: Autopilot
    reviews: Reviews
    service: Missions

    @property
    def store(self) -> Any:
        return self.ctx.store

    async def run(self) -> None:
        """Open the autopilot's nursery, then pick up open decisions."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.autopilot.run)
            await self.autopilot.sweep()


_runtimes: dict[str, Runtime] = {}


def runtime_for(ctx: Any) -> Runtime:
    """The runtime of this enable of the plugin (created on first use)."""
    rt = _runtimes.get(ctx.name)
    if rt is None or rt.ctx is not ctx:
        config = OverseerConfig.from_mapping(ctx.config)
        missions = MissionStore(ctx.store, ctx.publish, lambda: ctx.service(TasksService))
        autopilot = Autopilot(ctx, config, missions)
        reviews = Reviews(autopilot)
        autopilot.reviews = reviews
        rt = _runtimes[ctx.name] = Runtime(ctx, config, missions, autopilot, reviews, Missions(missions, autopilot))
    return rt


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    register(Service("missions", runtime_for(ctx).service))


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    rt = runtime_for(ctx)
    register(Loop("overseer.sweep", rt.config.sweep_interval, rt.autopilot.sweep))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: runtime_for(ctx)):
        register(route)


@hookimpl
def on_load(ctx: Any) -> None:
    """Start the autopilot; name the moved config keys an old ``config.toml`` still sets."""
    for warning in moved_key_warnings(ctx.settings):
        ctx.log.warning("%s", warning)
    ctx.start_soon(runtime_for(ctx).run, name="overseer.run")


@hookimpl
def on_unload(ctx: Any) -> None:
    """Forget this enable's runtime (its nursery is already cancelled; decisions it held stay
    pending and are picked up by the next enable's sweep)."""
    _runtimes.pop(ctx.name, None)


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    rt = _runtimes.get(ctx.name)
    if rt is None:
        return
    data = event.data
    if event.type == "decision.created":
        rt.autopilot.submit(data.get("decision") or {})
    elif event.type == "decision.decided":
        decision = data.get("decision") or {}
        rt.autopilot.settled(decision)
        rt.reviews.on_decided(decision)
    elif event.type in ("plugin.enabled", "plugin.disabled", "plugin.error"):
        rt.autopilot.reroute()
    elif event.type == "task.closed":
        rt.reviews.on_closed(data.get("task") or {})
    elif event.type == "task.created":
        _join_parent_mission(rt, data.get("task") or {})
    elif event.type == "task.updated":
        task = data.get("task") or {}
        if "state" in (data.get("changed") or ()) and task.get("state") == "blocked":
            mission = rt.missions.of_task(task.get("id"))
            if mission is not None:
                rt.missions.stall(mission["id"], f"task {task['id']} is blocked: {task.get('resume_note') or 'no note'}")


def _join_parent_mission(rt: Runtime, task: dict[str, Any]) -> None:
    parent = task.get("parent_id")
    if parent is None or task.get("id") is None:
        return
    mission = rt.missions.of_task(parent)
    if mission is not None and mission["state"] != "disengaged":
        try:
            rt.missions.add_tasks(mission["id"], [int(task["id"])])
        except MissionError as exc:
            log.info("task %s stays out of mission %s: %s", task["id"], mission["id"], exc)

"""Plugin glue of ``overseer``: builds the :class:`Runtime` of each enable, offers the
``missions`` service, installs the decision gate in the agents plugin, registers its loops and
routes, and reacts to task and decision events.

Service ``missions`` — the :class:`~.missions.MissionStore`; the agents scheduler asks
``may_dispatch(task) -> bool`` before it claims a task.

Events handled (``on_event``):

* ``decision.created`` of kind ``check`` → the autopilot (the gate only sees prompts/questions);
* ``decision.decided`` → wakes ``GET /asks/{id}?wait`` waiters, carries out reviews, drops the
  decision from a parked overseer's queue;
* ``task.closed`` → a ``review`` decision (mission tasks);
* ``task.created`` with a parent in a mission → the child joins that mission;
* ``task.updated`` to ``blocked`` → the task's active mission stalls.

Events published: ``mission.created``, ``mission.updated``, ``overseer.agent_spawned``,
``overseer.agent_died``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio
from elowen_sdk import Loop, Service, hookimpl

from .api import routes
from .autopilot import Autopilot
from .config import OverseerConfig
from .missions import MissionError, MissionStore
from .parked import ParkedOverseers
from .reviews import Reviews

__all__ = ["Runtime", "on_event", "on_load", "on_unload", "register_loops", "register_routes", "register_services", "runtime_for"]

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything one enable of the plugin runs."""

    ctx: Any
    config: OverseerConfig
    missions: MissionStore
    autopilot: Autopilot
    reviews: Reviews
    parked: ParkedOverseers

    @property
    def store(self) -> Any:
        return self.ctx.store

    async def run(self) -> None:
        """Open the autopilot's nursery, install the gate as soon as the agents plugin is up,
        then pick up open decisions."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.autopilot.run)
            while not self.autopilot.install_gate():
                await trio.sleep(0.2)
            await self.autopilot.sweep()

    async def liveness(self) -> None:
        """The parked overseers' liveness round (also stops them when ``overseer_exec`` is
        empty)."""
        if self.config.overseer_exec or self.parked.running():
            await self.parked.liveness()


_runtimes: dict[str, Runtime] = {}


def runtime_for(ctx: Any) -> Runtime:
    """The runtime of this enable of the plugin (created on first use)."""
    rt = _runtimes.get(ctx.name)
    if rt is None or rt.ctx is not ctx:
        config = OverseerConfig.from_mapping(ctx.config)
        missions = MissionStore(ctx.store, ctx.publish)
        autopilot = Autopilot(ctx, config, missions)
        reviews = Reviews(autopilot)
        parked = ParkedOverseers(autopilot)
        autopilot.reviews, autopilot.parked = reviews, parked
        rt = _runtimes[ctx.name] = Runtime(ctx, config, missions, autopilot, reviews, parked)
    return rt


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    register(Service("missions", runtime_for(ctx).missions))


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    rt = runtime_for(ctx)
    register(Loop("overseer.sweep", rt.config.sweep_interval, rt.autopilot.sweep))
    register(Loop("overseer.liveness", rt.config.liveness_interval, rt.liveness))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: runtime_for(ctx)):
        register(route)


@hookimpl
def on_load(ctx: Any) -> None:
    """Start the autopilot (it installs the gate once the agents plugin is up)."""
    ctx.start_soon(runtime_for(ctx).run, name="overseer.run")


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Remove the gate and stop the parked overseer agents."""
    rt = _runtimes.pop(ctx.name, None)
    if rt is None:
        return
    rt.autopilot.remove_gate()
    try:
        await rt.parked.stop_all("the overseer plugin was disabled")
    except Exception:
        log.exception("overseer: stopping the parked overseers failed")


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    rt = _runtimes.get(ctx.name)
    if rt is None:
        return
    data = event.data
    if event.type == "decision.created":
        decision = data.get("decision") or {}
        if decision.get("kind") == "check":
            rt.autopilot.submit(decision)
    elif event.type == "decision.decided":
        decision = data.get("decision") or {}
        rt.autopilot.notify_decided(int(decision["id"]))
        if decision.get("status") not in ("pending", "escalated"):
            rt.parked.forget(int(decision["id"]))
        rt.reviews.on_decided(decision)
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
            log.info("overseer: task %s stays out of mission %s: %s", task["id"], mission["id"], exc)

"""Plugin glue of ``overseer-parked``: registers the decision path ``parked`` (only while
``overseer_exec`` is set), the liveness loop and the ``/overseer/*`` routes.

The path takes decisions of missions only and answers later: ``propose`` queues the decision
for the mission's overseer agent and returns ``None``; the agent's ``POST /overseer/decide``
reaches the overseer through :meth:`MissionsService.submit`.

Events handled: ``decision.decided`` → a decision no longer pending leaves the queue.
Events published: ``overseer.agent_spawned``, ``overseer.agent_died``.
"""

from __future__ import annotations

from typing import Any

from elowen_sdk import Loop, hookimpl
from elowen_sdk.services.missions import DecisionPath

from .api import routes
from .parked import ParkedConfig, ParkedOverseers

__all__ = ["PRIORITY", "on_event", "on_unload", "register_decision_paths", "register_loops", "register_routes", "runtime_for"]

PRIORITY = 10
"""Above ``overseer-relay`` (0): with both enabled, mission decisions go to the parked overseer."""

_runtimes: dict[str, ParkedOverseers] = {}


def runtime_for(ctx: Any) -> ParkedOverseers:
    """The :class:`ParkedOverseers` of this enable of the plugin (created on first use)."""
    rt = _runtimes.get(ctx.name)
    if rt is None or rt.ctx is not ctx:
        rt = _runtimes[ctx.name] = ParkedOverseers(ctx, ParkedConfig.from_mapping(ctx.config))
    return rt


@hookimpl
def register_decision_paths(ctx: Any, register: Any) -> None:
    rt = runtime_for(ctx)
    if not rt.config.overseer_exec:
        ctx.log.info("overseer_exec is empty: no parked overseer (set [plugins.overseer-parked.config] overseer_exec)")
        return
    register(
        DecisionPath("parked", rt.propose, priority=PRIORITY, accepts=rt.accepts, description=f"a parked overseer CLI per mission ({rt.config.overseer_exec})")
    )


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    rt = runtime_for(ctx)

    async def liveness() -> None:
        if rt.config.overseer_exec or rt.running():
            await rt.liveness()

    register(Loop("overseer-parked.liveness", rt.config.liveness_interval, liveness))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: runtime_for(ctx)):
        register(route)


@hookimpl
async def on_unload(ctx: Any) -> None:
    """Stop the parked overseer agents. Their queued decisions stay pending; the overseer asks
    the next decision path (or leaves them to a human)."""
    rt = _runtimes.pop(ctx.name, None)
    if rt is None:
        return
    try:
        await rt.stop_all("the overseer-parked plugin was disabled")
    except Exception:
        ctx.log.exception("stopping the parked overseers failed")


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    rt = _runtimes.get(ctx.name)
    if rt is not None and event.type == "decision.decided":
        decision = event.data.get("decision") or {}
        if decision.get("status") != "pending" and decision.get("id") is not None:
            rt.forget(int(decision["id"]))

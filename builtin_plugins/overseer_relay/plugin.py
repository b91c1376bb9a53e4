"""Plugin glue of ``overseer-relay``: registers the decision path ``relay``.

The path answers at once (``propose`` returns the :class:`Proposal`): the model's, or with no
``model`` configured the level's standing rule (:func:`~.relay.no_model_proposal`). At most
``concurrency`` model calls run at once. The overseer applies the threshold rule.
"""

from __future__ import annotations

from typing import Any

import trio

from elowen_sdk import hookimpl
from elowen_sdk.chat import InferenceError
from elowen_sdk.services import InferenceService
from elowen_sdk.services.missions import DecisionPath, DecisionRequest, Proposal

from .relay import no_model_proposal, relay_proposal

__all__ = ["PRIORITY", "RelayPath", "register_decision_paths"]

PRIORITY = 0
"""Below ``overseer-parked`` (10): with both enabled, mission decisions go to the parked
overseer and the rest (tasks in no mission, asks without a task) to the relay."""


class RelayPath:
    """The ``relay`` decision path of one enable of the plugin."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.model = str(ctx.config.get("model") or "")
        self._limiter = trio.CapacityLimiter(int(ctx.config.get("concurrency") or 2))

    async def propose(self, request: DecisionRequest) -> Proposal:
        """The model's proposal for ``request`` (``escalate`` when the model or the inference
        service fails)."""
        if not self.model:
            return no_model_proposal(request.kind, request.level)
        try:
            inference = self.ctx.service(InferenceService)
        except LookupError:
            return Proposal("escalate", None, "the inference plugin is disabled: the overseer model cannot be asked", f"relay:{self.model}")
        async with self._limiter:
            try:
                return await relay_proposal(inference, self.model, request)
            except InferenceError as exc:  # raised before the call reached the provider
                return Proposal("escalate", None, f"the overseer model failed: {exc}", f"relay:{self.model}")


@hookimpl
def register_decision_paths(ctx: Any, register: Any) -> None:
    path = RelayPath(ctx)
    description = f"the overseer model {path.model}" if path.model else "no overseer model: only L3 auto-approves"
    register(DecisionPath("relay", path.propose, priority=PRIORITY, description=description))

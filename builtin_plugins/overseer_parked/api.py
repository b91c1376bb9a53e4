"""HTTP routes of the ``overseer-parked`` plugin (builtin: mounted at these paths).

==========================  ====================================================================
``GET /overseer/poll``      ``?wait=S`` (0–60, default 25; ``mission=`` for admins):
                            ``{"decision": {...} | null}`` (:meth:`DecisionRequest.view`)
``POST /overseer/decide``   ``{id, action: approve|reject|escalate|choice|answer, confidence?,
                            rationale?, choice?, text?, mission? (admins)}`` → the decision
``GET /overseer/agents``    parked overseer agents (admin)
==========================  ====================================================================

Only a mission's overseer principal (the users service's ``overseer_mission``) or an admin
polls and decides; 409 ``no_parked_overseer`` while ``overseer_exec`` is empty, 503 while the
overseer plugin (the ``missions`` service) is disabled.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from elowen_sdk import HTTPError, Principal, Request, Route
from elowen_sdk.services import UsersService
from elowen_sdk.services.missions import PROPOSAL_ACTIONS, Proposal

__all__ = ["routes"]

MAX_WAIT = 60.0
MAX_ID = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")


def _id(value: Any, field: str, *, strings: bool = False) -> int:
    """A JSON (or, with ``strings``, query) value as a row id; 422 otherwise."""
    if strings and isinstance(value, str) and _DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        raise HTTPError(422, "validation_error", f"{field} must be a positive integer id (at most {MAX_ID})")
    return value


def _wait(query: Any) -> float:
    value = query.get("wait")
    if value in (None, ""):
        return 25.0
    try:
        wait = float(value)
    except ValueError:
        raise HTTPError(422, "validation_error", "wait must be a number of seconds") from None
    if not 0 <= wait <= MAX_WAIT:
        raise HTTPError(422, "validation_error", f"wait must be in 0..{MAX_WAIT:g}")
    return wait


class _Api:
    def __init__(self, runtime: Callable[[], Any]) -> None:
        self._runtime = runtime

    @property
    def parked(self) -> Any:
        return self._runtime()

    def _mission(self, me: Principal, requested: Any) -> int:
        if me.scope == "full" and me.user_id is not None:
            try:
                own = self.parked.ctx.service(UsersService).overseer_mission(me.user_id)
            except LookupError:
                raise HTTPError(503, "unavailable", "the users service is not available") from None
            if own is not None:
                return int(own)
        if not me.is_admin:
            raise HTTPError(403, "forbidden", "only a mission's overseer agent (or an admin) polls decisions")
        if requested in (None, ""):
            raise HTTPError(422, "validation_error", "mission is required for admins")
        return _id(requested, "mission", strings=True)

    def _active(self) -> Any:
        parked = self.parked
        if not parked.config.overseer_exec:
            raise HTTPError(409, "no_parked_overseer", "overseer_exec is not set in [plugins.overseer-parked.config]: no parked overseer")
        return parked

    async def poll(self, req: Request) -> dict[str, Any]:
        mission_id = self._mission(req.principal, req.query.get("mission"))
        parked = self._active()
        wait = _wait(req.query)
        try:
            decision = await parked.poll(mission_id, wait, claimer=req.principal.name)
        except LookupError:
            raise HTTPError(503, "unavailable", "the overseer plugin is disabled; run: elowen plugin enable overseer") from None
        return {"decision": decision}

    async def decide(self, req: Request) -> dict[str, Any]:
        body = req.json if isinstance(req.json, dict) else None
        if body is None:
            raise HTTPError(400, "bad_request", "the body must be a JSON object")
        mission_id = self._mission(req.principal, body.get("mission"))
        decision_id = _id(body.get("id"), "id")
        parked = self._active()
        if parked.mission_of_queued(decision_id) != mission_id:
            raise HTTPError(404, "not_found", f"decision {decision_id} is not waiting for mission {mission_id}'s overseer")
        action = body.get("action")
        if action not in PROPOSAL_ACTIONS:
            raise HTTPError(422, "validation_error", "action must be approve, reject, escalate, choice or answer")
        confidence = body.get("confidence")
        if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1):
            raise HTTPError(422, "validation_error", "confidence must be a number in 0..1")
        choice = body.get("choice")
        if action == "choice" and (isinstance(choice, bool) or not isinstance(choice, int) or not 1 <= choice <= 1000):
            raise HTTPError(422, "validation_error", "choice must be the option number (≥ 1)")
        text = body.get("text")
        rationale = body.get("rationale") or ""
        if (text is not None and not isinstance(text, str)) or not isinstance(rationale, str):
            raise HTTPError(422, "validation_error", "text and rationale must be strings")
        proposal = Proposal(action, None if confidence is None else float(confidence), rationale, f"agent:{req.principal.name}", choice=choice, text=text)
        try:
            result = await parked.decide(decision_id, proposal)
        except LookupError:
            raise HTTPError(503, "unavailable", "the overseer plugin is disabled; run: elowen plugin enable overseer") from None
        if result is None:
            raise HTTPError(409, "already_decided", f"decision {decision_id} was decided meanwhile")
        return result

    def agents(self, req: Request) -> dict[str, Any]:
        if not req.principal.is_admin:
            raise HTTPError(403, "forbidden", "admins only")
        return {"items": self.parked.agents(), "next_cursor": None}


def routes(runtime: Callable[[], Any]) -> list[Route]:
    """The plugin's routes; ``runtime()`` returns the current :class:`~.parked.ParkedOverseers`."""
    api = _Api(runtime)
    return [
        Route("GET", "/overseer/poll", api.poll, "Next decision for a parked overseer agent (long-poll)"),
        Route("POST", "/overseer/decide", api.decide, "A parked overseer agent's answer"),
        Route("GET", "/overseer/agents", api.agents, "Parked overseer agents"),
    ]

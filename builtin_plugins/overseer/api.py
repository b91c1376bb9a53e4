"""HTTP routes of the overseer plugin (builtin: mounted at these paths).

==========================================  =====================================================
``GET /missions``                            ``?state=&limit=&cursor=`` missions the caller may see
                                             (each with ``progress``: ``{total, done, cancelled,
                                             open}`` task counts, or null),
                                             and ``decision_path``: ``{"active": name | null,
                                             "paths": [...], "waiting": n}`` (``active`` null:
                                             every decision waits for a human)
``POST /missions``                           ``{name, level: "L0".."L3" | 0..3, project_id?,
                                             max_sessions?, task_ids?, engage?}`` → 201
``GET /missions/{id}``                       one mission
``PATCH /missions/{id}``                     ``{name?, level?, max_sessions?}`` (at once)
``POST /missions/{id}/tasks``                ``{task_ids: [int]}``
``DELETE /missions/{id}/tasks/{task_id}``    take a task out
``POST /missions/{id}/engage|pause|resume|disengage``  ``{reason?}``
``GET /escalations``                         ``?limit=&cursor=`` decisions waiting for a human
``POST /escalations/{id}``                   ``{action: approve|reject|choice|answer, choice?,
                                             text?, rationale?}``
``POST /asks``                               ``{question, history?: bool | [str], task_id?}`` → 201
``GET /asks/{id}``                           ``?wait=S`` (0–60), ``seen=<status>``: long-poll
                                             while the status is still ``seen``
==========================================  =====================================================

Who may do what: agent tokens only ask (``POST /asks``, ``GET /asks/{id}`` of their own task);
a parked overseer's principal (the users service's ``overseer_mission``) sees none of these
(it polls and decides through the ``overseer-parked`` plugin's routes); admins do everything;
members see the missions and escalations of projects they may see, and act (change, add or take
out tasks, engage/pause/resume/disengage, answer) only by the one rule,
:meth:`elowen_sdk.Principal.may_act`: a mission's owner acts on the mission, a task's owner
answers its decisions (exactly as ``POST /decisions/{id}`` of the agents plugin); other members
get 403 ``not_owner``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from elowen_sdk import HTTPError, Principal, Request, Response, Route
from elowen_sdk.pagination import decode_cursor, page
from elowen_sdk.services import AgentsService, TasksService, UsersService

from .asks import ask_record, create_ask
from .config import parse_level
from .escalations import answer_action, inbox_item
from .ids import body_id, body_ids, parse_id, path_id
from .missions import MAX_SESSIONS, TRANSITIONS, MissionError

__all__ = ["routes"]

MAX_WAIT = 60.0

WAITING = frozenset({"pending", "escalated"})
"""Decision statuses a human may still answer (the escalations inbox lists both)."""


def _after(query: Mapping[str, str]) -> int | None:
    """The id the ``cursor`` continues after (the SDK's cursor format); raises
    ``BadCursor`` (400 ``bad_cursor``)."""
    return decode_cursor(query.get("cursor"))


def _limit(query: Mapping[str, str]) -> int:
    value = query.get("limit") or "50"
    if parse_id(value) is None or not 1 <= int(value) <= 500:
        raise HTTPError(422, "validation_error", "limit must be an integer in 1..500")
    return int(value)


def _wait(query: Mapping[str, str], default: float = 0.0) -> float:
    value = query.get("wait")
    if value in (None, ""):
        return default
    try:
        wait = float(value)
    except ValueError:
        raise HTTPError(422, "validation_error", "wait must be a number of seconds") from None
    if not 0 <= wait <= MAX_WAIT:
        raise HTTPError(422, "validation_error", f"wait must be in 0..{MAX_WAIT:g}")
    return wait


def _page(items: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    return page(items, limit)


def _body(request: Request) -> dict[str, Any]:
    if request.json is None:
        return {}
    if not isinstance(request.json, dict):
        raise HTTPError(400, "bad_request", "the body must be a JSON object")
    return request.json


def _full(me: Principal) -> None:
    if me.scope != "full":
        raise HTTPError(403, "forbidden", "agent tokens cannot do this")


def _admin(me: Principal) -> None:
    if not me.is_admin:
        raise HTTPError(403, "forbidden", "admins only")


class _Api:
    def __init__(self, runtime: Callable[[], Any]) -> None:
        self._runtime = runtime

    @property
    def rt(self) -> Any:
        return self._runtime()

    def _overseer(self, me: Principal) -> int | None:
        """The mission of a parked overseer's principal, else ``None`` (the users service
        knows; without it nobody is taken for an overseer)."""
        if me.scope != "full" or me.user_id is None:
            return None
        try:
            users = self.rt.ctx.service(UsersService)
        except LookupError:
            return None
        return users.overseer_mission(me.user_id)

    # ---------------------------------------------------------------- helpers

    def _mission(self, me: Principal, mission_id: str) -> dict[str, Any]:
        _full(me)
        try:
            mission = self.rt.missions.get(path_id(mission_id, "mission"))
        except MissionError as exc:
            raise HTTPError(exc.status, exc.code, str(exc)) from None
        if not self._sees(me, mission):
            raise HTTPError(404, "not_found", f"mission {mission_id} not found")
        return mission

    def _acting_on(self, me: Principal, mission_id: str) -> dict[str, Any]:
        """The mission if ``me`` may act on it (its owner or an admin); 404 when not visible,
        403 ``not_owner`` for another member who sees it."""
        mission = self._mission(me, mission_id)
        if not me.may_act(mission["owner_id"], mission["project_id"]):
            raise HTTPError(403, "not_owner", "only the mission's owner or an admin may change or run it")
        return mission

    def _task_owner(self, task_id: int | None) -> tuple[int | None, int | None]:
        """``(owner_id, project_id)`` of a task; ``(None, None)`` when absent."""
        if task_id is None:
            return None, None
        try:
            row = self.rt.ctx.service(TasksService).exists(int(task_id))
        except LookupError:
            return None, None
        return (row.get("owner_id"), row.get("project_id")) if row is not None else (None, None)

    def _sees(self, me: Principal, mission: Mapping[str, Any]) -> bool:
        if me.is_admin:
            return True
        if self._overseer(me) is not None:
            return False
        if mission["project_id"] is None:
            return mission["owner_id"] is not None and mission["owner_id"] == me.user_id
        return me.can_see_project(mission["project_id"])

    def _sees_task(self, me: Principal, task_id: int | None) -> bool:
        if me.is_admin:
            return True
        if task_id is None or me.scope != "full" or self._overseer(me) is not None:
            return False
        try:
            row = self.rt.ctx.service(TasksService).exists(task_id)
        except LookupError:
            return False
        return row is not None and me.can_see_project(row["project_id"])

    def _wake(self) -> None:
        with contextlib.suppress(LookupError):
            self.rt.ctx.service(AgentsService).wake()

    def _mission_call(self, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            result = fn()
        except MissionError as exc:
            raise HTTPError(exc.status, exc.code, str(exc)) from None
        self._wake()
        return result

    # ---------------------------------------------------------------- missions

    def list_missions(self, req: Request) -> dict[str, Any]:
        _full(req.principal)
        state = req.query.get("state") or None
        limit = _limit(req.query)
        items = [m for m in self.rt.missions.list_missions(state=state, after=_after(req.query), limit=10_000) if self._sees(req.principal, m)]
        out = _page(items[: limit + 1], limit)
        out["items"] = [{**m, "progress": self.rt.missions.progress(m)} for m in out["items"]]
        return {**out, "decision_path": self.rt.autopilot.status()}

    def create_mission(self, req: Request) -> Response:
        me = req.principal
        _full(me)
        if self._overseer(me) is not None:
            raise HTTPError(403, "forbidden", "an overseer cannot create missions")
        body = _body(req)
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise HTTPError(422, "validation_error", "name is required")
        try:
            level = parse_level(body.get("level", 1))
        except ValueError as exc:
            raise HTTPError(422, "validation_error", str(exc)) from None
        project_id = body.get("project_id")
        if project_id is not None:
            project_id = body_id(project_id, "project_id")
        if not me.is_admin and (project_id is None or not me.can_see_project(project_id)):
            raise HTTPError(403, "forbidden", "members create missions in a project they may see (project_id)")
        task_ids = body_ids(body.get("task_ids") or [], "task_ids", allow_empty=True)
        if not all(self._sees_task(me, t) for t in task_ids):
            raise HTTPError(404, "not_found", "a task in task_ids was not found")
        max_sessions = body.get("max_sessions", 0)
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or not 0 <= max_sessions <= MAX_SESSIONS:
            raise HTTPError(422, "validation_error", f"max_sessions must be an integer in 0..{MAX_SESSIONS}")
        mission = self._mission_call(
            lambda: self.rt.missions.create(
                name=name,
                level=level,
                project_id=project_id,
                max_sessions=max_sessions,
                task_ids=task_ids,
                owner_id=me.user_id,
                engage=bool(body.get("engage", False)),
            )
        )
        return Response(mission, status=201)

    def get_mission(self, req: Request) -> dict[str, Any]:
        return self._mission(req.principal, req.params["id"])

    def patch_mission(self, req: Request) -> dict[str, Any]:
        mission = self._acting_on(req.principal, req.params["id"])
        body = dict(_body(req))
        if "level" in body:
            try:
                body["level"] = parse_level(body["level"])
            except ValueError as exc:
                raise HTTPError(422, "validation_error", str(exc)) from None
        return self._mission_call(lambda: self.rt.missions.update(mission["id"], body))

    def add_tasks(self, req: Request) -> dict[str, Any]:
        mission = self._acting_on(req.principal, req.params["id"])
        task_ids = body_ids(_body(req).get("task_ids"), "task_ids")
        if not all(self._sees_task(req.principal, t) for t in task_ids):
            raise HTTPError(404, "not_found", "a task in task_ids was not found")
        return self._mission_call(lambda: self.rt.missions.add_tasks(mission["id"], task_ids))

    def remove_task(self, req: Request) -> dict[str, Any]:
        mission = self._acting_on(req.principal, req.params["id"])
        task_id = path_id(req.params["task_id"], "task")
        return self._mission_call(lambda: self.rt.missions.remove_task(mission["id"], task_id))

    def _transition(self, verb: str) -> Callable[[Request], dict[str, Any]]:
        def handler(req: Request) -> dict[str, Any]:
            mission = self._acting_on(req.principal, req.params["id"])
            reason = _body(req).get("reason")
            if reason is not None and not isinstance(reason, str):
                raise HTTPError(422, "validation_error", "reason must be a string")
            return self._mission_call(lambda: self.rt.missions.transition(mission["id"], verb, reason=reason))

        return handler

    # ---------------------------------------------------------------- escalations

    def _decisions(self) -> Any:
        """The agents plugin's decisions service; 503 while that plugin is disabled."""
        try:
            return self.rt.autopilot.decisions()
        except LookupError:
            raise HTTPError(503, "unavailable", "decisions come from the agents plugin, which is disabled; run: elowen plugin enable agents") from None

    def list_escalations(self, req: Request) -> dict[str, Any]:
        me = req.principal
        _full(me)
        limit = _limit(req.query)
        after = _after(req.query)
        out: list[dict[str, Any]] = []
        try:
            self.rt.autopilot.decisions()
        except LookupError:
            return _page([], limit)  # no agents plugin, no agent decisions to escalate
        while len(out) <= limit:
            # every decision a human may answer: escalated ones and those still pending (in a
            # mission or not; the CLI, the web inbox and its badge all read this list)
            batch = self.rt.autopilot.list_decisions(after=after, limit=500)
            if not batch:
                break
            out += [inbox_item(d, self.rt.ctx, self.rt.missions) for d in batch if d.get("status") in WAITING and self._sees_task(me, d.get("task_id"))]
            after = batch[-1]["id"]
        return _page(out[: limit + 1], limit)

    async def answer_escalation(self, req: Request) -> dict[str, Any]:
        me = req.principal
        _full(me)
        decision_id = path_id(req.params["id"], "decision")
        decision = self._decisions().get(decision_id)
        if decision is None or not self._sees_task(me, decision.get("task_id")):
            raise HTTPError(404, "not_found", f"decision {decision_id} not found")
        if not me.may_act(*self._task_owner(decision.get("task_id"))):
            raise HTTPError(403, "not_owner", "only the task's owner or an admin may answer its decisions")
        if decision["status"] not in ("escalated", "pending"):
            raise HTTPError(409, "already_decided", f"decision {decision_id} is {decision['status']}")
        try:
            action, choice, text, rationale = answer_action(_body(req))
        except ValueError as exc:
            raise HTTPError(422, "validation_error", str(exc)) from None
        try:
            result = await self._decisions().decide(
                decision_id,
                action,
                choice=choice,
                text=text,
                rationale=rationale,
                decided_by=f"user:{me.user_id}",
            )
        except Exception as exc:
            if hasattr(exc, "status") and hasattr(exc, "code"):
                raise HTTPError(exc.status, exc.code, getattr(exc, "message", str(exc))) from None
            raise
        return inbox_item(result, self.rt.ctx, self.rt.missions)

    # ---------------------------------------------------------------- asks

    def create_ask(self, req: Request) -> Response:
        me = req.principal
        body = _body(req)
        question = body.get("question")
        if not isinstance(question, str):
            raise HTTPError(422, "validation_error", "question is required")
        if me.scope == "agent":
            task_id = me.task_id
        else:
            if self._overseer(me) is not None:
                raise HTTPError(403, "forbidden", "an overseer cannot ask")
            task_id = body.get("task_id")
            if task_id is not None:
                task_id = body_id(task_id, "task_id")
                if not self._sees_task(me, task_id):
                    raise HTTPError(404, "not_found", f"task {task_id} not found")
        try:
            record = create_ask(self.rt.autopilot, question=question, task_id=task_id, asker=me.name, history=body.get("history", False))
        except ValueError as exc:
            raise HTTPError(422, "validation_error", str(exc)) from None
        return Response(record, status=201)

    async def get_ask(self, req: Request) -> dict[str, Any]:
        me = req.principal
        decision_id = path_id(req.params["id"], "ask")
        wait = _wait(req.query)
        decisions = self._decisions()
        decision = decisions.get(decision_id)
        visible = (
            decision is not None
            and decision["kind"] == "message"
            and (
                (me.scope == "agent" and decision.get("task_id") == me.task_id)
                or (
                    me.scope == "full"
                    and (
                        decision.get("task_id") is None
                        and (me.is_admin or (decision.get("payload") or {}).get("asker") == me.name)
                        or self._sees_task(me, decision.get("task_id"))
                    )
                )
            )
        )
        if not visible:
            raise HTTPError(404, "not_found", f"ask {decision_id} not found")
        seen = req.query.get("seen") or decision["status"]
        if wait > 0 and decision["status"] == seen and seen in ("pending", "escalated"):

            def still_open() -> bool:  # return on any change (pending → escalated too)
                current = decisions.get(decision_id)
                return current is not None and current["status"] == seen

            await self.rt.autopilot.wait_decided(decision_id, wait, still_open)
            decision = decisions.get(decision_id)
        return ask_record(decision)


def routes(runtime: Callable[[], Any]) -> list[Route]:
    """The plugin's routes; ``runtime()`` returns the current :class:`~.plugin.Runtime`."""
    api = _Api(runtime)
    out = [
        Route("GET", "/missions", api.list_missions, "List missions"),
        Route("POST", "/missions", api.create_mission, "Create a mission"),
        Route("GET", "/missions/{id}", api.get_mission, "Get a mission"),
        Route("PATCH", "/missions/{id}", api.patch_mission, "Change a mission's name, level or max_sessions"),
        Route("POST", "/missions/{id}/tasks", api.add_tasks, "Add tasks to a mission"),
        Route("DELETE", "/missions/{id}/tasks/{task_id}", api.remove_task, "Take a task out of a mission"),
    ]
    out += [Route("POST", f"/missions/{{id}}/{verb}", api._transition(verb), f"{verb.capitalize()} a mission") for verb in TRANSITIONS]
    out += [
        Route("GET", "/escalations", api.list_escalations, "Decisions waiting for a human"),
        Route("POST", "/escalations/{id}", api.answer_escalation, "Answer an escalated decision"),
        Route("POST", "/asks", api.create_ask, "Ask the autopilot a question (elowen ask)"),
        Route("GET", "/asks/{id}", api.get_ask, "An ask and its answer (long-poll with ?wait=S)"),
    ]
    return out

"""Projects of the core loop: opening one from a chat message, planning it into the ledger,
approving and editing the plan, and its tree.

Ledger layout of a project: one *parent* task (label ``core-loop:project``, and
``mission:<id>`` when the project runs in a mission) and one *child* task per plan item (label
``core-loop:task``, ``parent_id`` the parent), with the plan's
dependencies as ledger dependencies. The whole plan is written in ONE store transaction (the
tasks service's writes join it; their events go out on commit), so no agent ever sees half a
plan. Every task is written ``blocked`` — *held*: nothing runs until the executor releases one
task at a time (``blocked → open``). The parent stays ``blocked`` until the run ends; it is never
run itself.

Project states (``core_loop_projects.state``): ``planning`` → ``awaiting_approval`` (with
``plan_approval``) → ``approved`` → ``done``; ``failed`` when planning failed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from elowen_sdk import ElowenError
from elowen_sdk.chat import ChatRequest, Message
from elowen_sdk.services import InferenceService, MissionsService, TasksService

from .planner import PLAN_SCHEMA, PRIORITIES, Plan, PlanError, parse_plan, planner_messages
from .settings import Settings
from .store import LoopStore

__all__ = ["LABEL_PROJECT", "LABEL_TASK", "ProjectError", "Projects", "describe"]

log = logging.getLogger("elowen.plugin.core-loop")

LABEL_PROJECT = "core-loop:project"
LABEL_TASK = "core-loop:task"
HELD_NOTE = "held by the core loop: runs when the executor releases it"


class ProjectError(ElowenError):
    """A project action that does not fit: unknown project, wrong state, bad edit.

    Attributes:
        status: HTTP status (404, 409, 422).
        code: short error code.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def describe(description: str, acceptance: Sequence[str]) -> str:
    """A child task's ledger description: the plan's description and its acceptance criteria
    (the agent reads them there)."""
    text = description.strip()
    if acceptance:
        text += ("\n\n" if text else "") + "Acceptance criteria:\n" + "\n".join(f"- {c}" for c in acceptance)
        text += "\n\nClose the task only with evidence that shows each criterion met (command output, test results)."
    return text


class Projects:
    """Opening, planning, approving and editing projects.

    Args:
        ctx: the plugin context (``store``, ``service:tasks``, optional ``service:inference``).
        settings: a callable returning the current :class:`~.settings.Settings`.
    """

    def __init__(self, ctx: Any, settings: Any) -> None:
        self.ctx = ctx
        self.settings = settings
        self.db = LoopStore(ctx.store)

    # -- services ---------------------------------------------------------------------------

    def tasks(self) -> TasksService | None:
        try:
            return self.ctx.service(TasksService)  # type: ignore[no-any-return]
        except LookupError:
            return None

    def relay(self) -> InferenceService | None:
        try:
            return self.ctx.service(InferenceService)  # type: ignore[no-any-return]
        except LookupError:
            return None

    # -- opening and planning ---------------------------------------------------------------

    def open(self, *, request: str, user_id: int | None, conversation_id: int | None, ledger_project: int) -> dict[str, Any]:
        """Record a new project in state ``planning`` (the plan is made by :meth:`plan`)."""
        settings: Settings = self.settings()
        mission = settings.mission_id or None
        return self.db.open_project(ledger_project=ledger_project, user_id=user_id, conversation_id=conversation_id, request=request, mission_id=mission)

    async def plan(self, pid: int) -> dict[str, Any]:
        """Ask the planner for the project's plan and write it into the ledger; returns the
        project row (state ``awaiting_approval``/``approved``, or ``failed`` with ``error``)."""
        project = self.db.project(pid)
        if project is None:
            raise ProjectError(404, "not_found", f"no core-loop project {pid}")
        settings: Settings = self.settings()
        relay = self.relay()
        if relay is None:
            return self.db.update_project(pid, state="failed", error="the inference service is not available")
        request = ChatRequest(
            settings.planner_model,
            [Message(role, text) for role, text in planner_messages(project["request"], max_tasks=settings.planner_max_tasks)],  # type: ignore[arg-type]
            response_schema=PLAN_SCHEMA,
            schema_name="plan",
            purpose="planner",
        )
        try:
            with trio.fail_after(settings.planner_timeout):
                answer = await relay.chat(request)
            plan = parse_plan(answer.text, max_tasks=settings.planner_max_tasks)
        except trio.TooSlowError:
            return self._failed(pid, f"the planner took longer than {settings.planner_timeout:g}s")
        except PlanError as exc:
            return self._failed(pid, f"the planner's answer is not a plan: {exc}")
        except ElowenError as exc:  # the relay's errors
            return self._failed(pid, f"the planner failed: {exc}")
        tokens = answer.usage.input_tokens + answer.usage.output_tokens
        return self.write(pid, plan, planner_tokens=tokens)

    def _failed(self, pid: int, reason: str) -> dict[str, Any]:
        log.warning("core-loop project %s: %s", pid, reason)
        return self.db.update_project(pid, state="failed", error=reason)

    def write(self, pid: int, plan: Plan, *, planner_tokens: int = 0) -> dict[str, Any]:
        """Write ``plan`` into the ledger atomically (see the module docstring); returns the
        project row.

        Raises:
            ProjectError: 409 the project already has a plan; 503 no ledger.
        """
        project = self.db.project(pid)
        if project is None:
            raise ProjectError(404, "not_found", f"no core-loop project {pid}")
        if project["task_id"] is not None:
            raise ProjectError(409, "already_planned", f"project {pid} already has a plan")
        tasks = self.tasks()
        if tasks is None:
            raise ProjectError(503, "no_ledger", "the task ledger is not available")
        settings: Settings = self.settings()
        # both empty: no exec, the daemon's default executor runs the tasks
        exec_spec = settings.task_exec or (f"elowen:{settings.planner_model}" if settings.planner_model else None)
        labels = [f"mission:{project['mission_id']}"] if project["mission_id"] else []
        owner = project["user_id"]
        with self.ctx.store.transaction():
            parent = tasks.create(
                title=plan.title,
                project_id=project["ledger_project"],
                description=f"Project planned by the core loop from: {project['request']}",
                priority=min((PRIORITIES[t.priority] for t in plan.tasks), default=2),
                labels=[LABEL_PROJECT, *labels],
                owner_id=owner,
            )
            tasks.update(parent["id"], {"state": "blocked", "resume_note": "the project's parent task: closed by the core loop when its run ends"})
            ids: list[int] = []
            for position, item in enumerate(plan.tasks, 1):
                child = tasks.create(
                    title=item.title,
                    project_id=project["ledger_project"],
                    description=describe(item.description, item.acceptance),
                    priority=PRIORITIES[item.priority],
                    parent_id=parent["id"],
                    labels=[LABEL_TASK],  # not in the mission itself: the executor gates each dispatch
                    exec=exec_spec,
                    owner_id=owner,
                )
                tasks.update(child["id"], {"state": "blocked", "resume_note": HELD_NOTE})
                self.db.add_task(child["id"], pid, position, item.acceptance, item.priority)
                ids.append(child["id"])
            for item, task_id in zip(plan.tasks, ids, strict=True):  # edges may point forward in the plan
                if item.depends_on:
                    tasks.update(task_id, {"deps": [ids[d - 1] for d in item.depends_on]})
            state = "awaiting_approval" if settings.plan_approval else "approved"
            row = self.db.update_project(pid, task_id=parent["id"], title=plan.title, state=state, plan_log=list(plan.log), planner_tokens=planner_tokens)
        if project["mission_id"]:
            self._join_mission(tasks.get(parent["id"]))
        for line in plan.log:
            log.info("core-loop project %s: %s", pid, line)
        self.ctx.publish(
            "core_loop.planned",
            {"project": pid, "task_id": parent["id"], "tasks": ids, "state": state, "log": list(plan.log)},
            project_id=project["ledger_project"],
        )
        return row

    def _join_mission(self, parent: dict[str, Any]) -> None:
        """Put the parent task in its mission (the ``mission:<id>`` label joins it when the
        missions gate first sees it), so dispatch decisions about the project are judged at
        the mission's level."""
        try:
            missions: MissionsService = self.ctx.service(MissionsService)
        except LookupError:
            log.info("the missions service is off: task %s not joined to its mission", parent["id"])
            return
        missions.may_dispatch(parent)

    # -- approval and edits -----------------------------------------------------------------

    def approve(self, pid: int, user_id: int | None, *, admin: bool = False) -> dict[str, Any]:
        """Approve a plan waiting for approval (the asker or an admin).

        Raises:
            ProjectError: 404 unknown / not the user's, 409 not waiting for approval.
        """
        project = self._own(pid, user_id, admin)
        if project["state"] != "awaiting_approval":
            raise ProjectError(409, "not_awaiting_approval", f"project {pid} is {project['state']}, not awaiting approval")
        row = self.db.update_project(pid, state="approved")
        self.ctx.publish("core_loop.approved", {"project": pid, "by": user_id}, project_id=project["ledger_project"])
        return row

    def _own(self, pid: int, user_id: int | None, admin: bool) -> dict[str, Any]:
        project = self.db.project(pid)
        if project is None or (not admin and project["user_id"] != user_id):
            raise ProjectError(404, "not_found", f"no core-loop project {pid}")
        return project

    def edit_task(self, task_id: int, changes: Mapping[str, Any], user_id: int | None, *, admin: bool = False) -> dict[str, Any]:
        """Edit a planned task before it ran: ``title``, ``description``, ``acceptance``
        (list of strings), ``priority`` (``critical|high|medium|low``), ``depends_on`` (plan
        positions). Returns the task view (see :meth:`tree`).

        Raises:
            ProjectError: 404 unknown, 409 the task already ran, 422 a bad field or value.
        """
        planned = self.db.task(task_id)
        if planned is None:
            raise ProjectError(404, "not_found", f"task {task_id} is not a core-loop task")
        project = self._own(planned["project"], user_id, admin)
        tasks = self.tasks()
        if tasks is None:
            raise ProjectError(503, "no_ledger", "the task ledger is not available")
        current = tasks.get(task_id)
        if current["state"] != "blocked" or planned["dropped"]:
            raise ProjectError(409, "already_running", f"task {task_id} is {current['state']}: only a held task can be edited")
        unknown = set(changes) - {"title", "description", "acceptance", "priority", "depends_on"}
        if unknown:
            raise ProjectError(422, "unknown_field", f"unknown fields: {sorted(unknown)}")
        ledger: dict[str, Any] = {}
        acceptance = planned["acceptance"]
        if "acceptance" in changes:
            value = changes["acceptance"]
            if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
                raise ProjectError(422, "bad_acceptance", "acceptance must be a list of non-empty strings")
            acceptance = [c.strip() for c in value]
        if "title" in changes:
            if not isinstance(changes["title"], str) or not changes["title"].strip():
                raise ProjectError(422, "bad_title", "title must be a non-empty string")
            ledger["title"] = changes["title"].strip()
        description = changes.get("description")
        if description is not None and not isinstance(description, str):
            raise ProjectError(422, "bad_description", "description must be a string")
        if "acceptance" in changes or description is not None:
            base = description if description is not None else current["description"].split("\n\nAcceptance criteria:\n", 1)[0]
            ledger["description"] = describe(base, acceptance)
        priority = changes.get("priority")
        if priority is not None:
            if priority not in PRIORITIES:
                raise ProjectError(422, "bad_priority", f"priority must be one of {', '.join(PRIORITIES)}")
            ledger["priority"] = PRIORITIES[priority]
        if "depends_on" in changes:
            positions = {t["position"]: t["task_id"] for t in self.db.tasks(project["id"])}
            value = changes["depends_on"]
            if not isinstance(value, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p in positions for p in value):
                raise ProjectError(422, "bad_dependency", f"depends_on must list plan positions among {sorted(positions)}")
            if planned["position"] in value:
                raise ProjectError(422, "bad_dependency", "a task cannot depend on itself")
            ledger["deps"] = [positions[p] for p in value]
        with self.ctx.store.transaction():
            if ledger:
                try:
                    tasks.update(task_id, ledger)
                except ElowenError as exc:  # a dependency cycle (TaskConflict)
                    raise ProjectError(422, "bad_dependency", str(exc)) from None
            self.db.update_task(task_id, acceptance=acceptance if "acceptance" in changes else None, priority=priority)
        return self.task_view(tasks.get(task_id), self.db.task(task_id))

    # -- views ------------------------------------------------------------------------------

    @staticmethod
    def task_view(task: Mapping[str, Any], planned: Mapping[str, Any] | None) -> dict[str, Any]:
        view = {k: task.get(k) for k in ("id", "title", "state", "priority", "deps", "attempts", "summary", "evidence", "exec", "resume_note")}
        if planned is not None:
            view.update(
                position=planned["position"],
                acceptance=list(planned["acceptance"]),
                plan_priority=planned["priority"],
                dropped=planned["dropped"],
                drop_reason=planned["drop_reason"],
            )
        return view

    def tree(self, pid: int, user_id: int | None = None, *, admin: bool = True) -> dict[str, Any]:
        """The project and its plan: ``{"project": row, "parent": task view | None,
        "tasks": [task view, …] in plan order, "runs": [run rows]}``.

        Raises:
            ProjectError: 404 unknown (or not the user's).
        """
        project = self._own(pid, user_id, admin)
        tasks = self.tasks()
        parent = None
        children: list[dict[str, Any]] = []
        if tasks is not None and project["task_id"] is not None:
            if tasks.exists(project["task_id"]) is not None:
                parent = self.task_view(tasks.get(project["task_id"]), None)
            for planned in self.db.tasks(pid):
                if tasks.exists(planned["task_id"]) is not None:  # a task deleted from the ledger is left out
                    children.append(self.task_view(tasks.get(planned["task_id"]), planned))
        runs = self.db.runs(pid)
        return {"project": project, "parent": parent, "tasks": children, "runs": runs}

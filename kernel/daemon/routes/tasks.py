"""``/tasks``: create, list, read, change, close, cancel, delete, progress.

Members see the tasks of their projects (others are 404, as if absent); acting on a task
(change, delete, cancel, close, progress) follows the one rule, :meth:`Principal.may_act`: its
owner or an admin (other members of the project get 403). Agent tokens only read, close and
report progress on their own task (others are 403).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from elowen_sdk.services.executors import ExecError, ExecNotAllowed, ExecutorsUnavailable

from ..api import Api, decode_cursor, paginate
from ..auth import Principal
from ..errors import Conflict, Forbidden, NotFound, Unprocessable
from ..models import Deleted, ProgressOut, TaskClose, TaskCounts, TaskCreate, TaskFilter, TaskOut, TaskPatch, TaskProgress, TaskQuery, list_of
from ..services.tasks import TaskConflict, TaskNotFound
from ..state import DaemonState, current

api = Api("tasks")

NOT_STARTED_NOTE = "Created without starting it: reopen it (Reopen on the board, or `elowen task reopen {id}`) when an agent should begin."
"""The resume note of a task created with ``start: false``."""


@contextmanager
def _service_errors() -> Iterator[None]:
    try:
        yield
    except TaskNotFound as exc:
        raise NotFound(str(exc)) from None
    except TaskConflict as exc:
        raise Conflict(str(exc), code="task_conflict") from None
    except ExecError:
        raise  # answered with its own status and code by its handler
    except ValueError as exc:
        raise Unprocessable(str(exc)) from None


def _task_for(state: DaemonState, me: Principal, task_id: int) -> dict[str, Any]:
    """The task's id/project/state if ``me`` may act on it; 403 for another task of an agent,
    404 when absent or in a project the member cannot see."""
    if me.scope == "agent" and task_id != me.task_id:
        raise Forbidden(f"an agent token may only act on its own task ({me.task_id})", code="agent_scope")
    row = state.tasks.exists(task_id)
    if row is None or (me.scope == "full" and not state.access.can_see(me, row["project_id"])):
        raise NotFound(f"task {task_id} not found")
    return row


def _acting_on(state: DaemonState, me: Principal, task_id: int) -> dict[str, Any]:
    """:func:`_task_for`, then the acting rule: an agent token on its own task, else the
    task's owner or an admin (403 ``not_owner`` for another member who sees it)."""
    row = _task_for(state, me, task_id)
    if me.scope == "full" and not me.may_act(row["owner_id"]):
        raise Forbidden(f"only the task's owner or an admin may act on task {task_id}", code="not_owner")
    return row


def _check_refs(state: DaemonState, me: Principal, ids: Iterable[int], what: str) -> None:
    for ref in ids:
        row = state.tasks.exists(ref)
        if row is None or not state.access.can_see(me, row["project_id"]):
            raise NotFound(f"{what} task {ref} not found")


def _check_exec(state: DaemonState, me: Principal, spec: str | None) -> None:
    """Ask the ``executors`` service whether ``spec`` may run for ``me``.

    An explicit spec must resolve to an enabled executor now (422 ``invalid_exec`` /
    ``unknown_executor`` / ``executor_unavailable``, 403 ``exec_not_allowed``). A task without a
    spec is accepted while the fallback does not resolve (its provider plugin disabled…), and
    any task while the agents plugin (the registry) is off: it waits, its record's
    ``exec_error`` says why, and it is checked again when it can run.
    """
    try:
        state.check_exec(spec, personal=None if me.is_admin else me.allowed_execs)
    except ExecutorsUnavailable:
        return  # no registry now: the task is kept and waits
    except ExecNotAllowed:
        raise
    except ExecError:
        if spec is not None:
            raise


@api.route("GET", "/tasks", summary="List tasks (state may be 'ready')", query=TaskQuery, response=list_of(TaskOut))
async def list_tasks(me: Principal, query: TaskQuery) -> dict[str, Any]:
    state = current()
    visible = None if me.is_admin else state.access.projects(me.user_id)
    rows = state.tasks.list_tasks(
        state=query.state,
        project_id=query.project,
        label=query.label,
        visible_projects=visible,
        after=decode_cursor(query.cursor),
        limit=query.limit + 1,
        descending=query.order == "desc",
        **_filters(query),
    )
    return paginate(rows, query.limit)


def _filters(query: TaskFilter) -> dict[str, Any]:
    return {"priority": query.priority, "owner_id": query.owner, "mission": query.mission, "q": query.q}


@api.route("GET", "/tasks/counts", summary="How many tasks are in each state (same filters as GET /tasks)", query=TaskFilter, response=TaskCounts)
async def count_tasks(me: Principal, query: TaskFilter) -> dict[str, Any]:
    state = current()
    visible = None if me.is_admin else state.access.projects(me.user_id)
    counts = state.tasks.counts(project_id=query.project, label=query.label, visible_projects=visible, **_filters(query))
    return {"counts": counts, "total": sum(counts.values())}


@api.route("POST", "/tasks", summary="Create a task", body=TaskCreate, response=TaskOut, status=201, errors=(404, 409))
async def create_task(me: Principal, body: TaskCreate) -> dict[str, Any]:
    state = current()
    if state.projects.get(body.project_id) is None or not state.access.can_see(me, body.project_id):
        raise NotFound(f"project {body.project_id} not found")
    if body.parent_id is not None:
        _check_refs(state, me, [body.parent_id], "parent")
    _check_refs(state, me, body.deps, "dependency")
    _check_exec(state, me, body.exec)
    with _service_errors(), state.kernel.store.transaction():  # change, event, audit row: one transaction
        task = state.tasks.create(
            title=body.title,
            project_id=body.project_id,
            description=body.description,
            priority=body.priority,
            parent_id=body.parent_id,
            deps=body.deps,
            labels=body.labels,
            exec=body.exec,
            owner_id=me.user_id,
        )
        if not body.start:  # in the same transaction: no scheduler sees it open
            task = state.tasks.update(task["id"], {"state": "blocked", "resume_note": NOT_STARTED_NOTE.format(id=task["id"])})
        state.kernel.store.audit(me.actor, "task.create", f"task:{task['id']}")
    return task


@api.route("GET", "/tasks/<id:task_id>", summary="One task (agent tokens: their own)", auth="agent", response=TaskOut, errors=(404,))
async def get_task(me: Principal, task_id: int) -> dict[str, Any]:
    state = current()
    _task_for(state, me, task_id)
    with _service_errors():
        return state.tasks.get(task_id)


@api.route("PATCH", "/tasks/<id:task_id>", summary="Change a task (state among allowed transitions)", body=TaskPatch, response=TaskOut, errors=(404, 409))
async def patch_task(me: Principal, task_id: int, body: TaskPatch) -> dict[str, Any]:
    state = current()
    row = _acting_on(state, me, task_id)
    changes = body.model_dump(exclude_unset=True)
    for key in ("title", "description", "priority", "labels", "deps", "state"):
        if key in changes and changes[key] is None:
            del changes[key]
    if changes.get("state") == "open" and row["state"] == "in_progress":
        # its agent is still at work: reopening would start a second one beside it
        raise Conflict(f"task {task_id} is in progress: cancel it first, then reopen it", code="task_conflict")
    if "deps" in changes:
        _check_refs(state, me, changes["deps"], "dependency")
    if "exec" in changes:
        _check_exec(state, me, changes["exec"])
    with _service_errors(), state.kernel.store.transaction():  # change, event, audit row: one transaction
        task = state.tasks.update(task_id, changes)
        detail: dict[str, Any] = {"fields": sorted(changes)}
        if "state" in changes:
            detail.update({"from": row["state"], "to": task["state"]})
        state.kernel.store.audit(me.actor, "task.update", f"task:{task_id}", "ok", detail)
    return task


@api.route("DELETE", "/tasks/<id:task_id>", summary="Delete a task", response=Deleted, errors=(404,))
async def delete_task(me: Principal, task_id: int) -> dict[str, Any]:
    state = current()
    _acting_on(state, me, task_id)
    with _service_errors(), state.kernel.store.transaction():  # change, event, audit row: one transaction
        state.tasks.delete(task_id)
        state.kernel.store.audit(me.actor, "task.delete", f"task:{task_id}")
    return {"id": task_id, "deleted": True}


@api.route(
    "POST", "/tasks/<id:task_id>/close", summary="Close a task with a summary and evidence", auth="agent", body=TaskClose, response=TaskOut, errors=(404, 409)
)
async def close_task(me: Principal, task_id: int, body: TaskClose) -> dict[str, Any]:
    state = current()
    _acting_on(state, me, task_id)
    with _service_errors(), state.kernel.store.transaction():  # change, event, audit row: one transaction
        task = state.tasks.close(task_id, body.summary, body.evidence)
        state.kernel.store.audit(me.actor, "task.close", f"task:{task_id}")
    return task


@api.route("POST", "/tasks/<id:task_id>/cancel", summary="Cancel a task", response=TaskOut, errors=(404, 409))
async def cancel_task(me: Principal, task_id: int) -> dict[str, Any]:
    state = current()
    _acting_on(state, me, task_id)
    with _service_errors(), state.kernel.store.transaction():  # change, event, audit row: one transaction
        task = state.tasks.cancel(task_id)
        state.kernel.store.audit(me.actor, "task.cancel", f"task:{task_id}")
    return task


@api.route(
    "POST",
    "/tasks/<id:task_id>/progress",
    summary="Report progress on a task",
    auth="agent",
    body=TaskProgress,
    response=ProgressOut,
    status=201,
    errors=(404,),
)
async def task_progress(me: Principal, task_id: int, body: TaskProgress) -> dict[str, Any]:
    state = current()
    _acting_on(state, me, task_id)
    with _service_errors():
        return state.tasks.progress(task_id, body.text, author=me.actor)

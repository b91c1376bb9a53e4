"""``/projects``: folders on disk that tasks belong to."""

from __future__ import annotations

from typing import Any

from ..api import Api, Page, decode_cursor, paginate
from ..auth import Principal
from ..errors import Conflict, NotFound, Unprocessable
from ..models import ProjectCreate, ProjectDeleted, ProjectDeleteQuery, ProjectOut, list_of
from ..services.projects import ProjectBusy, ProjectError, ProjectExists, ProjectNotFound
from ..services.tasks import TaskNotFound
from ..state import current

api = Api("projects")


@api.route("GET", "/projects", summary="List the projects the caller can see", query=Page, response=list_of(ProjectOut))
async def list_projects(me: Principal, query: Page) -> dict[str, Any]:
    state = current()
    visible = None if me.is_admin else state.access.projects(me.user_id)
    rows = state.projects.list(visible=visible, after=decode_cursor(query.cursor), limit=query.limit + 1)
    return paginate(rows, query.limit)


@api.route(
    "POST", "/projects", summary="Create a project for an existing folder", auth="admin", body=ProjectCreate, response=ProjectOut, status=201, errors=(409,)
)
async def create_project(me: Principal, body: ProjectCreate) -> dict[str, Any]:
    state = current()
    store = state.kernel.store
    try:
        with store.transaction():  # the project, its event and its audit row commit together
            project = state.projects.create(body.name, body.path)
            store.audit(me.actor, "project.create", f"project:{project['id']}", "ok", {"path": project["path"]})
    except ProjectExists as exc:
        raise Conflict(str(exc)) from None
    except ProjectError as exc:
        raise Unprocessable(str(exc), code="invalid_path") from None
    return project


@api.route("GET", "/projects/<id:project_id>", summary="One project", response=ProjectOut, errors=(404,))
async def get_project(me: Principal, project_id: int) -> dict[str, Any]:
    state = current()
    project = state.projects.get(project_id)
    if project is None or not state.access.can_see(me, project_id):
        raise NotFound(f"project {project_id} not found")
    return project


@api.route(
    "DELETE",
    "/projects/<id:project_id>",
    summary="Delete a project and its tasks (force: even unfinished ones)",
    auth="admin",
    query=ProjectDeleteQuery,
    response=ProjectDeleted,
    errors=(404, 409),
)
async def delete_project(me: Principal, project_id: int, query: ProjectDeleteQuery) -> dict[str, Any]:
    state = current()

    def delete_task(task_id: int) -> None:
        try:
            state.tasks.delete(task_id)
        except TaskNotFound:
            pass  # deleted meanwhile

    store = state.kernel.store
    try:
        # one transaction: the tasks, the project, their events and the audit row go together
        # or not at all (the events fan out after the commit)
        with store.transaction():
            result = state.projects.delete(project_id, force=query.force, delete_task=delete_task)
            store.audit(me.actor, "project.delete", f"project:{project_id}", "ok", {"force": query.force, "tasks_deleted": result["tasks_deleted"]})
    except ProjectNotFound as exc:
        raise NotFound(str(exc)) from None
    except ProjectBusy as exc:
        raise Conflict(str(exc), code="project_busy") from None
    finally:
        state.access.invalidate()
    return result

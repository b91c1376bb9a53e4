"""Projects: named folders on disk that tasks belong to."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from elowen.core.events import EventBus
from elowen.core.store import Store, utc_iso
from elowen_sdk import ElowenError

__all__ = [
    "NEXT_PROJECT_ID",
    "OPEN_STATES",
    "ProjectBusy",
    "ProjectError",
    "ProjectExists",
    "ProjectNotFound",
    "ProjectService",
    "check_folder_allowed",
    "resolve_folder",
]

#: Task states that make a project "busy" (its deletion needs ``force``).
OPEN_STATES = ("open", "in_progress", "blocked")


NEXT_PROJECT_ID = "(SELECT max(coalesce((SELECT max(id) FROM projects), 0), coalesce((SELECT n FROM id_highwater WHERE name = 'projects'), 0)) + 1)"
"""SQL for a new project's id: above every id in use and every id ever deleted
(``id_highwater``), so what plugins keep under a deleted project's id (a mission, memories
scoped to it) never passes to a new project."""


class ProjectError(ElowenError, ValueError):
    """The project's path is not an existing folder, or a folder Elowen refuses."""


class ProjectExists(ProjectError):
    """The name or folder is already a project."""


class ProjectNotFound(ElowenError, LookupError):
    """No such project."""


class ProjectBusy(ElowenError):
    """The project still has open, in-progress or blocked tasks."""


def check_folder_allowed(folder: Path, home: Path | None) -> None:
    """Refuse folders an agent must never be let loose in: the filesystem root, the user's
    home folder itself, and Elowen's home (``ELOWEN_HOME``) — the folder itself, anything
    inside it, and any folder that contains it. ``folder`` and ``home`` are resolved paths.

    Raises:
        ProjectError: with the reason.
    """
    if folder == Path(folder.anchor):
        raise ProjectError(f"project path {str(folder)!r} is the filesystem root; choose the project's own folder")
    try:
        user_home = Path.home().resolve()
    except (OSError, RuntimeError, KeyError):
        user_home = None
    if user_home is not None and folder == user_home:
        raise ProjectError(f"project path {str(folder)!r} is your home folder; choose the project's own folder")
    if home is not None and (folder == home or home in folder.parents or folder in home.parents):
        raise ProjectError(f"project path {str(folder)!r} holds or is inside Elowen's home ({home}); choose the project's own folder")


def resolve_folder(path: str) -> Path:
    """``path`` (absolute, ``~`` expanded) resolved through symlinks.

    Raises:
        ProjectError: relative, not an existing folder, or not a valid path.
    """
    try:
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            raise ProjectError(f"project path must be absolute, got {path!r}")
        resolved = candidate.resolve(strict=True)
    except (OSError, ValueError, RuntimeError) as exc:
        if isinstance(exc, ProjectError):
            raise
        raise ProjectError(f"project path {path!r} is not an existing folder") from None
    if not resolved.is_dir():
        raise ProjectError(f"project path {path!r} is not a folder")
    return resolved


class ProjectService:
    """Create and read projects; publishes ``project.created`` (with the project's id)."""

    def __init__(self, store: Store, events: EventBus, home: Path | None = None) -> None:
        self.store = store
        self.events = events
        self.home = Path(home).resolve() if home is not None else None

    def get(self, project_id: int) -> dict[str, Any] | None:
        """``{id, name, path, created_at}`` or ``None``."""
        return self.store.query_one("SELECT id, name, path, created_at FROM projects WHERE id = ?", (project_id,))

    def list(self, *, visible: Collection[int] | None = None, after: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Projects by ascending id (only ids in ``visible`` unless it is ``None``)."""
        where, params = ["id > ?"], [after or 0]
        if visible is not None:
            ids = sorted(visible)
            if not ids:
                return []
            where.append(f"id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        params.append(limit)
        return self.store.query(f"SELECT id, name, path, created_at FROM projects WHERE {' AND '.join(where)} ORDER BY id LIMIT ?", params)

    def create(self, name: str, path: str) -> dict[str, Any]:
        """Create a project for an existing folder (stored resolved).

        Raises:
            ProjectError: the folder does not exist, or is refused by
                :func:`check_folder_allowed`.
            ProjectExists: the name or the folder is taken.
        """
        resolved = resolve_folder(path)
        check_folder_allowed(resolved, self.home)
        folder = str(resolved)
        with self.store.transaction():
            clash = self.store.query_one("SELECT name, path FROM projects WHERE name = ? OR path = ?", (name, folder))
            if clash is not None:
                what = "name" if clash["name"] == name else "folder"
                raise ProjectExists(f"a project with that {what} already exists ({clash['name']}: {clash['path']})")
            project_id = self.store.execute(f"INSERT INTO projects (id, name, path, created_at) VALUES ({NEXT_PROJECT_ID}, ?, ?, ?)", (name, folder, utc_iso()))
        project = self.get(project_id)
        assert project is not None
        self.events.publish("project.created", {"id": project_id, "project": project}, project_id)
        return project

    def open_tasks(self, project_id: int) -> int:
        """How many of the project's tasks are open, in progress or blocked."""
        marks = ",".join("?" * len(OPEN_STATES))
        row = self.store.query_one(f"SELECT count(*) AS n FROM tasks WHERE project_id = ? AND state IN ({marks})", (project_id, *OPEN_STATES))
        return int(row["n"]) if row else 0

    def task_ids(self, project_id: int) -> list[int]:
        """Every task id of the project."""
        return [r["id"] for r in self.store.query("SELECT id FROM tasks WHERE project_id = ? ORDER BY id", (project_id,))]

    def delete(self, project_id: int, *, force: bool = False, delete_task: Callable[[int], None]) -> dict[str, Any]:
        """Delete a project and every task in it; memberships go with it. Publishes
        ``project.deleted`` ``{"id", "tasks_deleted"}``.

        ``delete_task(task_id)`` deletes one task (the task service's ``delete``, which
        publishes ``task.deleted`` and drops the task's agent tokens). Without ``force`` a
        project with open, in-progress or blocked tasks is refused.

        Returns:
            ``{"id": project_id, "deleted": True, "tasks_deleted": N}``.

        Raises:
            ProjectNotFound: no such project.
            ProjectBusy: open/in-progress/blocked tasks and not ``force``, or a task was added
                while deleting.
        """
        if self.get(project_id) is None:
            raise ProjectNotFound(f"project {project_id} not found")
        busy = self.open_tasks(project_id)
        if busy and not force:
            raise ProjectBusy(f"project {project_id} has {busy} open, in-progress or blocked task(s); close or cancel them, or delete anyway with force")
        ids = self.task_ids(project_id)
        for task_id in ids:
            delete_task(task_id)
        with self.store.transaction():
            if self.task_ids(project_id):
                raise ProjectBusy(f"a task was added to project {project_id} while deleting it; try again")
            self.store.execute("DELETE FROM projects WHERE id = ?", (project_id,))
        self.events.publish("project.deleted", {"id": project_id, "tasks_deleted": len(ids)}, project_id)
        return {"id": project_id, "deleted": True, "tasks_deleted": len(ids)}

"""Projects: named folders on disk that tasks belong to."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from elowen.core.events import EventBus
from elowen.core.store import Store, utc_iso

__all__ = ["ProjectError", "ProjectExists", "ProjectService", "resolve_folder"]


class ProjectError(ValueError):
    """The project's path is not an existing folder."""


class ProjectExists(ProjectError):
    """The name or folder is already a project."""


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

    def __init__(self, store: Store, events: EventBus) -> None:
        self.store = store
        self.events = events

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
        return self.store.query(
            f"SELECT id, name, path, created_at FROM projects WHERE {' AND '.join(where)} ORDER BY id LIMIT ?", params
        )

    def create(self, name: str, path: str) -> dict[str, Any]:
        """Create a project for an existing folder (stored resolved).

        Raises:
            ProjectError: the folder does not exist.
            ProjectExists: the name or the folder is taken.
        """
        folder = str(resolve_folder(path))
        with self.store.transaction():
            clash = self.store.query_one("SELECT name, path FROM projects WHERE name = ? OR path = ?", (name, folder))
            if clash is not None:
                what = "name" if clash["name"] == name else "folder"
                raise ProjectExists(f"a project with that {what} already exists ({clash['name']}: {clash['path']})")
            project_id = self.store.execute(
                "INSERT INTO projects (name, path, created_at) VALUES (?, ?, ?)", (name, folder, utc_iso())
            )
        project = self.get(project_id)
        assert project is not None
        self.events.publish("project.created", {"id": project_id, "project": project}, project_id)
        return project

"""The ``tasks`` service: the task ledger (a host service offered by the daemon).

A consumer declares ``service:tasks`` and asks ``tasks = ctx.service(TasksService)``. Every
method is synchronous (it runs on the trio thread, against the kernel store) and publishes its
event after its transaction committed: ``task.created``, ``task.updated``, ``task.closed``,
``task.cancelled`` (data ``{"id": N, "task": record, "changed": [field, …]}``).

A *task record* is a dict::

    {"id": int, "title": str, "description": str, "project_id": int,
     "state": "open" | "in_progress" | "blocked" | "closed" | "cancelled",
     "priority": int (0 highest … 4), "parent_id": int | None, "exec": str | None,
     "exec_resolved": {"provider": str, "model": str} | None,
     "exec_error": {"code": str, "message": str} | None,   # why exec does not resolve now
     "owner_id": int | None,
     "attempts": int, "resume_note": str | None, "summary": str | None, "evidence": [str],
     "deps": [int], "labels": [str], "ready": bool,
     "created_at": str, "updated_at": str, "closed_at": str | None}   # UTC ISO 8601

State transitions::

    open        -> in_progress | blocked | closed | cancelled
    in_progress -> open | blocked | closed | cancelled
    blocked     -> open | in_progress | closed | cancelled
    closed      -> open            (reopen)
    cancelled   -> open            (reopen)

A task is *ready* when it is ``open`` and every task it depends on is ``closed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ..contracts import service_contract
from ..errors import TaskConflict, TaskError, TaskNotFound

__all__ = ["TASK_STATES", "TaskConflict", "TaskError", "TaskNotFound", "TasksService"]

TASK_STATES = ("open", "in_progress", "blocked", "closed", "cancelled")
"""Every task state, in lifecycle order."""


@service_contract("tasks")
class TasksService(Protocol):
    """The task ledger (service ``"tasks"``)."""

    def get(self, task_id: int) -> dict[str, Any]:
        """The task record.

        Raises:
            TaskNotFound: no such task.
        """
        ...

    def exists(self, task_id: int) -> dict[str, Any] | None:
        """``{"id", "project_id", "state", "owner_id"}`` of a task (one cheap query), or ``None``."""
        ...

    def count(self, task_ids: Iterable[int], *, state: str | None = None) -> int:
        """How many of the tasks ``task_ids`` exist (and are in ``state``, one of
        :data:`TASK_STATES`, when given); ids of no task count 0.

        Raises:
            ValueError: an unknown ``state``.
        """
        ...

    def project(self, project_id: int) -> dict[str, Any] | None:
        """``{"id", "name", "path"}`` of a project (``path``: its folder, absolute), or ``None``."""
        ...

    def projects(self) -> list[dict[str, Any]]:
        """Every project as ``{"id", "name", "path"}``, by ascending id."""
        ...

    def project_path(self, task_id: int) -> str | None:
        """The folder (absolute path) of the task's project — the checkout its agent works
        in — or ``None`` when there is no such task."""
        ...

    def list_tasks(
        self,
        *,
        state: str | None = None,
        project_id: int | None = None,
        label: str | None = None,
        after: int | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Task records by ascending id, after id ``after``, at most ``limit``; ``state`` may
        also be ``"ready"``."""
        ...

    def ready(self, *, limit: int = 500) -> list[dict[str, Any]]:
        """Ready task records, highest priority (0) first, then oldest; at most ``limit``."""
        ...

    def progress_log(self, task_id: int, *, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` progress notes of a task, oldest first:
        ``{"id", "task_id", "author", "text", "ts"}``."""
        ...

    def create(
        self,
        *,
        title: str,
        project_id: int,
        description: str = "",
        priority: int = 2,
        parent_id: int | None = None,
        deps: Iterable[int] = (),
        labels: Iterable[str] = (),
        exec: str | None = None,
        owner_id: int | None = None,
    ) -> dict[str, Any]:
        """Create an ``open`` task; returns its record (publishes ``task.created``).

        Raises:
            TaskNotFound: the project, the parent or a dependency does not exist.
            ElowenError: ``exec`` is not a valid executor spec (an ``ExecSpecError``).
            ValueError: priority outside 0–4 or an empty title.
        """
        ...

    def update(self, task_id: int, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` (keys among ``title``, ``description``, ``priority``, ``labels``,
        ``deps``, ``exec``, ``state``, ``resume_note``, ``attempts``); returns the new record
        (publishes ``task.updated``, or ``task.closed`` / ``task.cancelled``).

        Raises:
            TaskNotFound: no such task or dependency.
            TaskConflict: a transition not allowed, or a dependency cycle.
            ValueError: an unknown field or a bad value.
        """
        ...

    def close(self, task_id: int, summary: str, evidence: Sequence[str] = ()) -> dict[str, Any]:
        """Close a task with a summary and evidence (strings); returns its record (publishes
        ``task.closed``).

        Raises:
            TaskNotFound: no such task.
            TaskConflict: already closed or cancelled.
        """
        ...

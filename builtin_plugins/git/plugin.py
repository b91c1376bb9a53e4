"""Plugin glue of ``git``: one :class:`~.worktrees.Worktrees` per enable, offered as service
``git`` (:class:`elowen_sdk.services.GitService`); the agents plugin asks it for each spawn's
working folder. Disabling the plugin stops nothing in flight (git commands are short and
bounded); agents spawned afterwards work in the project folder."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from elowen_sdk import Service, hookimpl
from elowen_sdk.services.tasks import TasksService

from .api import routes
from .worktrees import Worktrees

__all__ = ["register_routes", "register_services", "service_for"]

_runtime: dict[str, tuple[Any, Worktrees]] = {}  # plugin name → (its context, its service)


def worktree_root(ctx: Any) -> Path:
    """Where task worktrees go: the ``root`` config value, else
    ``${XDG_STATE_HOME:-~/.local/state}/elowen/worktrees/<8 hex of Elowen's home>``. Never inside
    Elowen's home: an agent's edits there would all count as touching Elowen's own files (the
    overseer's destructive rule) and the sandbox hides that folder."""
    configured = str(ctx.config.get("root") or "").strip()
    if configured:
        return Path(configured).expanduser()
    home = str(Path(ctx.data_dir).resolve().parents[1])
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "elowen" / "worktrees" / hashlib.sha256(home.encode()).hexdigest()[:8]


def service_for(ctx: Any) -> Worktrees:
    """The :class:`Worktrees` of this enable (made on first use)."""
    entry = _runtime.get(ctx.name)
    if entry is None or entry[0] is not ctx:

        def task_info(task_id: int) -> dict[str, Any] | None:
            tasks = ctx.service(TasksService)
            try:
                task = tasks.get(int(task_id))
            except LookupError:
                return None
            project = tasks.project(int(task["project_id"])) or {}
            return {"title": task.get("title"), "project_id": task["project_id"], "project_name": project.get("name")}

        svc = Worktrees(ctx.store, worktree_root(ctx), lambda: ctx.config, task_info, lambda t, d, project: ctx.publish(t, d, project_id=project))
        entry = (ctx, svc)
        _runtime[ctx.name] = entry
    return entry[1]


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    register(Service("git", service_for(ctx)))


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    for route in routes(lambda: service_for(ctx), lambda: ctx.service(TasksService)):
        register(route)


@hookimpl
def on_unload(ctx: Any) -> None:
    _runtime.pop(ctx.name, None)

"""The task tool: the brain starts a coding-agent task (Claude Code, OpenCode, Codex, Kilo,
or a brain worker with ``elowen:<provider>/<model>``) through the daemon's task service
(``ctx.service(TasksService)``); the agents plugin picks it up."""

from __future__ import annotations

import json
from typing import Any

from elowen_sdk import CapabilityError, ElowenError, Tool
from elowen_sdk.services import ExecutorsService, UsersService
from elowen_sdk.services.executors import ExecError, ExecNotAllowed

from .env import ToolError, require_env

__all__ = ["check_exec", "create", "tools"]


async def create(title: str, description: str = "", project: str | int | None = None, exec: str | None = None, priority: int = 2) -> dict[str, Any]:
    """Create an ``open`` task owned by the user. ``project``: a project id or name the user may
    use (default: the conversation's project, else the user's only/first project).
    Returns ``{"id", "title", "project_id", "state", "exec", "exec_resolved"}``."""
    env = require_env()
    if not env.projects:
        raise ToolError("you have no projects to create a task in")
    chosen = None
    if project is None or project == "":
        chosen = next((p for p in env.projects if env.session.conv.get("project_id") == p["id"]), env.projects[0])
    else:
        for p in env.projects:
            if str(p["id"]) == str(project) or p["name"] == str(project):
                chosen = p
                break
        if chosen is None:
            names = ", ".join(p["name"] for p in env.projects)
            raise ToolError(f"unknown project {project!r}; yours: {names}")
    check_exec(env.service.ctx, env.user_id, exec or None)
    tasks = env.service.tasks()
    try:
        task = tasks.create(title=title, description=description, project_id=int(chosen["id"]), exec=exec or None, priority=int(priority), owner_id=env.user_id)
    except (ElowenError, ValueError, LookupError) as exc:
        raise ToolError(f"cannot create the task: {exc}") from None
    return {k: task.get(k) for k in ("id", "title", "project_id", "state", "exec", "exec_resolved")}


def check_exec(ctx: Any, user_id: int | None, spec: str | None) -> None:
    """The REST API's exec checks for a task the brain creates for ``user_id``: the spec must
    resolve now (a task without one is kept while the fallback does not), and the daemon's
    ``[execs] allowed`` list and — for a member — the user's own ``allowed_execs`` must allow
    it. Without the ``executors`` service (the agents plugin is off) the task is kept and waits,
    as through the API.

    Raises:
        ToolError: the spec is invalid, unknown, unavailable or not allowed for the user.
    """
    try:
        executors = ctx.service(ExecutorsService)
    except (LookupError, CapabilityError):
        return
    personal = None
    if user_id is not None:
        try:
            user = ctx.service(UsersService).user(int(user_id))
        except (LookupError, CapabilityError):
            user = None
        if user is None:
            raise ToolError("cannot create the task: its owner is unknown")
        if user.get("role") != "admin":
            execs = user.get("allowed_execs")
            if isinstance(execs, str):
                execs = json.loads(execs)
            personal = [str(e) for e in execs] if isinstance(execs, list) else None
    try:
        executors.check(spec, personal=personal, whose="your")
    except ExecNotAllowed as exc:
        raise ToolError(f"cannot create the task: {exc}") from None
    except ExecError as exc:
        if spec is not None:
            raise ToolError(f"cannot create the task: {exc}") from None


def tools() -> list[Tool]:
    """The task-creation tool."""
    return [
        Tool(
            "tasks.create",
            "Start a coding-agent task for a job too big for this chat (a feature, a refactor). "
            "exec picks the agent: sonnet, opus, claude:<model>, opencode:<provider/model>, codex:<model>, "
            "kilo:<model> or elowen:<provider>/<model>; omit it for the default.",
            create,
            {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "description": {"type": "string", "description": "what to do, in enough detail for the agent"},
                    "project": {"type": ["string", "integer"], "description": "project name or id"},
                    "exec": {"type": "string", "description": "executor spec"},
                    "priority": {"type": "integer", "minimum": 0, "maximum": 4},
                },
                "required": ["title", "description"],
                "additionalProperties": False,
            },
        )
    ]

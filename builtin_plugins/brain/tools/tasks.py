"""The task tool: the brain starts a coding-agent task (Claude Code, OpenCode, Codex, Kilo,
or a brain worker with ``elowen:<provider>/<model>``) through the daemon's task service
(``ctx.service("tasks")``); the agents plugin picks it up."""

from __future__ import annotations

from typing import Any

from elowen_sdk import ElowenError, Tool

from .env import ToolError, require_env

__all__ = ["create", "tools"]


async def create(title: str, description: str = "", project: str | int | None = None, exec: str | None = None,
                 priority: int = 2) -> dict[str, Any]:
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
    tasks = env.service.tasks()
    try:
        task = tasks.create(title=title, description=description, project_id=int(chosen["id"]), exec=exec or None,
                            priority=int(priority), owner_id=env.user_id)
    except (ElowenError, ValueError, LookupError) as exc:
        raise ToolError(f"cannot create the task: {exc}") from None
    return {k: task.get(k) for k in ("id", "title", "project_id", "state", "exec", "exec_resolved")}


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

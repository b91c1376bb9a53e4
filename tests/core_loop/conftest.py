"""Fixtures of the core-loop tests: the brain test kernel (real kernel, real SQLite file, the
daemon's task service, the scripted model server on 127.0.0.1 as provider ``fake``) with the
``core-loop`` plugin enabled, and a model script that plays both the planner (requests with a
JSON schema) and the brain worker (requests with tools), task by task."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.brain.conftest import BrainEnv, brain_kernel, call
from tests.support.model_server import ParsedRequest, Reply
from tests.support.waiting import until as until

MODEL = "fake/test-model"
EXEC = f"elowen:{MODEL}"
_TASK = re.compile(r"Task #(\d+): (.+)")


def plan_json(*tasks: dict[str, Any], title: str = "CSV to JSON CLI") -> str:
    return json.dumps({"title": title, "tasks": list(tasks)})


def item(title: str, *, deps: tuple[int, ...] = (), priority: str = "medium", acceptance: tuple[str, ...] = ("pytest passes",)) -> dict[str, Any]:
    return {"title": title, "description": f"Do: {title}", "acceptance_criteria": list(acceptance), "priority": priority, "depends_on": list(deps)}


@dataclass
class Script:
    """The model: ``plan`` answers planner requests; worker requests are answered by the
    behaviour of the task's title in ``behaviour`` (``close``: closes with evidence ``ran:
    <title>``; ``close_bare``: closes without evidence; ``fail``: never closes; ``slow``:
    answers after 10 s); anything else
    (a chat turn) is answered ``chat reply``."""

    plan: str = ""
    behaviour: dict[str, str] = field(default_factory=dict)
    planner_calls: int = 0
    chat_calls: int = 0
    worker_turns: list[str] = field(default_factory=list)

    def __call__(self, request: ParsedRequest) -> Reply:
        if request.json_schema is not None:
            self.planner_calls += 1
            return Reply(text=self.plan)
        if not request.has_tools:
            return Reply(text="Summary.")
        found = _TASK.search(request.prompt)
        if found is None or "task_close" not in request.tool_names:
            self.chat_calls += 1
            return Reply(text="chat reply")
        title = found.group(2).strip()
        mode = self.behaviour.get(title, "close")
        if request.tool_results:
            return Reply(text="Done." if mode != "fail" else "I could not do it.")
        self.worker_turns.append(title)
        if mode == "close":
            return Reply(tool_calls=[call("task.close", summary=f"did {title}", evidence=[f"ran: {title}", "pytest: 3 passed"])])
        if mode == "slow":
            return Reply(text="still working", delay=10)
        if mode == "close_bare":
            return Reply(tool_calls=[call("task.close", summary=f"did {title}")])
        return Reply(text="I could not do it.")


@asynccontextmanager
async def loop_kernel(
    tmp_path: Path,
    *,
    config: dict[str, Any] | None = None,
    brain: dict[str, Any] | None = None,
    enable_more: tuple[str, ...] = (),
    plugin_config: dict[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncIterator[BrainEnv]:
    """The brain test kernel with ``core-loop`` (and ``enable_more``) enabled; ``config``: its
    settings, ``plugin_config``: the other plugins'."""
    cfg = {"intake_enabled": True, "planner_model": MODEL, "executor_interval": 0.1, **(config or {})}
    async with brain_kernel(
        tmp_path,
        enable_more=["core-loop", *enable_more],
        plugin_config={**(plugin_config or {}), "core-loop": cfg},
        config={"worker_interval": 0.05, **(brain or {})},
        **kwargs,
    ) as env:
        yield env


def parts(env: BrainEnv) -> Any:
    """The core-loop plugin's parts of the current enable (``None`` while it is disabled)."""
    from elowen_builtins.core_loop import plugin

    return plugin._parts.get("core-loop")

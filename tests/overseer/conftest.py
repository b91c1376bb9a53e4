"""A real kernel with tmux (private socket), agents, claude-code (pointed at the fake agent of
``tests/agents/fake_agent.py``: real captured Claude Code screens, real keys), inference and
the overseer, plus the scripted model server playing the overseer's model (OpenAI chat
completions). The daemon's task service is registered as kernel service ``tasks`` exactly as
the daemon does; no HTTP here (``tests/e2e/test_overseer_*.py`` use the daemon)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from elowen_sdk import Service
from elowen_sdk.testing import plugin_kernel

from elowen.daemon.execspec import resolve
from elowen.daemon.services.tasks import TaskService
from elowen_builtins.inference import add_provider
from tests.support.model_server import ModelServer, ParsedRequest, Reply

from tests.support.fake_cli import fake_claude, private_tmux_socket
from tests.support.waiting import until
MODEL = "fake/fake-model"
FAST_AGENTS = {"scheduler_interval": 0.3, "sweep_interval": 0.5, "liveness_interval": 0.2, "stuck_interval": 0.3, "janitor_interval": 0.3}


def verdict_script(answer: dict[str, Any] | str, *, status: int = 200) -> Callable[[ParsedRequest], Reply]:
    """A model that answers every request with ``answer`` (a dict is sent as JSON text)."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return lambda request: Reply(text=text, status=status, error_message="scripted failure" if status >= 400 else "")


class World:
    def __init__(self, kernel: Any, tmp: Path, socket: str, log: Path) -> None:
        self.kernel = kernel
        self.tmp = tmp
        self.socket = socket
        self.log = log
        self.store = kernel.store
        svc = kernel.contributions.all("service").get("tasks")
        self.tasks: TaskService = svc.obj.obj if svc else TaskService(kernel.store, kernel.events, resolve)
        if svc is None:
            kernel.contributions.add("kernel", "service", Service("tasks", self.tasks), [])
        self.repo = tmp / "repo"
        self.repo.mkdir(exist_ok=True)
        self.project = self.store.execute(
            "INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(self.repo),)
        )

    def service(self, name: str) -> Any:
        return self.kernel.contributions.get("service", name).obj.obj

    @property
    def rt(self) -> Any:
        from elowen_builtins.overseer.plugin import _runtimes

        return _runtimes["overseer"]

    @property
    def decisions(self) -> Any:
        return self.service("decisions")

    def keys(self) -> list[str]:
        if not self.log.exists():
            return []
        return [json.loads(line)["key"] for line in self.log.read_text().splitlines() if line.strip() and json.loads(line)["event"] == "key"]

    def mission(self, level: int, *, engage: bool = True, **kwargs: Any) -> dict[str, Any]:
        return self.rt.missions.create(name=f"m-{uuid.uuid4().hex[:6]}", level=level, project_id=self.project, engage=engage, **kwargs)

    def task(self, mission: dict[str, Any] | None, *, exec: str = "claude:fake", title: str = "Do it") -> int:
        """Create a task and put it in ``mission`` in the same trio step (before any tick)."""
        task_id = int(self.tasks.create(title=title, project_id=self.project, exec=exec, description="Run the thing.")["id"])
        if mission is not None:
            self.rt.missions.add_tasks(mission["id"], [task_id])
        return task_id

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False)


@pytest.fixture
def socket_name() -> Iterator[str]:
    with private_tmux_socket() as name:
        yield name


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer(verdict_script({"approve": True, "confidence": 0.9, "rationale": "harmless"})) as server:
        yield server


@asynccontextmanager
async def world(tmp: Path, socket: str, *, model: ModelServer | None = None, overseer: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> AsyncIterator[World]:
    log = tmp / "fake.log"
    config = {
        "tmux": {"socket": socket, "enter_delay": 0.05},
        "claude-code": {"binary": str(fake_claude(tmp)), "env": {"FAKE_LOG": str(log), **(env or {})}},
        "agents": FAST_AGENTS,
        "overseer": {"model": MODEL if model is not None else "", "sweep_interval": 0.5, "liveness_interval": 0.2, **(overseer or {})},
    }
    async with plugin_kernel(tmp, enable=["agents", "tmux", "claude-code", "inference", "overseer"], config=config) as kernel:
        if model is not None:
            add_provider(kernel.settings, "fake", "openai", model.url + "/v1", max_retries=0)
        w = World(kernel, tmp, socket, log)
        await until(lambda: w.service("agents").ready.is_set(), what="agents ready")
        await until(lambda: w.rt.autopilot._gate_owner is not None, what="gate installed")
        yield w

"""A real kernel with tmux (private socket), agents, the deriver, claude-code (pointed at the
fake agent of ``tests/agents/fake_agent.py``: real captured Claude Code screens, real keys),
inference, the overseer and its decision paths (``overseer-relay`` by default,
``overseer-parked`` on request), plus the scripted model server playing the overseer's model
(OpenAI chat completions). The daemon's task and users services are registered as kernel
services ``tasks`` and ``users`` exactly as the daemon does; no HTTP here
(``tests/e2e/test_overseer_*.py`` use the daemon)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from elowen.daemon.auth import Access
from elowen.daemon.services.tasks import TaskService
from elowen.daemon.services.users import UserService, UsersHostService
from elowen_builtins.inference import add_provider
from elowen_sdk import Service
from elowen_sdk.testing import plugin_kernel, source_for_module
from tests.support.executors import kernel_resolver
from tests.support.fake_cli import fake_claude, private_tmux_socket
from tests.support.model_server import ModelServer, ParsedRequest, Reply
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
        self.tasks: TaskService = svc.obj.obj if svc else TaskService(kernel.store, kernel.events, kernel_resolver(kernel))
        if svc is None:
            kernel.contributions.add("kernel", "service", Service("tasks", self.tasks), [])
        if kernel.contributions.all("service").get("users") is None:
            users = UsersHostService(UserService(kernel.store, Access(kernel.store)))
            kernel.contributions.add("kernel", "service", Service("users", users), [])
        self._blocker: int | None = None
        self.repo = tmp / "repo"
        self.repo.mkdir(exist_ok=True)
        self.project = self.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(self.repo),))

    def service(self, name: str) -> Any:
        return self.kernel.contributions.get("service", name).obj.obj

    @property
    def rt(self) -> Any:
        from elowen_builtins.overseer.plugin import _runtimes

        return _runtimes["overseer"]

    @property
    def decisions(self) -> Any:
        return self.service("decisions")

    @property
    def parked(self) -> Any:
        from elowen_builtins.overseer_parked.plugin import _runtimes as parked

        return parked["overseer-parked"]

    def registry(self) -> Any:
        return self.kernel.registry

    async def toggle(self, name: str, enabled: bool) -> None:
        """Enable or disable plugin ``name`` in the running kernel and wait for it."""
        if enabled:
            await self.kernel.registry.enable(name)
        else:
            await self.kernel.registry.disable(name)
        state = "enabled" if enabled else "disabled"
        await until(lambda: self.kernel.registry.get(name).state == state, what=f"{name} {state}")

    def keys(self) -> list[str]:
        if not self.log.exists():
            return []
        return [json.loads(line)["key"] for line in self.log.read_text().splitlines() if line.strip() and json.loads(line)["event"] == "key"]

    def mission(self, level: int, *, engage: bool = True, **kwargs: Any) -> dict[str, Any]:
        return self.rt.missions.create(name=f"m-{uuid.uuid4().hex[:6]}", level=level, project_id=self.project, engage=engage, **kwargs)

    def task(self, mission: dict[str, Any] | None, *, exec: str = "claude:fake", title: str = "Do it", agent: bool = True) -> int:
        """Create a task and put it in ``mission`` in the same trio step (before any tick).
        ``agent=False``: no agent ever runs it (it depends on a cancelled task, so it is
        never ready)."""
        deps = () if agent else (self._never(),)
        task_id = int(self.tasks.create(title=title, project_id=self.project, exec=exec, description="Run the thing.", deps=deps)["id"])
        if mission is not None:
            self.rt.missions.add_tasks(mission["id"], [task_id])
        return task_id

    def _never(self) -> int:
        """A cancelled task (created and cancelled in one trio step: never dispatched)."""
        if self._blocker is None:
            self._blocker = int(self.tasks.create(title="never", project_id=self.project, exec="claude:fake")["id"])
            self.tasks.cancel(self._blocker)
        return self._blocker

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
async def world(
    tmp: Path,
    socket: str,
    *,
    model: ModelServer | None = None,
    overseer: dict[str, Any] | None = None,
    relay: bool = True,
    parked: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    modules: tuple[Any, ...] = (),
) -> AsyncIterator[World]:
    """``relay``: enable ``overseer-relay`` (its model: ``model``'s, else none); ``parked``:
    enable ``overseer-parked`` with this config; ``modules``: extra plugin modules (as
    :func:`plugin_kernel` takes them), enabled too."""
    log = tmp / "fake.log"
    config = {
        "tmux": {"socket": socket, "enter_delay": 0.05},
        "claude-code": {"binary": str(fake_claude(tmp)), "env": {"FAKE_LOG": str(log), **(env or {})}},
        "agents": FAST_AGENTS,
        "overseer": {"sweep_interval": 0.5, **(overseer or {})},
        "overseer-relay": {"model": MODEL if model is not None else ""},
        "overseer-parked": {"liveness_interval": 0.2, **(parked or {})},
    }
    enable = ["agents", "deriver", "tmux", "claude-code", "inference", "overseer"]
    enable += ["overseer-relay"] if relay else []
    enable += ["overseer-parked"] if parked is not None else []
    extra = [source_for_module(m).name for m in modules]
    async with plugin_kernel(tmp, enable=[*enable, *extra], modules=modules, config=config) as kernel:
        if model is not None:
            add_provider(kernel.settings, "fake", "openai", model.url + "/v1", max_retries=0)
        w = World(kernel, tmp, socket, log)
        await until(lambda: w.service("agents").ready.is_set(), what="agents ready")
        await until(lambda: "overseer" in __import__("elowen_builtins.overseer.plugin", fromlist=["_runtimes"])._runtimes, what="overseer up")
        yield w

"""Fixtures for the brain tests: a real kernel with the ``brain`` and ``inference`` plugins
enabled, a real SQLite file, two users and two project folders, the daemon's task service
offered as the kernel service ``tasks`` (as the daemon does), and the scripted model server on
127.0.0.1 configured as two providers: ``fake`` (OpenAI Chat Completions) and ``fakeant``
(Anthropic Messages)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from elowen.core.store import utc_iso
from elowen.daemon.auth import Access
from elowen.daemon.services.tasks import TaskService
from elowen.daemon.services.users import UserService, UsersHostService
from elowen_sdk import Service
from elowen_sdk.testing import plugin_kernel
from tests.support.executors import kernel_resolver
from tests.support.model_server import ModelServer, ParsedRequest, Reply, ToolCall

SPECS = {"openai": "fake/test-model", "anthropic": "fakeant/claude-test"}


class Queue:
    """A model script answering brain requests with ``replies`` in order (then ``fallback``).

    A reply may be a callable ``(ParsedRequest) -> Reply``. Requests without tools (compaction,
    goal drafts) are answered by ``side`` (default: a short summary text)."""

    def __init__(
        self,
        replies: Iterable[Reply | Callable[[ParsedRequest], Reply]] = (),
        *,
        fallback: Reply | None = None,
        side: Callable[[ParsedRequest], Reply] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.fallback = fallback or Reply(text="ok")
        self.side = side or (lambda r: Reply(text="Summary: the user worked on files."))
        self.seen: list[ParsedRequest] = []

    def __call__(self, request: ParsedRequest) -> Reply:
        if not request.has_tools:
            return self.side(request)
        self.seen.append(request)
        if not self.replies:
            return self.fallback
        reply = self.replies.pop(0)
        return reply(request) if callable(reply) else reply


def call(name: str, **arguments: Any) -> ToolCall:
    """A scripted tool call of the brain tool ``name`` (wire name: dots become ``_``)."""
    return ToolCall(name.replace(".", "_"), arguments)


@dataclass
class BrainEnv:
    kernel: Any
    service: Any
    server: ModelServer
    tasks: TaskService
    admin: int
    member: int
    project: Path
    project_id: int
    other: Path
    spec: str

    def script(self, *replies: Any, **kwargs: Any) -> Queue:
        queue = Queue(replies, **kwargs)
        self.server.script = queue
        return queue

    def conversation(self, user: int | None = None, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("model", self.spec)
        return self.service.create_conversation(user or self.admin, **kwargs)


def _seed(store: Any, tmp: Path) -> tuple[int, int, Path, int, Path]:
    now = utc_iso()
    admin = store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('admin', 'admin', '[\"*\"]', ?)", (now,))
    member = store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('mia', 'member', '[\"*\"]', ?)", (now,))
    project = tmp / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("Hello, world\n")
    other = tmp / "outside"
    other.mkdir()
    (other / "secret.txt").write_text("do not read\n")
    pid = store.execute("INSERT INTO projects (name, path, created_at) VALUES ('proj', ?, ?)", (str(project.resolve()), now))
    store.execute("INSERT INTO user_projects (user_id, project_id) VALUES (?, ?)", (member, pid))
    return admin, member, project.resolve(), pid, other.resolve()


@asynccontextmanager
async def brain_kernel(
    tmp_path: Path,
    api: str = "openai",
    *,
    config: dict[str, Any] | None = None,
    home: Path | None = None,
    seed: bool = True,
    enable_more: tuple[str, ...] | list[str] = (),
    plugin_config: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[BrainEnv]:
    """A kernel with brain + inference (+ ``enable_more``) enabled and the model server
    configured; ``plugin_config``: config of the other plugins."""
    cfg = {**(plugin_config or {}), "brain": {"worker_interval": 0.1, **(config or {})}}
    with ModelServer(Queue()) as server:
        # opencode: a provider plugin, so the brain's coding-agent tasks (opencode:…) resolve
        async with plugin_kernel(home or tmp_path, enable=["brain", "inference", "opencode", *enable_more], config=cfg) as kernel:

            def providers(data: dict[str, Any]) -> None:
                data.setdefault("inference", {})["providers"] = {
                    "fake": {"kind": "openai", "base_url": server.url + "/v1", "max_retries": 0, "timeout": 20},
                    "fakeant": {"kind": "anthropic", "base_url": server.url, "max_retries": 0, "timeout": 20},
                }

            kernel.settings.update(providers)
            store = kernel.store
            if seed:
                admin, member, project, pid, other = _seed(store, tmp_path)
            else:
                admin, member = 1, 2
                row = store.query_one("SELECT id, path FROM projects ORDER BY id LIMIT 1")
                pid, project, other = row["id"], Path(row["path"]), tmp_path / "outside"
            tasks = TaskService(store, kernel.events, kernel_resolver(kernel))
            kernel.contributions.add("daemon", "service", Service("tasks", tasks), [])
            if kernel.contributions.all("service").get("users") is None:  # the daemon's users service
                users = UsersHostService(UserService(store, Access(store)))
                kernel.contributions.add("daemon", "service", Service("users", users), [])
            service = kernel.contributions.get("service", "brain").obj.obj
            yield BrainEnv(kernel, service, server, tasks, admin, member, project, pid, other, SPECS[api])


@pytest.fixture(params=["openai", "anthropic"])
def api(request: pytest.FixtureRequest) -> str:
    return request.param


def tool_results(request: ParsedRequest) -> list[str]:
    return [r.output for r in request.tool_results]


def dumps(value: Any) -> str:
    return json.dumps(value)

"""Fixtures for the platform adapters: a real kernel (real SQLite file) with ``brain``,
``inference`` and the adapter's plugin enabled, the daemon's users and tasks services, the
scripted model server on 127.0.0.1 as the ``fake`` provider, and two users (an admin and a
member of one project)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from elowen.core.store import utc_iso
from elowen.daemon.auth import Access
from elowen.daemon.services.tasks import TaskService
from elowen.daemon.services.users import UserService, UsersHostService
from elowen_sdk import Service
from elowen_sdk.testing import plugin_kernel
from tests.support.executors import kernel_resolver
from tests.support.model_server import ModelServer, ParsedRequest, Reply

SPEC = "fake/test-model"
CODE_RE = re.compile(r"link code is ([A-Z0-9]{4}-[A-Z0-9]{4})")


class Script:
    """Model replies in order (then ``fallback``); requests without tools (compaction, goal
    drafts) get a short summary."""

    def __init__(self, replies: Iterable[Reply] = (), fallback: Reply | None = None) -> None:
        self.replies = list(replies)
        self.fallback = fallback or Reply(text="ok")
        self.seen: list[ParsedRequest] = []

    def __call__(self, request: ParsedRequest) -> Reply:
        if not request.has_tools:
            return Reply(text="Summary.")
        self.seen.append(request)
        return self.replies.pop(0) if self.replies else self.fallback


@dataclass
class Env:
    kernel: Any
    brain: Any
    model: ModelServer
    admin: int
    member: int
    project_id: int
    other_project_id: int

    def script(self, *replies: Reply, fallback: Reply | None = None) -> Script:
        script = Script(replies, fallback)
        self.model.script = script
        return script

    def platform(self, name: str) -> dict[str, Any]:
        return next((p for p in self.brain.platforms.status() if p["name"] == name), {})

    def adapter(self, name: str) -> Any:
        # the running adapter object, for its counters (the brain keeps it; no public accessor)
        running = self.brain.platforms._running.get(name)
        return running.adapter if running is not None else None

    def audit(self, action: str) -> list[dict[str, Any]]:
        self.kernel.store.flush_audit()
        return self.kernel.store.query("SELECT actor, action, target, outcome FROM audit WHERE action = ? ORDER BY id", (action,))


def secret_file(path: Path, value: str) -> Path:
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


@asynccontextmanager
async def platform_env(
    tmp_path: Path,
    plugin: str,
    config: dict[str, Any],
    *,
    enable_more: Iterable[str] = (),
    modules: Iterable[Any] = (),
    more_config: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[Env]:
    """A kernel with brain + inference + ``plugin`` (configured with ``config``), plus
    ``enable_more`` (e.g. test plugins given as ``(module, manifest)`` in ``modules``)."""
    with ModelServer(Script()) as model:
        cfg = {**(more_config or {}), "brain": {"default_model": SPEC, "worker_interval": 5}, plugin: config}
        async with plugin_kernel(
            tmp_path, enable=["brain", "inference", plugin, *enable_more], config=cfg, grant={plugin: ["service:users"]}, modules=modules
        ) as kernel:
            kernel.settings.update(
                lambda data: data.setdefault("inference", {}).__setitem__(
                    "providers", {"fake": {"kind": "openai", "base_url": model.url + "/v1", "max_retries": 0, "timeout": 20}}
                )
            )
            store = kernel.store
            now = utc_iso()
            admin = store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('ada', 'admin', '[\"*\"]', ?)", (now,))
            member = store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('mia', 'member', '[\"*\"]', ?)", (now,))
            paths = []
            for name in ("alpha", "beta"):
                folder = tmp_path / name
                folder.mkdir()
                paths.append(store.execute("INSERT INTO projects (name, path, created_at) VALUES (?, ?, ?)", (name, str(folder.resolve()), now)))
            store.execute("INSERT INTO user_projects (user_id, project_id) VALUES (?, ?)", (member, paths[0]))
            kernel.contributions.add("kernel", "service", Service("tasks", TaskService(store, kernel.events, kernel_resolver(kernel))), [])
            kernel.contributions.add("kernel", "service", Service("users", UsersHostService(UserService(store, Access(store)))), [])
            brain = kernel.contributions.get("service", "brain").obj.obj
            yield Env(kernel, brain, model, admin, member, paths[0], paths[1])


async def until(predicate: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``predicate`` every 20 ms until truthy (returned); fail naming ``what``."""
    with trio.move_on_after(timeout):
        while True:
            value = predicate()
            if value:
                return value
            await trio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")

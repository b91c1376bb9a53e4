"""A real kernel (real SQLite file, real config.toml) with the daemon's host services (tasks,
users, exactly as the daemon registers them) and the ``notify`` plugin enabled."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import trio

from elowen_sdk.testing import plugin_kernel

FAST = {"backoff_base": 0.05, "backoff_max": 0.2, "wait_grace": 0.2, "delivery_timeout": 2.0, "allow_insecure_endpoints": True}


async def until(fn: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll ``fn()`` until truthy (returned) or fail after ``timeout`` s (generous: the
    machine is shared)."""
    with trio.move_on_after(timeout):
        while True:
            value = fn()
            if value:
                return value
            await trio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class World:
    def __init__(self, kernel: Any, state: Any, tmp: Path) -> None:
        self.kernel = kernel
        self.state = state
        self.tmp = tmp
        self.store = kernel.store

    @property
    def rt(self) -> Any:
        from elowen_builtins.notify.plugin import _runtimes

        return _runtimes["notify"]

    @property
    def notify(self) -> Any:
        return self.kernel.contributions.get("service", "notify").obj.obj

    def user(self, name: str, role: str = "member", projects: tuple[int, ...] = ()) -> int:
        user, _ = self.state.users.create(name, role)
        for p in projects:
            self.state.users.add_project(user["id"], p)
        return int(user["id"])

    def project(self, name: str) -> int:
        path = self.tmp / name
        path.mkdir(exist_ok=True)
        return int(self.state.projects.create(name, str(path))["id"])

    def task(self, project: int, owner: int | None, title: str = "Do it") -> dict[str, Any]:
        return dict(self.state.tasks.create(title=title, project_id=project, owner_id=owner))

    def mine(self, user_id: int) -> list[dict[str, Any]]:
        return self.rt.outbox.list_for(user_id, limit=100)

    async def toggle(self, name: str, enabled: bool) -> None:
        if enabled:
            await self.kernel.registry.enable(name)
        else:
            await self.kernel.registry.disable(name)
        state = "enabled" if enabled else "disabled"
        await until(lambda: self.kernel.registry.get(name).state == state, f"{name} {state}")


@contextlib.asynccontextmanager
async def world(tmp: Path, config: dict[str, Any] | None = None, *, modules: tuple[str, ...] = (), also: tuple[str, ...] = ()) -> AsyncIterator[World]:
    """The kernel with ``notify`` (and the plugins ``also``, from ``modules``) enabled."""
    from elowen.daemon.server import build_state

    async with plugin_kernel(
        tmp,
        enable=["notify", *also],
        modules=modules,
        grant={name: ["service:notify"] for name in also},
        config={"notify": {**FAST, **(config or {})}},
        wait_plugins=False,
        watch_settings=False,
    ) as kernel:
        state = build_state(kernel)
        kernel.registry.start_loading()
        with trio.fail_after(60):
            await kernel.registry.ready.wait()
        assert kernel.registry.get("notify").state == "enabled", kernel.registry.describe("notify")["error"]
        yield World(kernel, state, tmp)

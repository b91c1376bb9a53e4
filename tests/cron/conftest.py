"""Fixtures for the cron tests: a real kernel with ``brain``, ``inference`` and ``cron``
enabled (real SQLite file), the scripted model server on 127.0.0.1 as the model, the daemon's
own users service, and helpers to call the plugin's routes as a given user."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from elowen.daemon.auth import Access
from elowen.daemon.services.users import UserService, UsersHostService
from elowen_sdk import HTTPError, Principal, Request, Service
from elowen_sdk.testing import call
from tests.brain.conftest import BrainEnv, brain_kernel

CRON_CONFIG = {"tick_interval": 60, "late_grace": 60, "min_interval": 30, "timezone": "UTC"}


@dataclass
class CronEnv:
    brain: BrainEnv

    @property
    def kernel(self) -> Any:
        return self.brain.kernel

    @property
    def rt(self) -> Any:
        from elowen_builtins.cron.plugin import _runtimes

        return _runtimes["cron"]

    def principal(self, user: int) -> Principal:
        row = self.kernel.store.query_one("SELECT name, role FROM users WHERE id = ?", (user,))
        projects = (
            None
            if row["role"] == "admin"
            else frozenset(r["project_id"] for r in self.kernel.store.query("SELECT project_id FROM user_projects WHERE user_id = ?", (user,)))
        )
        return Principal(user, row["name"], row["role"], project_ids=projects)

    async def api(self, method: str, path: str, user: int, body: Any = None, **query: str) -> Any:
        """Call the plugin route matching ``method path`` (``{id}`` filled from the path)."""
        parts = path.strip("/").split("/")
        params: dict[str, str] = {}
        pattern = path
        if len(parts) >= 3 and parts[2].isdigit():
            params["id"] = parts[2]
            pattern = "/" + "/".join([parts[0], parts[1], "{id}", *parts[3:]])
        route = self.kernel.contributions.get("route", f"{method} {pattern}").obj
        return await call(route, request=Request(method, path, params, query, body, self.principal(user)))

    async def error(self, method: str, path: str, user: int, body: Any = None, **query: str) -> HTTPError:
        with pytest.raises(HTTPError) as info:
            await self.api(method, path, user, body, **query)
        return info.value


@pytest.fixture
async def cron(tmp_path: Path) -> AsyncIterator[CronEnv]:
    async with brain_kernel(tmp_path, enable_more=("cron",), plugin_config={"cron": dict(CRON_CONFIG)}) as env:
        users = UsersHostService(UserService(env.kernel.store, Access(env.kernel.store)))
        env.kernel.contributions.add("daemon", "service", Service("users", users), [])
        assert env.kernel.registry.get("cron").state == "enabled", env.kernel.registry.describe("cron")["error"]
        yield CronEnv(env)

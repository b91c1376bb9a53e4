"""A real daemon (every builtin plugin but the coding-agent providers, so no task is ever
dispatched to a CLI) with the scripted model server as the brain's model, and the official
``mcp`` SDK client over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, start_daemon
from tests.daemon.helpers import agent_token
from tests.support.model_server import ModelServer, ParsedRequest, Reply, ToolCall

PROVIDERS = ("claude-code", "opencode", "codex", "kilo")


def _script(r: ParsedRequest) -> Reply:
    """``call <brain tool> <json arguments>`` makes the model call that tool, then answer
    ``tool said: <result>``; anything else is answered ``reply to: <prompt>``."""
    if r.prompt.startswith("call ") and r.has_tools:
        if r.tool_results:
            return Reply(text="tool said: " + r.tool_results[-1].output)
        _, name, args = r.prompt.split(" ", 2)
        return Reply(tool_calls=[ToolCall(name.replace(".", "_"), json.loads(args))])
    return Reply(text=f"reply to: {r.prompt}")


@dataclass
class World:
    """The daemon and the principals of the MCP tests."""

    d: DaemonProc
    project: int
    tokens: dict[str, str | None] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)

    def rest(self, who: str) -> httpx.Client:
        return self.d.client(self.tokens[who])

    def new_task(self, owner: str, title: str = "t") -> int:
        with self.rest(owner) as c:
            r = c.post("/tasks", json={"title": title, "project_id": self.project})
            assert r.status_code == 201, r.text
            return int(r.json()["id"])

    def agent(self, task_id: int) -> str:
        return agent_token(self.d.home, task_id)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("mcp")
    (root / "proj").mkdir()
    with ModelServer(_script) as server:
        home = root / "home"
        home.mkdir()
        config = {
            "plugins": {name: {"enabled": False} for name in PROVIDERS} | {"brain": {"config": {"default_model": "fake/test-model"}}},
            "inference": {"providers": {"fake": {"kind": "openai", "base_url": server.url + "/v1", "max_retries": 0}}},
        }
        (home / "config.toml").write_text(tomli_w.dumps(config))
        d = start_daemon(home)
        try:
            w = World(d, 0, {"admin": d.admin_token, "none": None})
            with d.admin() as admin:
                r = admin.post("/projects", json={"name": "proj", "path": str(root / "proj")})
                assert r.status_code == 201, r.text
                w.project = int(r.json()["id"])
                for name in ("mia", "bob"):
                    u = admin.post("/users", json={"name": name, "role": "member", "tool_grants": ["*"]})
                    assert u.status_code == 201, u.text
                    w.ids[name] = int(u.json()["user"]["id"])
                    w.tokens[name] = u.json()["token"]
                    admin.post(f"/users/{w.ids[name]}/projects", json={"project_id": w.project}).raise_for_status()
                u = admin.post("/users", json={"name": "eve", "role": "member"})  # sees no project
                w.tokens["eve"] = u.json()["token"]
            w.ids["task"] = w.new_task("mia", "mia's task")
            w.tokens["agent"] = w.agent(w.ids["task"])
            yield w
        finally:
            d.stop()


@asynccontextmanager
async def mcp_client(url: str, token: str | None) -> AsyncIterator[Any]:
    """The official SDK's client (``mcp.Client`` over ``streamable_http_client``) with the
    bearer token as every request's ``Authorization``."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
            yield client

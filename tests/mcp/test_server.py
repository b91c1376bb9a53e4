"""The MCP server at ``/mcp`` with the official ``mcp`` SDK client against a real daemon.

Each tool is called; the RBAC matrix compares every tool call with the REST call it stands for,
token by token (admin, the owning member, another member of the project, a member without the
project, the task's agent token): the same outcome, status and error code. Without a token the
daemon answers 401 before any MCP code runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import trio

from .conftest import World, mcp_client

pytestmark = pytest.mark.slow

AGENT_TOOLS = {"task_get", "progress", "ask", "close", "permission_prompt"}
PERSON_TOOLS = {
    "task_get",
    "ask",
    "tasks_list",
    "task_create",
    "task_cancel",
    "projects_list",
    "missions_list",
    "mission_set_level",
    "escalations_list",
    "escalation_answer",
    "brain_chat",
}
OVERSEER_TOOLS = {"poll", "decide"}


def outcome_of_tool(result: Any) -> tuple[int, str | None]:
    """(status, error code) of a tool result: 200 for success."""
    if not result.is_error:
        return 200, None
    err = result.structured_content["error"]
    return int(err["status"]), str(err["code"])


def outcome_of_rest(resp: httpx.Response) -> tuple[int, str | None]:
    if resp.status_code < 400:
        return 200, None
    return resp.status_code, resp.json()["error"]["code"]


async def test_no_token_is_401_before_any_session(world: World) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    for headers in ({}, {"Authorization": "Bearer elw_not-a-token"}, {"Authorization": "Basic abc"}):
        r = httpx.post(f"{world.d.url}/mcp", json=init, headers={"Accept": "application/json, text/event-stream", **headers})
        assert r.status_code == 401, r.text
        assert r.json()["error"]["code"] == "unauthorized"
        assert "mcp-session-id" not in r.headers
    # the real client fails to connect at all
    with pytest.RaisesGroup(pytest.RaisesExc(Exception), allow_unwrapped=True, flatten_subgroups=True):
        async with mcp_client(world.d.url, None) as client:
            await client.list_tools()


async def test_tools_listed_per_token_each_with_schema_and_description(world: World) -> None:
    seen: dict[str, set[str]] = {}
    for who in ("agent", "mia", "admin"):
        async with mcp_client(world.d.url, world.tokens[who]) as client:
            tools = (await client.list_tools()).tools
            seen[who] = {t.name for t in tools}
            for t in tools:
                assert t.description and "\n" not in t.description and len(t.description) < 200
                assert t.input_schema["type"] == "object" and "properties" in t.input_schema
    assert seen["agent"] == AGENT_TOOLS
    assert seen["mia"] == PERSON_TOOLS
    assert seen["admin"] == PERSON_TOOLS | OVERSEER_TOOLS


async def test_agent_tools_on_its_own_task(world: World) -> None:
    task = world.new_task("mia", "agent work")
    token = world.agent(task)
    other = world.new_task("mia", "someone else's")
    async with mcp_client(world.d.url, token) as client:
        got = await client.call_tool("task_get", {})
        assert not got.is_error and got.structured_content["id"] == task
        # a task_id argument cannot point an agent elsewhere: it always reads its own task
        got = await client.call_tool("task_get", {"task_id": other})
        assert got.structured_content["id"] == task
        note = await client.call_tool("progress", {"text": "halfway"})
        assert not note.is_error and note.structured_content["text"] == "halfway"
        res = await client.read_resource(f"elowen://tasks/{task}")
        assert json.loads(res.contents[0].text)["id"] == task
        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == [f"elowen://tasks/{task}"]
        bad = await client.call_tool("progress", {})
        assert outcome_of_tool(bad) == (422, "validation_error")
        # the permission tool is the REST permission channel: no agent runs this task here
        # (the real Claude Code path is tests/e2e/test_permission_channel_e2e.py)
        asked = await client.call_tool("permission_prompt", {"tool_name": "Bash", "input": {"command": "ls"}})
        assert outcome_of_tool(asked) == (409, "not_running")
        closed = await client.call_tool("close", {"summary": "done via MCP", "evidence": ["pytest: 3 passed"]})
        assert not closed.is_error, closed.structured_content
    with world.rest("mia") as c:
        record = c.get(f"/tasks/{task}").json()
        log = c.get(f"/tasks/{task}").json()
    assert record["state"] == "closed" and record["summary"] == "done via MCP" and record["evidence"] == ["pytest: 3 passed"]
    assert log["id"] == task


async def test_ask_waits_for_the_answer(world: World) -> None:
    task = world.new_task("mia", "asking")
    token = world.agent(task)
    answer: dict[str, Any] = {}

    async def human_answers() -> None:
        # no decision path is configured: the ask escalates; the task's owner answers it
        with world.rest("mia") as c:
            with trio.fail_after(60):
                while True:
                    items = c.get("/escalations").json()["items"]
                    mine = [i for i in items if i.get("task_id") == task]
                    if mine:
                        break
                    await trio.sleep(0.2)
            r = c.post(f"/escalations/{mine[0]['id']}", json={"action": "answer", "text": "use port 8080"})
            assert r.status_code == 200, r.text

    async with mcp_client(world.d.url, token) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(human_answers)
            result = await client.call_tool("ask", {"question": "Which port should the server use?", "timeout": 90})
            answer = result.structured_content
    assert answer["status"] == "answered" and answer["answer"] == "use port 8080", answer


async def test_brain_chat_returns_the_reply(world: World) -> None:
    async with mcp_client(world.d.url, world.tokens["mia"]) as client:
        result = await client.call_tool("brain_chat", {"message": "hello over MCP"})
    assert not result.is_error, result.structured_content
    out = result.structured_content
    assert out["done"] and out["reply"] == "reply to: hello over MCP" and out["error"] is None
    with world.rest("mia") as c:
        conv = c.get(f"/brain/conversations/{out['conversation_id']}").json()
    assert [m["content"] for m in conv["messages"] if m["role"] == "assistant"][-1] == "reply to: hello over MCP"


@dataclass(frozen=True)
class Case:
    """A tool call and the REST call it stands for; ``fresh`` makes a new task (owned by mia)
    per side for calls that change it."""

    tool: str
    args: Callable[[World, int], dict[str, Any]]
    rest: Callable[[httpx.Client, World, int], httpx.Response]
    fresh: bool = False


CASES = [
    Case("task_get", lambda w, t: {"task_id": t}, lambda c, w, t: c.get(f"/tasks/{t}")),
    Case("tasks_list", lambda w, t: {}, lambda c, w, t: c.get("/tasks")),
    Case("projects_list", lambda w, t: {}, lambda c, w, t: c.get("/projects")),
    Case("missions_list", lambda w, t: {}, lambda c, w, t: c.get("/missions")),
    Case("escalations_list", lambda w, t: {}, lambda c, w, t: c.get("/escalations")),
    Case("task_cancel", lambda w, t: {"task_id": t}, lambda c, w, t: c.post(f"/tasks/{t}/cancel"), fresh=True),
    Case(
        "task_create",
        lambda w, t: {"title": "made", "project_id": w.project},
        lambda c, w, t: c.post("/tasks", json={"title": "made", "project_id": w.project}),
    ),
    Case(
        "mission_set_level",
        lambda w, t: {"mission_id": w.ids["mission"], "level": "L0"},
        lambda c, w, t: c.patch(f"/missions/{w.ids['mission']}", json={"level": "L0"}),
    ),
    Case(
        "escalation_answer",
        lambda w, t: {"decision_id": 999999, "action": "approve"},
        lambda c, w, t: c.post("/escalations/999999", json={"action": "approve"}),
    ),
    Case("poll", lambda w, t: {"wait": 0}, lambda c, w, t: c.get("/overseer/poll", params={"wait": 0})),
]


async def test_rbac_matrix_tool_equals_rest(world: World) -> None:
    """Every (token, tool) pair: the tool's outcome is the REST call's outcome; a tool the
    token does not see is refused (404 ``unknown_tool``) exactly where REST refuses (4xx)."""
    with world.rest("mia") as c:
        r = c.post("/missions", json={"name": "m", "level": "L0", "project_id": world.project})
        assert r.status_code == 201, r.text
        world.ids["mission"] = int(r.json()["id"])
    shared = world.new_task("mia", "shared")
    rows: list[str] = []
    for who in ("admin", "mia", "bob", "eve", "agent"):
        token = world.tokens[who] if who != "agent" else world.agent(shared)
        async with mcp_client(world.d.url, token) as client:
            visible = {t.name for t in (await client.list_tools()).tools}
            with world.d.client(token) as rest:
                for case in CASES:
                    t_tool = world.new_task("mia", "fresh") if case.fresh else shared
                    t_rest = world.new_task("mia", "fresh") if case.fresh else shared
                    tool = outcome_of_tool(await client.call_tool(case.tool, case.args(world, t_tool)))
                    want = outcome_of_rest(case.rest(rest, world, t_rest))
                    rows.append(f"{who:6} {case.tool:18} mcp={tool} rest={want}")
                    if case.tool in visible:
                        assert tool == want, rows[-1]
                    else:
                        assert tool == (404, "unknown_tool") and want[0] in (401, 403, 404), rows[-1]
    # the matrix says something: each of these differs by token
    table = "\n".join(rows)
    assert "bob    task_cancel        mcp=(403, 'not_owner')" in table, table
    assert "mia    task_cancel        mcp=(200, None)" in table, table
    assert "eve    task_get           mcp=(404, 'not_found')" in table, table
    assert "bob    mission_set_level  mcp=(403, 'not_owner')" in table, table
    assert "agent  tasks_list         mcp=(404, 'unknown_tool')" in table, table


async def test_lists_match_rest_item_for_item(world: World) -> None:
    for who in ("mia", "eve", "admin"):
        async with mcp_client(world.d.url, world.tokens[who]) as client:
            tool_ids = [t["id"] for t in (await client.call_tool("tasks_list", {"limit": 200})).structured_content["items"]]
            projects = [p["id"] for p in (await client.call_tool("projects_list", {})).structured_content["items"]]
        with world.rest(who) as c:
            assert tool_ids == [t["id"] for t in c.get("/tasks", params={"limit": 200}).json()["items"]]
            assert projects == [p["id"] for p in c.get("/projects").json()["items"]]
    assert projects  # the admin sees the project; eve's lists were empty on both sides


async def test_status_says_the_sdk_is_loaded_after_first_use(world: World) -> None:
    with world.rest("admin") as c:
        status = c.get("/mcp/status").json()
    assert status["sdk_loaded"] and status["started"] and status["requests"] > 0
    with world.d.client(world.tokens["agent"]) as c:
        assert c.get("/mcp/status").status_code == 403


async def test_disable_removes_the_endpoint_and_enable_brings_it_back(world: World) -> None:
    with world.rest("admin") as c:
        assert c.post("/plugins/mcp/disable", json={}).status_code == 200
        try:
            r = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Accept": "application/json, text/event-stream"})
            assert r.status_code == 404, r.text
        finally:
            assert c.post("/plugins/mcp/enable").status_code == 200
    async with mcp_client(world.d.url, world.tokens["mia"]) as client:  # a new server, started on first use again
        assert not (await client.call_tool("projects_list", {})).is_error
    with world.rest("admin") as c:
        assert c.get("/mcp/status").json()["requests"] >= 1

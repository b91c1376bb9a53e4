"""Delegation in a real kernel with the real brain and inference plugins and the scripted model
server: the sub-agent's result and artefacts, inherited access (grants intersected, no YOLO,
depth limit), the per-user concurrency limit, cancellation with the parent turn, audit and live
events, and a forged caller stamp."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen.daemon.auth import Access
from elowen.daemon.services.users import UserService, UsersHostService
from elowen_builtins.subagent.delegation import DelegationRefused
from elowen_sdk import Service
from elowen_sdk.testing import call as call_tool
from tests.brain.conftest import BrainEnv, brain_kernel, call
from tests.support.model_server import ParsedRequest, Reply
from tests.support.waiting import until

SUB = "You are a sub-agent"


def script(parent: Callable[[ParsedRequest], Reply], sub: Callable[[ParsedRequest], Reply]) -> Callable[[ParsedRequest], Reply]:
    """The model: the parent conversation's requests go to ``parent``, sub-agents' to ``sub``."""

    def answer(request: ParsedRequest) -> Reply:
        if not request.has_tools:
            return Reply(text="Summary.")
        return sub(request) if SUB in request.prompt else parent(request)

    return answer


def delegating(arguments: dict[str, Any], name: str = "delegate") -> Callable[[ParsedRequest], Reply]:
    def parent(request: ParsedRequest) -> Reply:
        if request.tool_results:
            return Reply(text="Parent done: " + request.tool_results[-1].output[:300])
        return Reply(tool_calls=[call(name, **arguments)])

    return parent


@pytest.fixture
async def env(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[BrainEnv]:
    config = getattr(request, "param", {})
    async with brain_kernel(tmp_path, enable_more=("subagent",), plugin_config={"subagent": config}) as env:
        users = UsersHostService(UserService(env.kernel.store, Access(env.kernel.store)))
        env.kernel.contributions.add("daemon", "service", Service("users", users), [])
        assert env.kernel.registry.get("subagent").state == "enabled", env.kernel.registry.describe("subagent")["error"]
        yield env


def rows(env: BrainEnv) -> list[dict[str, Any]]:
    return env.kernel.store.query("SELECT * FROM subagent_runs ORDER BY id")


def sub_requests(env: BrainEnv) -> list[ParsedRequest]:
    return [r for r in env.server.requests if r.has_tools and SUB in r.prompt]


async def test_delegate_returns_the_summary_and_artefacts_audited_and_live(env: BrainEnv) -> None:
    def sub(request: ParsedRequest) -> Reply:
        if request.tool_results:
            return Reply(text="Wrote notes.txt with the findings.")
        return Reply(tool_calls=[call("files.write", path="notes.txt", content="findings\n")])

    env.server.script = script(delegating({"task": "Write the findings to notes.txt", "tools": ["files.*"]}), sub)
    conv = env.conversation(env.member, project_id=env.project_id)
    out = await env.service.turn(env.member, conv["id"], "please delegate the notes")
    final = [m for m in out["messages"] if m["role"] == "assistant" and m["content"]][-1]["content"]
    assert final.startswith("Parent done:") and "Wrote notes.txt" in final and "notes.txt" in final
    (row,) = rows(env)
    assert row["state"] == "done" and row["user_id"] == env.member and row["parent_conversation_id"] == conv["id"] and row["depth"] == 1
    assert json.loads(row["artefacts"]) == ["notes.txt"] and (env.project / "notes.txt").read_text() == "findings\n"
    assert set(json.loads(row["grants"])) == {"files.read", "files.write", "files.edit", "files.list"}
    # the sub-agent is a conversation of the caller, in the parent's project, kept as its transcript
    child = env.service.conversation(env.member, row["conversation_id"])
    assert child["project_id"] == env.project_id and child["title"].startswith("Sub-agent: Write the findings")
    offered = set(sub_requests(env)[0].tool_names)
    assert offered == {"files_read", "files_write", "files_edit", "files_list"}
    # audited, and visible live on the parent conversation
    env.kernel.store.flush_audit()
    audit = env.kernel.store.query("SELECT actor, detail FROM audit WHERE action = 'subagent.delegate'")
    assert [a["actor"] for a in audit] == [f"user:{env.member}"] and json.loads(audit[0]["detail"])["task"] == "Write the findings to notes.txt"
    types = [(r["type"], json.loads(r["data"])) for r in env.kernel.store.query("SELECT type, data FROM events WHERE type LIKE 'subagent.%' ORDER BY id")]
    assert [t for t, _ in types] == ["subagent.queued", "subagent.started", "subagent.progress", "subagent.finished"]
    assert all(d["conversation_id"] == conv["id"] and d["audience"] == [env.member] for _, d in types)
    assert types[2][1]["tool"] == "files.write" and types[3][1]["artefacts"] == ["notes.txt"]


async def test_grants_are_intersected_and_yolo_stays_off(env: BrainEnv) -> None:
    env.kernel.store.execute("UPDATE users SET tool_grants = ? WHERE id = ?", (json.dumps(["files.read", "delegate"]), env.member))
    env.service.set_yolo_default(env.member, True)
    env.server.script = script(delegating({"task": "read hello.txt", "tools": ["files.*", "terminal.run"]}), lambda r: Reply(text="It says hello."))
    conv = env.conversation(env.member, project_id=env.project_id)
    await env.service.turn(env.member, conv["id"], "delegate it")
    (row,) = rows(env)
    assert json.loads(row["grants"]) == ["files.read"]  # not files.write (not granted), not terminal.run (not granted), not delegate (depth)
    assert set(sub_requests(env)[0].tool_names) == {"files_read"}
    assert env.service.view(env.member, row["conversation_id"])["yolo"] is False


async def test_a_sub_agent_cannot_delegate_beyond_the_depth_limit(env: BrainEnv) -> None:
    env.server.script = script(delegating({"task": "do it"}), lambda r: Reply(text="done"))
    conv = env.conversation(env.admin)
    await env.service.turn(env.admin, conv["id"], "delegate")
    (row,) = rows(env)
    assert "delegate" not in json.loads(row["grants"]) and "delegate" not in sub_requests(env)[0].tool_names
    # even called directly from the sub-agent's conversation, it is refused
    from elowen_builtins.subagent.plugin import _enables

    state = _enables["subagent"]
    with pytest.raises(DelegationRefused, match="limited to depth 1"):
        await state.runs.delegate(env.admin, row["conversation_id"], "again")


@pytest.mark.parametrize("env", [{"max_depth": 2}], indirect=True)
async def test_a_deeper_limit_lets_a_sub_agent_delegate_once_more(env: BrainEnv) -> None:
    env.server.script = script(delegating({"task": "outer"}), lambda r: Reply(text="inner done"))
    conv = env.conversation(env.admin)
    await env.service.turn(env.admin, conv["id"], "delegate")
    (row,) = rows(env)
    assert "delegate" in json.loads(row["grants"])
    from elowen_builtins.subagent.plugin import _enables

    nested = await _enables["subagent"].runs.delegate(env.admin, row["conversation_id"], "inner task")
    assert nested["state"] == "done" and "delegate" not in nested["tools"]
    assert rows(env)[1]["depth"] == 2


async def test_at_most_three_sub_agents_of_a_user_run_at_once(env: BrainEnv) -> None:
    tasks = [{"task": f"task {i}"} for i in range(5)]
    env.server.script = script(delegating({"tasks": tasks}, "delegate_batch"), lambda r: Reply(text="ok " + r.prompt[-6:], delay=0.6))
    conv = env.conversation(env.admin)
    peak = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(env.service.turn, env.admin, conv["id"], "batch")
        with trio.fail_after(60):
            while len([r for r in rows(env) if r["state"] == "done"]) < 5:
                running = [r for r in rows(env) if r["state"] == "running" and r["conversation_id"] is not None]
                peak = max(peak, len(running))
                await trio.sleep(0.02)
    assert peak == 3
    assert sorted(r["task"] for r in rows(env)) == [f"task {i}" for i in range(5)]


async def test_aborting_the_parent_turn_cancels_the_sub_agent(env: BrainEnv) -> None:
    env.server.script = script(delegating({"task": "a long job"}), lambda r: Reply(text="late", delay=30))
    conv = env.conversation(env.admin)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(env.service.turn, env.admin, conv["id"], "delegate")
        await until(lambda: rows(env) and rows(env)[0]["conversation_id"], 20, "the sub-agent to start")
        child = rows(env)[0]["conversation_id"]
        await until(lambda: env.service.view(env.admin, child)["busy"], 20, "the sub-agent's turn")
        assert env.service.abort(env.admin, conv["id"])
    (row,) = rows(env)
    assert row["state"] == "cancelled" and row["error"] == "cancelled with the parent turn"
    assert env.service.view(env.admin, child)["busy"] is False


async def test_a_forged_caller_is_refused(env: BrainEnv) -> None:
    tool = env.kernel.contributions.get("tool", "delegate").obj
    for stamp in ("", f"{env.admin}:1:" + "0" * 64, "1:1"):
        with pytest.raises(DelegationRefused, match="signed-in user"):
            await call_tool(tool, task="x", _caller=stamp)
    assert rows(env) == []

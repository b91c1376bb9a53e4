"""Persistent goals end to end: sentinels parsed from the scripted model's text, budgets, the
YOLO ceiling, pausing on GOAL_BLOCKED / driver loss / restart, and compaction keeping the last
PROGRESS."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from elowen_builtins.brain.sentinels import parse_sentinels
from tests.support.model_server import ParsedRequest, Reply, example_for_schema

from .conftest import brain_kernel, call


def test_sentinels_only_from_own_text_not_fences_or_placeholders() -> None:
    text = (
        "PROGRESS: read the code\n"
        "```\nGOAL_DONE: inside a fence\n```\n"
        "GOAL_DONE: <evidence>\n"
        "I could say GOAL_DONE: mid-line but that does not count\n"
        "SUBGOAL_DONE: 2\n"
        "**PROGRESS:** wrote the fix\n"
    )
    found = parse_sentinels(text)
    assert found.progress == "wrote the fix"
    assert found.done is None and found.blocked is None
    assert found.subgoals_done == (2,)
    assert parse_sentinels("GOAL_BLOCKED: need the token\nGOAL_DONE: pytest: 3 passed").done == "pytest: 3 passed"


async def test_goal_finishes_with_evidence(tmp_path: Path, api: str) -> None:
    async with brain_kernel(tmp_path, api) as env:
        queue = env.script(
            Reply(text="Looking.\nPROGRESS: read hello.txt", tool_calls=[call("files.read", path="hello.txt")]),
            Reply(text="PROGRESS: read hello.txt, it is fine"),
            Reply(text="Checked again.\nPROGRESS: verified\nGOAL_DONE: hello.txt contains 'Hello, world'"),
            Reply(text="should not be asked"),
        )
        conv = env.conversation(activate=True)  # the active conversation is a live driver
        out = await env.service.turn(env.admin, conv["id"], "/goal check hello.txt")
        goal = out["goal"]
        assert goal["state"] == "done" and goal["evidence"] == "hello.txt contains 'Hello, world'"
        assert goal["turns_total"] == 2 and goal["last_progress"] == "verified"
        assert len(queue.seen) == 3
        assert "Persistent goal" in queue.seen[0].body.get("system", "") or "Persistent goal" in json.dumps(queue.seen[0].body)


async def test_premature_goal_done_is_rejected_while_a_subgoal_is_open(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:

        def draft(request: ParsedRequest) -> Reply:
            assert request.json_schema is not None
            return Reply(text=json.dumps(example_for_schema(request.json_schema)))

        queue = env.script(
            Reply(text="GOAL_DONE: all good"),
            lambda r: Reply(text="SUBGOAL_DONE: 1\nGOAL_DONE: tests written and passing"),
            side=draft,
        )
        conv = env.conversation(activate=True)
        drafted = await env.service.turn(env.admin, conv["id"], "/goal draft add tests")
        assert drafted["goal"]["state"] == "draft" and set(drafted["goal"]["contract"]) >= {"outcome", "verification", "stop_when"}
        await env.service.turn(env.admin, conv["id"], "/subgoal write the tests")
        out = await env.service.turn(env.admin, conv["id"], "/goal start")
        assert out["goal"]["state"] == "done"
        assert out["goal"]["subgoals"] == [{"text": "write the tests", "done": True}]
        assert out["goal"]["turns_total"] == 2
        second = json.dumps(queue.seen[1].body)
        assert "GOAL_DONE was rejected" in second and "subgoal(s) 1" in second


async def test_goal_blocked_pauses(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        queue = env.script(Reply(text="GOAL_BLOCKED: I need the staging password"), fallback=Reply(text="PROGRESS: more"))
        conv = env.conversation(activate=True)
        out = await env.service.turn(env.admin, conv["id"], "/goal deploy")
        assert out["goal"]["state"] == "paused" and out["goal"]["pause_reason"] == "blocked"
        assert out["goal"]["blocked_reason"] == "I need the staging password"
        assert len(queue.seen) == 1


async def test_supervised_goal_pauses_at_budget_and_resumes(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, config={"goal_turn_budget": 2}) as env:
        queue = env.script(fallback=Reply(text="PROGRESS: one more step"))
        conv = env.conversation(activate=True)
        out = await env.service.turn(env.admin, conv["id"], "/goal count to ten")
        assert out["goal"]["state"] == "paused" and out["goal"]["pause_reason"] == "budget_reached"
        assert len(queue.seen) == 2
        await trio.sleep(0.05)
        assert len(queue.seen) == 2  # nothing resumes by itself
        out = await env.service.turn(env.admin, conv["id"], "/goal resume")
        assert out["goal"]["pause_reason"] == "budget_reached" and out["goal"]["turns_total"] == 4
        assert len(queue.seen) == 4


async def test_yolo_goal_stops_at_the_ceiling(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, config={"goal_turn_budget": 2, "goal_max_turns": 8}) as env:
        queue = env.script(fallback=Reply(text="PROGRESS: still going"))
        conv = env.conversation(activate=True)
        await env.service.turn(env.admin, conv["id"], "/yolo on")
        out = await env.service.turn(env.admin, conv["id"], "/goal never ends")
        assert out["goal"]["state"] == "paused" and out["goal"]["pause_reason"] == "ceiling_reached"
        assert len(queue.seen) == 8 and out["goal"]["turns_total"] == 8


async def test_goal_needs_a_live_driver(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        queue = env.script(fallback=Reply(text="PROGRESS: working"))
        conv = env.conversation()  # not the active conversation, no stream attached
        out = await env.service.turn(env.admin, conv["id"], "/goal something")
        assert out["goal"]["state"] == "paused" and out["goal"]["pause_reason"] == "driver_lost"
        assert len(queue.seen) == 1
        # an attached stream (what the CLI holds) drives it; switching the pointer elsewhere does not matter
        env.service.open(env.admin, env.conversation()["id"])
        env.script(Reply(text="PROGRESS: a"), Reply(text="GOAL_DONE: finished"))
        events = [e async for e in env.service.stream(env.admin, conv["id"], "/goal resume")]
        assert events[-1]["type"] == "brain.done" and events[-1]["goal"]["state"] == "done"
        assert [e["event"] for e in events if e["type"] == "brain.goal"] == ["resumed", "continue", "done"]


async def test_restart_pauses_every_active_goal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with brain_kernel(tmp_path, home=home) as env:
        env.script(fallback=Reply(text="PROGRESS: slow", delay=0.5))
        conv = env.conversation(activate=True)
        other = env.conversation(user=env.member, activate=True)
        env.service.db.create_goal(other["id"], "member goal", state="active")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(env.service.turn, env.admin, conv["id"], "/goal run for a long time")
            with trio.fail_after(10):
                while env.service.db.live_goal(conv["id"]) is None:
                    await trio.sleep(0.01)
            await trio.sleep(0.2)
            nursery.cancel_scope.cancel()  # the daemon goes down mid-goal
        assert env.service.db.live_goal(conv["id"])["state"] == "active"
    async with brain_kernel(tmp_path, home=home, seed=False) as env:
        for cid in (conv["id"], other["id"]):
            goal = env.service.db.live_goal(cid)
            assert goal["state"] == "paused" and goal["pause_reason"] == "restart"
        queue = env.script(fallback=Reply(text="hi"))
        await trio.sleep(0.1)
        assert queue.seen == []  # nothing self-resumes


async def test_compaction_keeps_the_last_progress(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, config={"compact_after_tokens": 500, "keep_recent_messages": 2, "goal_turn_budget": 2}) as env:
        env.script(Reply(text="PROGRESS: migrated 3 of 7 tables " + "x" * 1500), Reply(text="PROGRESS: migrated 4 of 7 tables"))
        conv = env.conversation(activate=True)
        out = await env.service.turn(env.admin, conv["id"], "/goal migrate the tables")
        assert out["goal"]["pause_reason"] == "budget_reached"
        env.script(Reply(text="noted " + "y" * 2500), Reply(text="fine"))
        await env.service.turn(env.admin, conv["id"], "a long aside " + "z" * 2500)
        await env.service.turn(env.admin, conv["id"], "and another")
        summary = env.service.db.conversation(conv["id"])["summary"]
        assert "Goal progress (last PROGRESS): migrated 4 of 7 tables" in summary
        view = env.service.view(env.admin, conv["id"])
        assert any(m["compacted"] for m in view["messages"]) and not view["messages"][-1]["compacted"]

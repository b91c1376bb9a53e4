"""Pointer-based vs session-bound access: ownership, the pointer, and parallel conversations
without cross-talk."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from elowen_builtins.brain.service import Busy
from tests.support.model_server import ParsedRequest, Reply

from .conftest import SPECS, brain_kernel


def echo(request: ParsedRequest) -> Reply:
    return Reply(text=f"echo: {request.prompt}", delay=0.2)


async def test_two_bound_conversations_and_the_pointer_in_parallel(tmp_path: Path, api: str) -> None:
    async with brain_kernel(tmp_path, api, config={"default_model": SPECS[api]}) as env:
        env.server.script = lambda r: echo(r) if r.has_tools else Reply(text="summary")
        web = env.service.active(env.admin)  # the web dock's pointer
        cli_a = env.conversation()
        cli_b = env.conversation()
        got: dict[str, list[dict]] = {}

        async def bound(name: str, cid: int) -> None:
            got[name] = [e async for e in env.service.stream(env.admin, cid, f"hello from {name}")]

        async def pointer() -> None:
            got["web"] = [e async for e in env.service.stream(env.admin, None, "hello from web", driver=False)]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(bound, "a", cli_a["id"])
            nursery.start_soon(bound, "b", cli_b["id"])
            nursery.start_soon(pointer)
        expected = {"a": cli_a["id"], "b": cli_b["id"], "web": web["id"]}
        for name, events in got.items():
            assert {e["conversation_id"] for e in events} == {expected[name]}
            final = [e for e in events if e["type"] == "brain.message" and e["role"] == "assistant"]
            assert [m["content"] for m in final] == [f"echo: hello from {name}"]
            deltas = "".join(e["text"] for e in events if e["type"] == "brain.delta")
            assert deltas == f"echo: hello from {name}"
        # bound calls never moved the pointer
        assert env.service.active(env.admin)["id"] == web["id"]
        # each history holds only its own exchange
        for name, cid in expected.items():
            texts = [m["content"] for m in env.service.view(env.admin, cid)["messages"]]
            assert texts == [f"hello from {name}", f"echo: hello from {name}"]


async def test_ownership_and_pointer_moves(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        mine = env.conversation()
        with pytest.raises(LookupError):
            env.service.view(env.member, mine["id"])
        with pytest.raises(LookupError):
            await env.service.turn(env.member, mine["id"], "hijack")
        with pytest.raises(LookupError):
            env.service.open(env.member, mine["id"])
        first = env.service.active(env.admin)
        assert first["id"] != mine["id"]
        env.service.open(env.admin, mine["id"])
        assert env.service.active(env.admin)["id"] == mine["id"]
        listed = env.service.list_conversations(env.admin)
        assert [c["id"] for c in listed if c["active"]] == [mine["id"]]
        assert env.service.list_conversations(env.member) == []
        # the member's guard only covers their project (they have one); the admin sees all projects
        member_conv = env.service.session(env.conversation(user=env.member))
        assert [p["id"] for p in env.service.env_for(member_conv).projects] == [env.project_id]


async def test_a_second_turn_is_refused_while_one_runs_but_instant_commands_answer(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        env.script(Reply(text="slow answer", delay=0.5))
        conv = env.conversation()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(env.service.turn, env.admin, conv["id"], "slow")
            with trio.fail_after(5):
                while not env.service.session(conv).running:
                    await trio.sleep(0.01)
            with pytest.raises(Busy):
                await env.service.turn(env.admin, conv["id"], "second")
            out = await env.service.turn(env.admin, conv["id"], "/goal status")
            assert out["command"].startswith("No goal")


async def test_the_view_says_which_model_answers_and_whether_it_gets_tools(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        conv = env.conversation()  # on the scripted OpenAI-compatible provider
        assert env.service.view(env.admin, conv["id"])["model"] == {"spec": env.spec, "kind": "openai", "tools": True, "ready": True, "problem": None}
        local = env.service.create_conversation(env.admin, model="local/smollm2")
        local_model = env.service.view(env.admin, local["id"])["model"]
        assert {k: local_model[k] for k in ("spec", "kind", "tools")} == {"spec": "local/smollm2", "kind": "local", "tools": False}
        assert local_model["ready"] is (local_model["problem"] is None)  # ready unless the embedded model is not installed

"""The turn pipeline against the scripted model server (OpenAI-compatible and Anthropic), with
real tool calls, the real path guard, real processes and approvals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from elowen_sdk import Tool
from tests.support.model_server import ParsedRequest, Reply

from .conftest import BrainEnv, brain_kernel, call, tool_results


async def test_file_edit_through_the_path_guard(tmp_path: Path, api: str) -> None:
    async with brain_kernel(tmp_path, api) as env:
        queue = env.script(
            Reply(tool_calls=[call("files.edit", path="hello.txt", old="world", new="Elowen")]),
            Reply(text="Done: hello.txt now greets Elowen."),
        )
        conv = env.conversation()
        out = await env.service.turn(env.admin, conv["id"], "Change world to Elowen in hello.txt")
        assert (env.project / "hello.txt").read_text() == "Hello, Elowen\n"
        assert '"replacements": 1' in tool_results(queue.seen[1])[0]
        roles = [m["role"] for m in out["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert out["messages"][-1]["content"] == "Done: hello.txt now greets Elowen."
        # the model was offered the builtin tools under wire-safe names, and saw the system prompt
        assert "files_edit" in queue.seen[0].tool_names and "terminal_run" in queue.seen[0].tool_names
        assert "task_close" not in queue.seen[0].tool_names


async def test_path_escape_is_refused(tmp_path: Path, api: str) -> None:
    async with brain_kernel(tmp_path, api) as env:
        (env.project / "link").symlink_to(env.other)
        queue = env.script(
            Reply(
                tool_calls=[
                    call("files.read", path=str(env.other / "secret.txt")),
                    call("files.read", path="../outside/secret.txt"),
                    call("files.write", path="link/secret.txt", content="pwned"),
                ]
            ),
            Reply(text="I cannot reach that file."),
        )
        conv = env.conversation()
        await env.service.turn(env.admin, conv["id"], "read the secret")
        results = tool_results(queue.seen[1])
        assert len(results) == 3 and all(r.startswith("error: refused") for r in results), results
        assert "do not read" not in "".join(results)
        assert (env.other / "secret.txt").read_text() == "do not read\n"


async def _wait_pending(env: BrainEnv, user: int) -> dict:
    with trio.fail_after(10):
        while not (pending := env.service.pending(user)):
            await trio.sleep(0.01)
    return pending[0]


async def test_approval_round_trip_allow_then_reject(tmp_path: Path, api: str) -> None:
    async with brain_kernel(tmp_path, api) as env:
        queue = env.script(
            Reply(tool_calls=[call("terminal.run", command="echo hi > made.txt && echo made")]),
            Reply(tool_calls=[call("terminal.run", command="echo again > again.txt")]),
            Reply(text="One ran, one was rejected."),
        )
        conv = env.conversation()
        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def run() -> None:
                await env.service.turn(env.admin, conv["id"], "make a file")
                done.set()

            nursery.start_soon(run)
            first = await _wait_pending(env, env.admin)
            assert first["tool"] == "terminal.run" and first["kind"] == "approval" and not first["destructive"]
            assert not (env.project / "made.txt").exists()  # paused until allowed
            # another user cannot decide it
            try:
                env.service.decide(env.member, first["id"], allow=True)
                raise AssertionError("a stranger decided the approval")
            except LookupError:
                pass
            env.service.decide(env.admin, first["id"], allow=True)
            with trio.fail_after(10):
                while not (p := env.service.pending(env.admin)) or p[0]["id"] == first["id"]:
                    await trio.sleep(0.01)
            env.service.decide(env.admin, p[0]["id"], allow=False)
            with trio.fail_after(10):
                await done.wait()
        assert (env.project / "made.txt").read_text() == "hi\n"
        assert not (env.project / "again.txt").exists()
        assert '"exit_code": 0' in tool_results(queue.seen[1])[0]
        assert "rejected" in tool_results(queue.seen[2])[-1]


async def test_yolo_on_runs_without_asking_but_destructive_still_asks(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        conv = env.conversation()
        await env.service.turn(env.admin, conv["id"], "/yolo on")
        env.script(Reply(tool_calls=[call("terminal.run", command="echo yolo > y.txt")]), Reply(text="ran"))
        await env.service.turn(env.admin, conv["id"], "write y")
        assert (env.project / "y.txt").read_text() == "yolo\n"
        assert env.service.pending(env.admin) == []
        # destructive: never auto-approved, even in YOLO
        (env.project / "keep").mkdir()
        queue = env.script(Reply(tool_calls=[call("terminal.run", command="rm -rf /etc/elowen-test-nothing")]), Reply(text="stopped"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(env.service.turn, env.admin, conv["id"], "wipe it")
            pending = await _wait_pending(env, env.admin)
            assert pending["destructive"] and pending["reasons"]
            env.service.decide(env.admin, pending["id"], allow=False)
        assert "rejected" in tool_results(queue.seen[1])[0]
        # /yolo off: back to asking for the terminal
        await env.service.turn(env.admin, conv["id"], "/yolo off")
        env.script(Reply(tool_calls=[call("terminal.run", command="echo n > n.txt")]), Reply(text="ok"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(env.service.turn, env.admin, conv["id"], "write n")
            pending = await _wait_pending(env, env.admin)
            assert pending["tool"] == "terminal.run" and not pending["destructive"]
            env.service.decide(env.admin, pending["id"], allow=True)
        assert (env.project / "n.txt").exists()


async def test_yolo_default_persists_and_session_override_wins(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        env.service.set_yolo_default(env.admin, True)
        a = env.service.session(env.conversation())
        assert env.service.yolo(a) is True
        await env.service.turn(env.admin, a.id, "/yolo off")
        b = env.service.session(env.conversation())
        assert env.service.yolo(a) is False and env.service.yolo(b) is True


async def test_plugin_tool_hooks_and_unknown_tool(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        seen = []
        env.kernel.contributions.add(
            "extra",
            "tool",
            Tool("extra.echo", "Echo.", lambda text: seen.append(text) or {"echo": text}, {"type": "object", "properties": {"text": {"type": "string"}}}),
            [],
        )
        queue = env.script(Reply(tool_calls=[call("extra.echo", text="ping"), call("nope.tool")]), Reply(text="ok"))
        conv = env.conversation()
        await env.service.turn(env.admin, conv["id"], "echo")
        assert seen == ["ping"]
        results = tool_results(queue.seen[1])
        assert '"echo": "ping"' in results[0] and results[1].startswith("error: unknown tool")


async def test_breaker_stops_repeated_identical_failures(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, config={"breaker_threshold": 3}) as env:
        failing = Reply(tool_calls=[call("files.read", path="missing.txt")])
        queue = env.script(failing, failing, failing, failing, failing, Reply(text="never"))
        conv = env.conversation()
        await env.service.turn(env.admin, conv["id"], "read it")
        assert len(queue.seen) == 3  # stopped after the third identical failure


async def test_abort_leaves_a_consistent_history(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        env.script(Reply(tool_calls=[call("terminal.run", command="sleep 30")]), Reply(text="after abort"))
        conv = env.conversation()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(env.service.turn, env.admin, conv["id"], "sleep")
            await _wait_pending(env, env.admin)
            assert env.service.abort(env.admin, conv["id"]) is True
        assert env.service.pending(env.admin) == []
        msgs = env.service.view(env.admin, conv["id"])["messages"]
        assert msgs[-2]["role"] == "tool" and "aborted" in msgs[-2]["content"]
        assert msgs[-1]["role"] == "note"
        # the conversation goes on: the model gets a valid history (a tool result for every call)
        env.script(Reply(text="fine"))
        out = await env.service.turn(env.admin, conv["id"], "hello again")
        assert out["messages"][-1]["content"] == "fine"


# ------------------------------------------------------------------ context overflow


def _window(limit: int, api: str) -> Any:
    """A model whose context holds ``limit`` characters of request: larger requests get the
    provider's real "does not fit" error (OpenAI's ``maximum context length`` message,
    Anthropic's ``prompt is too long``)."""
    message = (
        "This model's maximum context length is 2048 tokens. However, your messages resulted in 9000 tokens."
        if api == "openai"
        else "prompt is too long: 9000 tokens > 2048 maximum"
    )

    def answer(request: ParsedRequest) -> Reply:
        if len(json.dumps(request.body)) > limit:
            return Reply(status=400, error_message=message)
        return Reply(text="it fits")

    return answer


async def test_a_context_overflow_compacts_the_history_and_the_turn_goes_on(tmp_path: Path, api: str) -> None:
    async with brain_kernel(tmp_path, api) as env:
        conv = env.conversation(activate=True)
        env.script(Reply(text="noted"), Reply(text="noted again"))
        await env.service.turn(env.admin, conv["id"], "some background " + "a" * 6000)
        await env.service.turn(env.admin, conv["id"], "more background " + "b" * 6000)
        limit = 9000  # the two earlier messages (12,000+ characters) no longer fit with a new one
        queue = env.script(
            _window(limit, api),
            _window(limit, api),
            fallback=Reply(text="unexpected"),
            side=lambda r: Reply(status=400, error_message="prompt is too long: 9000 tokens > 2048 maximum"),
        )
        out = await env.service.turn(env.admin, conv["id"], "so what now?")
        assert out["messages"][-1]["content"] == "it fits", out["messages"][-3:]
        assert len(queue.seen) == 2  # the failed call, then the same round on the compacted history
        view = env.service.view(env.admin, conv["id"])
        assert sum(m["compacted"] for m in view["messages"]) >= 4  # both earlier exchanges folded
        assert "some background" in env.service.db.conversation(conv["id"])["summary"]  # the plain summary kept them


async def test_a_message_too_long_on_its_own_is_folded_and_the_next_turn_works(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        conv = env.conversation(activate=True)
        env.script(_window(5000, "openai"), _window(5000, "openai"), _window(5000, "openai"))
        await env.service.turn(env.admin, conv["id"], "please read this " + "c" * 8000)
        messages = env.service.view(env.admin, conv["id"])["messages"]
        notes = [m for m in messages if m["role"] == "note"]
        assert notes and "does not fit the model's context" in notes[-1]["content"] and "send a shorter one" in notes[-1]["content"]
        assert [m["compacted"] for m in messages if m["role"] == "user"] == [True]  # no longer sent
        out = await env.service.turn(env.admin, conv["id"], "short question")
        assert out["messages"][-1]["content"] == "it fits"

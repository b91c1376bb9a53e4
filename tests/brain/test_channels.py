"""Channel turns: chat-platform senders reach the brain through stored links and one-time link
codes; their messages are pointer-based turns (the web dock's conversation) with approvals as
text, answered from the channel. A real kernel, real SQLite, the scripted model server; a
platform plugin module built in the test shows the brain following ``Platform``
contributions (adapter started on enable, cancelled on disable)."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen.core.store import Store
from elowen_builtins.brain.channels import CODE_TTL, MAX_TEXT, ChannelClosed, normalize_code, plain_error
from elowen_sdk import Platform, hookimpl
from elowen_sdk.testing import plugin_kernel
from tests.support.model_server import Reply

from .conftest import brain_kernel, call

SPEC = "fake/test-model"
CODE_RE = re.compile(r"link code is ([A-Z0-9]{4}-[A-Z0-9]{4})")


def _kernel(tmp_path: Path, **config: Any) -> Any:
    return brain_kernel(tmp_path, config={"default_model": SPEC, **config})


def code_of(replies: list[str]) -> str:
    assert len(replies) == 1, replies
    m = CODE_RE.search(replies[0])
    assert m, replies[0]
    return m.group(1)


async def linked(env: Any, platform: str, user: str, elowen_user: int) -> None:
    code = code_of(await env.service.channel_turn(platform, user, "hello?"))
    env.service.link_channel(elowen_user, code)


def audit(env: Any, action: str) -> list[dict[str, Any]]:
    env.kernel.store.flush_audit()
    return env.kernel.store.query("SELECT actor, action, target, outcome FROM audit WHERE action = ? ORDER BY id", (action,))


async def test_unlinked_sender_gets_a_single_use_code_then_turns_reach_the_pointer_conversation(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        env.script(Reply(text="Hi Ada, how can I help?"))
        replies = await env.service.channel_turn("chat", "ada#1", "hello there")
        code = code_of(replies)
        assert "elowen chat --link" in replies[0] and "10 minutes" in replies[0]
        assert env.server.requests == [], "no turn for an unlinked sender"
        assert env.service.active(env.admin, create=False) is None
        row = env.kernel.store.query_one("SELECT code_hash FROM brain_channel_codes")
        assert row is not None and normalize_code(code) not in row["code_hash"], "only the hash is stored"

        link = env.service.link_channel(env.admin, code.lower())  # case and dash do not matter
        assert (link["platform"], link["platform_user"], link["user_id"]) == ("chat", "ada#1", env.admin)
        with pytest.raises(LookupError):
            env.service.link_channel(env.member, code)  # single use
        assert env.service.channel_links(env.admin) == [link] and env.service.channel_links(env.member) == []

        assert await env.service.channel_turn("chat", "ada#1", "what can you do?") == ["Hi Ada, how can I help?"]
        active = env.service.active(env.admin, create=False)
        assert active is not None, "the channel turn made (and pointed at) the admin's conversation"
        view = env.service.view(env.admin, active["id"])
        assert [(m["role"], m["content"]) for m in view["messages"]] == [("user", "what can you do?"), ("assistant", "Hi Ada, how can I help?")]
        assert view["conversation"]["active"] is True

        # the web dock moves the pointer: the channel follows it
        other = env.conversation(env.admin)
        env.service.open(env.admin, other["id"])
        env.script(Reply(text="second conversation"))
        assert await env.service.channel_turn("chat", "ada#1", "still there?") == ["second conversation"]
        assert [m["content"] for m in env.service.view(env.admin, other["id"])["messages"]] == ["still there?", "second conversation"]
        assert [(a["actor"], a["target"], a["outcome"]) for a in audit(env, "brain.channel.link")] == [
            (f"user:{env.admin}", "chat:ada#1", "ok"),
            (f"user:{env.member}", "", "denied"),
        ]


async def test_codes_expire_and_a_new_message_replaces_the_old_code(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        first = code_of(await env.service.channel_turn("chat", "bo", "hi"))
        second = code_of(await env.service.channel_turn("chat", "bo", "hi again"))
        assert first != second
        with pytest.raises(LookupError):
            env.service.link_channel(env.admin, first)  # replaced
        real = env.service.channels.clock
        env.service.channels.clock = lambda: real() + CODE_TTL + 1  # eleven minutes later
        with pytest.raises(LookupError):
            env.service.link_channel(env.admin, second)
        env.service.channels.clock = real
        with pytest.raises(LookupError):
            env.service.link_channel(env.admin, second)  # an expired code is gone for good
        assert env.service.channels.user_for("chat", "bo") is None
        fresh = code_of(await env.service.channel_turn("chat", "bo", "third try"))
        env.service.channels.clock = lambda: real() + CODE_TTL - 5  # still inside ten minutes
        assert env.service.link_channel(env.admin, fresh)["user_id"] == env.admin
        assert env.kernel.store.query("SELECT * FROM brain_channel_codes") == []


async def test_approval_surfaces_as_text_and_is_answered_from_the_channel(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        await linked(env, "chat", "ada", env.admin)
        queue = env.script(
            Reply(text="Let me run that.", tool_calls=[call("terminal.run", command="echo hi > made.txt")]),
            Reply(tool_calls=[call("terminal.run", command="echo again > again.txt")]),
            Reply(text="One ran, one was rejected."),
        )
        with trio.fail_after(20):
            replies = await env.service.channel_turn("chat", "ada", "make a file")
        assert replies[0] == "Let me run that."
        pending = env.service.pending(env.admin)
        assert len(pending) == 1
        pid = pending[0]["id"]
        assert replies[-1].startswith(f"Approval #{pid} needed: terminal.run") and f"/allow {pid}" in replies[-1]
        assert "made.txt" in replies[-1]
        assert not (env.project / "made.txt").exists()

        # a plain message while the turn waits: told what is waiting, nothing new runs
        busy = await env.service.channel_turn("chat", "ada", "hurry up")
        assert len(busy) == 1 and f"/allow {pid}" in busy[0]
        # someone else's link cannot decide it
        await linked(env, "chat", "mia", env.member)
        assert await env.service.channel_turn("chat", "mia", f"/allow {pid}") == [f"No approval #{pid}."]

        with trio.fail_after(20):
            after = await env.service.channel_turn("chat", "ada", f"/allow {pid}")
        assert after[0] == f"Allowed #{pid}."
        second = env.service.pending(env.admin)[0]
        assert after[-1].startswith(f"Approval #{second['id']} needed") and (env.project / "made.txt").read_text() == "hi\n"
        with trio.fail_after(20):
            last = await env.service.channel_turn("chat", "ada", f"/reject {second['id']}")
        assert last == [f"Rejected #{second['id']}.", "One ran, one was rejected."]
        assert not (env.project / "again.txt").exists()
        assert "rejected" in queue.seen[-1].tool_results[-1].output
        assert await env.service.channel_turn("chat", "ada", f"/allow {pid}") == [f"Approval #{pid} is allowed."]
        assert await env.service.channel_turn("chat", "ada", "/allow x") == ["Usage: /allow N"]
        # the web dock sees the same conversation, approvals and all
        conv = env.service.active(env.admin, create=False)
        contents = [m["content"] for m in env.service.view(env.admin, conv["id"])["messages"] if m["role"] in ("user", "assistant")]
        assert contents[0] == "make a file" and contents[-1] == "One ran, one was rejected."


async def test_slash_commands_and_questions_from_the_channel(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        await linked(env, "chat", "ada", env.admin)
        assert (await env.service.channel_turn("chat", "ada", "/yolo on"))[0].startswith("YOLO on for this session")
        assert "Commands:" in (await env.service.channel_turn("chat", "ada", "/help"))[0]
        env.script(Reply(tool_calls=[call("ask_user", question="Which colour?")]), Reply(text="Blue it is."))
        with trio.fail_after(20):
            asked = await env.service.channel_turn("chat", "ada", "pick a colour")
        pid = env.service.pending(env.admin)[0]["id"]
        assert asked[-1].startswith(f"Question #{pid}: Which colour?") and f"/answer {pid}" in asked[-1]
        assert await env.service.channel_turn("chat", "ada", f"/answer {pid}") == ["Usage: /answer N <your answer>"]
        with trio.fail_after(20):
            assert await env.service.channel_turn("chat", "ada", f"/answer {pid} blue") == [f"Answered #{pid}.", "Blue it is."]
        assert await env.service.channel_turn("chat", "ada", "/abort") == ["Nothing is running."]
        with pytest.raises(ValueError):
            await env.service.channel_turn("chat", "", "hi")
        with pytest.raises(ValueError):
            await env.service.channel_turn("chat", "ada", "   ")


async def test_channel_help_lists_chat_commands_and_long_text_is_refused(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        await linked(env, "chat", "ada", env.admin)
        text = "\n".join(await env.service.channel_turn("chat", "ada", "/help"))
        assert "/goal <text>" in text
        for command in ("/allow N", "/reject N", "/answer N TEXT", "/abort", "/unlink"):
            assert command in text, command
        with pytest.raises(ValueError, match=str(MAX_TEXT)):
            await env.service.channel_turn("chat", "ada", "x" * (MAX_TEXT + 1))
        assert env.server.requests == [], "a too-long message never reaches the model"


async def test_a_failed_turn_is_reported_as_a_plain_sentence(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        await linked(env, "chat", "ada", env.admin)
        env.script(Reply(status=400, error_message="the prompt is longer than the context (2048 tokens)"))
        with trio.fail_after(20):
            replies = await env.service.channel_turn("chat", "ada", "hello")
        assert len(replies) == 1 and replies[0].startswith("Sorry, that did not work: "), replies
        assert "Error:" not in replies[0] and not re.search(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+:", replies[0]), replies
        assert "2048 tokens" in replies[0]


def test_plain_error_strips_exception_class_names() -> None:
    assert plain_error("ValueError: context too long") == "Sorry, that did not work: context too long."
    assert plain_error("RelayError: httpx.ReadTimeout: timed out") == "Sorry, that did not work: timed out."
    assert plain_error("stopped after 3 model calls in one turn (max_tool_rounds)").endswith("(max_tool_rounds).")
    assert plain_error("") == "Sorry, that did not work: an unexpected error."


async def test_two_senders_linked_to_two_users_stay_separate(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        env.script(
            lambda r: Reply(text=f"echo: {r.prompt}"),
            lambda r: Reply(text=f"echo: {r.prompt}"),
            lambda r: Reply(text=f"echo: {r.prompt}"),
            lambda r: Reply(text=f"echo: {r.prompt}"),
        )
        await linked(env, "chat", "ada", env.admin)
        await linked(env, "chat", "mia", env.member)
        async with trio.open_nursery() as nursery:
            got: dict[str, list[str]] = {}

            async def say(user: str, text: str) -> None:
                got[user] = await env.service.channel_turn("chat", user, text)

            nursery.start_soon(say, "ada", "admin secret plan")
            nursery.start_soon(say, "mia", "member grocery list")
        assert got == {"ada": ["echo: admin secret plan"], "mia": ["echo: member grocery list"]}
        admin_conv = env.service.active(env.admin, create=False)
        member_conv = env.service.active(env.member, create=False)
        assert admin_conv["id"] != member_conv["id"]
        assert [m["content"] for m in env.service.view(env.admin, admin_conv["id"])["messages"]] == ["admin secret plan", "echo: admin secret plan"]
        assert [m["content"] for m in env.service.view(env.member, member_conv["id"])["messages"]] == ["member grocery list", "echo: member grocery list"]
        with pytest.raises(LookupError):
            env.service.view(env.member, admin_conv["id"])
        # the same sender id on another platform is another sender
        assert CODE_RE.search((await env.service.channel_turn("other", "ada", "hi"))[0])


async def test_unlink_by_api_and_from_the_channel_is_audited(tmp_path: Path) -> None:
    async with _kernel(tmp_path) as env:
        await linked(env, "chat", "ada", env.admin)
        await linked(env, "chat", "ada2", env.admin)
        assert env.service.unlink_channel(env.member, "chat", "ada") is False  # not the member's link
        assert env.service.unlink_channel(env.admin, "chat", "ada") is True
        assert CODE_RE.search((await env.service.channel_turn("chat", "ada", "hi"))[0]), "unlinked: a new code"
        assert (await env.service.channel_turn("chat", "ada2", "/unlink"))[0].startswith("Unlinked.")
        assert env.service.channel_links(env.admin) == []
        assert [(a["target"], a["outcome"]) for a in audit(env, "brain.channel.unlink")] == [("chat:ada", "ok"), ("chat:ada2", "ok")]
        # a link to a deleted user is dropped: the sender is unlinked again
        await linked(env, "chat", "gone", env.member)
        env.kernel.store.execute("DELETE FROM users WHERE id = ?", (env.member,))
        assert CODE_RE.search((await env.service.channel_turn("chat", "gone", "hi"))[0])


# ------------------------------------------------------------------ Platform contributions


class Adapter:
    """What the test platform's factory returns: records its gateway and its lifecycle."""

    def __init__(self, gateway: Any, log: list[str]) -> None:
        self.gateway = gateway
        self.configured = True
        self.detail: str | None = None
        self.log = log
        self.started = trio.Event()
        self.stopped = trio.Event()

    async def run(self) -> None:
        self.log.append(f"run {self.gateway.platform}")
        self.started.set()
        try:
            await trio.sleep_forever()
        finally:
            self.log.append("cancelled")
            self.stopped.set()

    async def aclose(self) -> None:
        self.log.append("closed")


def _platform_module(tmp_path: Path) -> tuple[types.ModuleType, Path, list[Adapter], list[str]]:
    adapters: list[Adapter] = []
    log: list[str] = []
    module = types.ModuleType("elowen_test_chan_platform")

    @hookimpl
    def register_platforms(ctx: Any, register: Any) -> None:
        def factory(gateway: Any) -> Adapter:
            adapters.append(Adapter(gateway, log))
            return adapters[-1]

        register(Platform("testchat", factory))

    module.register_platforms = register_platforms  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    manifest = tmp_path / "testchat-plugin.toml"
    manifest.write_text(
        'name = "testchat"\nversion = "0.1.0"\napi = "1"\nentry = "elowen_test_chan_platform"\n'
        'description = "test platform"\n[contributes]\nplatforms = ["testchat"]\nhooks = ["register_platforms"]\n'
    )
    return module, manifest, adapters, log


@asynccontextmanager
async def platform_kernel(tmp_path: Path) -> AsyncIterator[tuple[Any, Any, list[Adapter], list[str]]]:
    module, manifest, adapters, log = _platform_module(tmp_path)
    try:
        async with plugin_kernel(tmp_path, enable=["brain", "inference", "testchat"], modules=[(module, manifest)]) as kernel:
            service = kernel.contributions.get("service", "brain").obj.obj
            yield kernel, service, adapters, log
    finally:
        sys.modules.pop(module.__name__, None)


async def _until(predicate: Any, timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


async def test_brain_runs_platform_adapters_and_stops_them_with_their_plugin(tmp_path: Path) -> None:
    async with platform_kernel(tmp_path) as (kernel, service, adapters, log):
        await _until(lambda: adapters and adapters[0].started.is_set())
        first = adapters[0]
        assert first.gateway.platform == "testchat" and not first.gateway.closed
        assert service.platforms.status() == [{"name": "testchat", "plugin": "testchat", "state": "running", "error": None, "detail": None}]
        first.configured, first.detail = False, "set the secret first"  # an adapter that cannot work says so
        assert service.platforms.status() == [
            {"name": "testchat", "plugin": "testchat", "state": "not_configured", "error": None, "detail": "set the secret first"}
        ]
        first.configured, first.detail = True, None
        assert CODE_RE.search((await first.gateway.turn("u1", "hi"))[0]), "the gateway runs channel turns"

        await kernel.registry.disable("testchat")
        with trio.fail_after(10):
            await first.stopped.wait()
        await _until(lambda: "closed" in log)
        assert first.gateway.closed and service.platforms.status() == []
        with pytest.raises(ChannelClosed):
            await first.gateway.turn("u1", "hi")

        await kernel.registry.enable("testchat")
        await _until(lambda: len(adapters) == 2 and adapters[1].started.is_set())
        assert adapters[1].gateway is not first.gateway and not adapters[1].gateway.closed

        # disabling the brain stops every adapter too
        await kernel.registry.disable("brain")
        with trio.fail_after(10):
            await adapters[1].stopped.wait()
        assert adapters[1].gateway.closed
        assert log == ["run testchat", "cancelled", "closed", "run testchat", "cancelled", "closed"]


async def test_brain_schema_upgrades_from_version_1(tmp_path: Path) -> None:
    db = tmp_path / "elowen-home" / "elowen.db"
    async with plugin_kernel(tmp_path, enable=["brain", "inference"]):
        pass
    store = Store(db)
    try:
        assert store.plugin_schema_version("brain") == 2
        store.execute("DROP TABLE brain_channel_links")
        store.execute("DROP TABLE brain_channel_codes")
        store.execute("UPDATE plugin_schemas SET version = 1 WHERE plugin = 'brain'")
    finally:
        store.close()
    async with plugin_kernel(tmp_path, enable=["brain", "inference"]) as kernel:
        assert kernel.store.plugin_schema_version("brain") == 2
        service = kernel.contributions.get("service", "brain").obj.obj
        code = service.channels.issue_code("chat", "ada")
        assert service.channels.confirm(code, 1)["platform_user"] == "ada"
        expires = kernel.store.query("SELECT expires_at FROM brain_channel_codes")
        assert expires == [], "the used code is gone"

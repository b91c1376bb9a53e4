"""The discord plugin end to end: the real discord.py client (on its own asyncio thread)
pointed at the scripted Discord server (tests/support/discord_server.py: real gateway opcodes
over a real WebSocket, the REST routes with Discord's rate-limit headers), a real kernel with
the brain, real SQLite, and the scripted model server."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from tests.support.discord_server import DiscordServer
from tests.support.model_server import Reply, ToolCall

from .conftest import CODE_RE, Env, platform_env, secret_file, until

ALICE = "400000000000000001"
MALLORY = "400000000000000666"
CHANNEL = "700000000000000001"
BETA_CHANNEL = "700000000000000002"
ROLE_ALPHA = "500000000000000001"
ROLE_BETA = "500000000000000002"


@asynccontextmanager
async def discord_env(
    tmp_path: Path, *, heartbeat_interval: int = 1000, enable_more: tuple[str, ...] = (), more_config: dict[str, dict[str, Any]] | None = None, **config: Any
) -> AsyncIterator[tuple[Env, DiscordServer]]:
    token = secret_file(tmp_path / "discord-token", "bot-token-123456")
    channels = {CHANNEL: "alpha", BETA_CHANNEL: "beta"}
    with DiscordServer(heartbeat_interval=heartbeat_interval, channels=channels, roles={ROLE_ALPHA: "alpha", ROLE_BETA: "beta"}) as server:
        cfg = {"token_file": str(token), "api_base": server.api_base, "gateway_url": server.gateway_url, "edit_interval": 0.3, **config}
        async with platform_env(tmp_path, "discord", cfg, enable_more=enable_more, more_config=more_config) as env:
            await until(lambda: env.platform("discord").get("state") == "connected", what="the bot connected")
            yield env, server


def replies_in(server: DiscordServer, channel: str) -> list[str]:
    return server.texts(channel)


async def link(env: Env, server: DiscordServer, author: str, user_id: int) -> None:
    """The opt-in pairing flow: a DM 'link' → a code in the DM → the Elowen user confirms it."""
    dm = "6" + author[1:]
    server.message(author, "link", dm=True)
    text = await until(lambda: next((t for t in replies_in(server, dm) if CODE_RE.search(t)), None), what="a link code in the DM")
    match = CODE_RE.search(text)
    assert match
    env.brain.link_channel(user_id, match.group(1))


async def test_mention_gets_a_streamed_reply_and_strangers_get_silence(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True) as (env, server):
        # strangers: a mention and a DM that is not a pairing request get nothing
        server.message(MALLORY, "run rm -rf / for me", mention=True)
        server.message(MALLORY, "hello?", dm=True)
        await until(lambda: env.adapter("discord").gate.silenced == 2, what="two strangers' messages counted")
        assert env.model.requests == [] and server.created() == [], "no turn, no answer for strangers"

        await link(env, server, ALICE, env.admin)
        assert env.adapter("discord").gate.pending == 1
        # two model rounds with a tool call between: the first words are shown (and the message
        # created) while the turn is still working; the rest arrives as edits
        env.script(
            Reply(text="Let me look at the project first.", tool_calls=[ToolCall("files_list", {"path": str(tmp_path / "alpha")})]),
            Reply(text="Streaming works: this reply arrives in pieces, edited into one Discord message."),
        )
        server.message(ALICE, "what is streaming?", mention=True)
        final = "Let me look at the project first.\n\nStreaming works: this reply arrives in pieces, edited into one Discord message."
        await until(lambda: final in replies_in(server, CHANNEL), what="the final reply")
        posts = server.created(CHANNEL)
        assert len(posts) == 1, "one message, edited in place"
        first = posts[0].json["content"]
        assert first and "Let me look at the project first.".startswith(first), f"the first visible text is (part of) the first round's: {first!r}"
        assert len(env.model.requests) == 2
        assert server.edits(), "the reply was completed by edits"
        assert server.limited == 0, "no request over Discord's rate limit"
        assert posts[0].json["allowed_mentions"] == {"parse": []}, "the bot's replies ping nobody"
        assert env.adapter("discord").first_token_times
        assert env.adapter("discord").gate.pending == 0, "a linked sender's code no longer counts"


async def test_strangers_stay_silent_when_pairing_is_off(tmp_path: Path) -> None:
    async with discord_env(tmp_path) as (env, server):
        server.message(MALLORY, "link", dm=True)
        server.message(MALLORY, "hi", mention=True)
        await until(lambda: env.adapter("discord").gate.silenced == 2, what="strangers counted")
        await trio.sleep(0.5)
        assert server.created() == [] and env.model.requests == []
        assert env.kernel.store.query("SELECT * FROM brain_channel_codes") == [], "no link code was issued"


async def test_bot_and_unaddressed_messages_are_ignored_and_replays_deduplicated(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True) as (env, server):
        await link(env, server, ALICE, env.admin)
        env.script(fallback=Reply(text="Answer once."))
        server.message(ALICE, "not for the bot")  # a guild message without a mention
        server.message("400000000000000777", "I am a bot", mention=True, bot=True)
        server.message(ALICE, "once please", mention=True, message_id="1200000000000000001")
        server.message(ALICE, "once please", mention=True, message_id="1200000000000000001")  # a replay
        await until(lambda: "Answer once." in replies_in(server, CHANNEL), what="the answer")
        await trio.sleep(0.5)
        assert replies_in(server, CHANNEL) == ["Answer once."]
        assert len(env.model.requests) == 1 and env.adapter("discord").recent.duplicates == 1
        # oversize and attachment-only messages get one sentence, no turn
        server.message(ALICE, "x" * 4001, mention=True)
        server.message(ALICE, "", mention=True, attachments=1)
        await until(lambda: len(replies_in(server, CHANNEL)) == 3, what="two refusals")
        assert "too long" in replies_in(server, CHANNEL)[1] and "only read text" in replies_in(server, CHANNEL)[2]
        assert len(env.model.requests) == 1


async def test_role_scope_is_the_union_of_roles_intersected_with_account_grants(tmp_path: Path) -> None:
    roles = {ROLE_ALPHA: {"projects": [1], "prompt": "Answer like the alpha team's helper."}, ROLE_BETA: {"projects": [2]}}  # alpha = 1, beta = 2
    bound = {CHANNEL: 1, BETA_CHANNEL: 2}
    async with discord_env(tmp_path, pairing=True, roles=roles, channel_projects=bound) as (env, server):
        assert (env.project_id, env.other_project_id) == (1, 2)
        await link(env, server, ALICE, env.member)  # mia: a member of project alpha only
        env.script(fallback=Reply(text="Working on alpha."))
        # beta role, beta channel: the role allows it but mia's account does not
        server.message(ALICE, "beta work", channel_id=BETA_CHANNEL, mention=True, role_ids=(ROLE_BETA,))
        await until(lambda: replies_in(server, BETA_CHANNEL), what="a refusal in the beta channel")
        assert "do not include project" in replies_in(server, BETA_CHANNEL)[0] or "no Elowen project" in replies_in(server, BETA_CHANNEL)[0]
        # no role at all: nothing in scope
        server.message(ALICE, "alpha work", mention=True)
        await until(lambda: replies_in(server, CHANNEL), what="a refusal without roles")
        assert replies_in(server, CHANNEL) == ["Your Discord roles give you no Elowen project here."]
        assert env.model.requests == [], "refused senders start no turn"
        # alpha role in the alpha channel: answered
        server.message(ALICE, "alpha work", mention=True, role_ids=(ROLE_ALPHA, ROLE_BETA))
        await until(lambda: "Working on alpha." in replies_in(server, CHANNEL), what="the answer in scope")
        system = json.dumps(env.model.requests[0].body["messages"][0])
        assert "Answer like the alpha team's helper." in system, "the role prompt joined the turn"
        assert env.adapter("discord").role_prompts == {}
        # the beta channel stays closed to mia even holding both roles
        server.message(ALICE, "beta again", channel_id=BETA_CHANNEL, mention=True, role_ids=(ROLE_ALPHA, ROLE_BETA))
        await until(lambda: len(replies_in(server, BETA_CHANNEL)) == 2, what="a second refusal")
        assert "project" in replies_in(server, BETA_CHANNEL)[1] and len(env.model.requests) == 1


async def test_a_deaf_connection_is_detected_and_resumed_within_the_watchdog_time(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True, heartbeat_interval=300, silence_timeout=1.5, restart_grace=4) as (env, server):
        await link(env, server, ALICE, env.admin)
        env.script(fallback=Reply(text="Back and listening."))
        identifies = server.identifies
        server.go_zombie()
        start = time.monotonic()
        server.message(ALICE, "are you there?", mention=True)  # held back while the connection is deaf
        adapter = env.adapter("discord")

        def after(state: str, since: float) -> float | None:
            return next((t for t, s in adapter.transitions if s == state and t > since), None)

        detected_at = await until(lambda: after("reconnecting", start), timeout=15, what="the watchdog noticed the silence")
        recovered_at = await until(lambda: after("connected", detected_at), timeout=20, what="the connection recovered")
        detected, recovered = detected_at - start, recovered_at - start
        await until(lambda: "Back and listening." in replies_in(server, CHANNEL), what="the held message answered")
        assert server.resumes >= 1 and server.identifies == identifies, "recovered by RESUME, same session"
        assert detected < 1.5 + 5, f"detected after {detected:.1f} s (watchdog 1.5 s)"
        assert recovered < 1.5 + 4 + 10, f"recovered after {recovered:.1f} s"
        assert env.audit("discord.watchdog")[0]["outcome"] == "resume"
        assert env.adapter("discord").restarts == 1


async def test_reconnect_opcode_resumes_the_session(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True) as (env, server):
        await link(env, server, ALICE, env.admin)
        env.script(fallback=Reply(text="Still here."))
        server.send_reconnect()
        await until(lambda: server.resumes == 1, what="a RESUME")
        server.message(ALICE, "after the reconnect", mention=True)
        await until(lambda: "Still here." in replies_in(server, CHANNEL), what="an answer after RESUME")
        assert server.identifies == 1


async def test_approval_asked_on_discord_is_answered_from_discord(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True) as (env, server):
        await link(env, server, ALICE, env.admin)
        target = tmp_path / "alpha" / "made.txt"  # alpha: the admin's first project, the turn's home
        env.script(Reply(text="Let me run that.", tool_calls=[ToolCall("terminal_run", {"command": "echo hello > made.txt"})]), Reply(text="Written."))
        server.message(ALICE, "write a note", mention=True)
        prompt = await until(lambda: next((t for t in replies_in(server, CHANNEL) if "/allow" in t), None), what="an approval prompt")
        pid = prompt.split("Approval #", 1)[1].split(" ", 1)[0]
        assert not target.exists()
        server.message(ALICE, f"/allow {pid}", mention=True)
        await until(lambda: any("Written." in t for t in replies_in(server, CHANNEL)), what="the turn went on after /allow")
        assert target.read_text() == "hello\n"


async def test_without_a_token_file_the_platform_is_not_configured(tmp_path: Path) -> None:
    with DiscordServer() as server:
        missing = {"token_file": str(tmp_path / "nope"), "api_base": server.api_base, "gateway_url": server.gateway_url}
        async with platform_env(tmp_path, "discord", missing) as env:
            status = await until(lambda: env.platform("discord").get("state") == "not_configured" and env.platform("discord"), what="not_configured")
            assert "does not exist" in status["detail"]
            assert server.rest == [], "no login attempt without a token"
    loose = tmp_path / "loose"
    loose.mkdir()
    token = loose / "token"
    token.write_text("bot-token-123456")
    token.chmod(0o644)
    async with platform_env(loose, "discord", {"token_file": str(token)}) as env:
        status = await until(lambda: env.platform("discord").get("state") == "not_configured" and env.platform("discord"), what="not_configured")
        assert "chmod 600" in status["detail"] and "bot-token" not in status["detail"]


async def test_a_refused_token_shows_error_and_is_audited(tmp_path: Path) -> None:
    with DiscordServer() as server:
        server.refuse_token = True
        token = secret_file(tmp_path / "token", "bad-token-000000")
        cfg = {"token_file": str(token), "api_base": server.api_base, "gateway_url": server.gateway_url}
        async with platform_env(tmp_path, "discord", cfg) as env:
            status = await until(lambda: env.platform("discord").get("state") == "error" and env.platform("discord"), what="error state")
            assert "LoginFailure" in status["detail"] and "bad-token" not in status["detail"]
            assert env.audit("discord.client")[0]["outcome"] == "error"


async def test_disabling_the_plugin_stops_the_client_and_its_thread(tmp_path: Path) -> None:
    async with discord_env(tmp_path) as (env, server):
        adapter = env.adapter("discord")
        thread = adapter._thread
        assert thread is not None and thread.alive
        with trio.fail_after(30):
            await env.kernel.registry.disable("discord")
        await until(lambda: not thread.alive and not server.connected, what="the client thread and its connection gone")
        assert env.platform("discord") == {}
        with trio.fail_after(30):
            await env.kernel.registry.enable("discord")
        await until(lambda: env.platform("discord").get("state") == "connected", what="connected again")
        assert server.identifies == 2


async def test_an_escalation_is_notified_by_dm_and_approved_from_discord(tmp_path: Path) -> None:
    token = secret_file(tmp_path / "discord-token", "bot-token-123456")
    with DiscordServer() as server:
        cfg = {"token_file": str(token), "api_base": server.api_base, "gateway_url": server.gateway_url, "pairing": True, "edit_interval": 0.3}
        async with platform_env(tmp_path, "discord", cfg, enable_more=["notify"], more_config={"notify": {"wait_grace": 0.2, "web_push": False}}) as env:
            await until(lambda: env.platform("discord").get("state") == "connected", what="connected")
            await link(env, server, ALICE, env.admin)
            target = tmp_path / "alpha" / "web.txt"
            env.script(Reply(tool_calls=[ToolCall("terminal_run", {"command": "echo from-web > web.txt"})]), Reply(text="Done on the web."))
            # a turn on the web waits for approval; nobody answers there
            events = env.brain.stream(env.admin, None, "make a file", driver=False)
            async with trio.open_nursery() as nursery:

                async def drain() -> None:
                    async for _ in events:
                        pass

                nursery.start_soon(drain)
                dm = "6" + ALICE[1:]
                note = await until(lambda: next((t for t in server.texts(dm) if "/allow" in t), None), what="the escalation DM")
                pid = note.split("/allow ", 1)[1].split("`", 1)[0]
                assert not target.exists()
                server.message(ALICE, f"approve {pid}", dm=True)  # the plain word works like /allow
                await until(target.exists, what="the approved command ran")
                nursery.cancel_scope.cancel()
            assert target.read_text() == "from-web\n"
            await until(lambda: any(f"Allowed #{pid}." in t for t in server.texts(dm)), what="the acknowledgement in the DM")


async def test_one_senders_messages_are_answered_in_the_order_they_arrived(tmp_path: Path) -> None:
    """A burst of eight mentions from one sender: the brain gets them one turn at a time in the
    order Discord sent them (a task per message waiting on a lock would not keep it: trio runs
    each batch of runnable tasks in a random order); the sender's queue is gone afterwards."""
    async with discord_env(tmp_path, pairing=True) as (env, server):
        await link(env, server, ALICE, env.admin)
        env.script(fallback=Reply(text="noted"))
        texts = [f"message number {i}" for i in range(8)]
        for text in texts:
            server.message(ALICE, text, mention=True)
        await until(lambda: len(env.model.requests) == len(texts), what="a turn per message")
        assert [r.prompt for r in env.model.requests] == texts
        await until(lambda: not len(env.adapter("discord")._senders), what="the sender's queue dropped")

"""The admin-only server-management brain tools of the discord plugin end to end: turns run
from Discord (the real discord.py client against the scripted Discord server), the scripted
model calls ``discord.list_channels`` / ``discord.create_thread`` / ``discord.pin_message``, and
the scripted server records the REST calls discord.py made for them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.discord_server import GUILD_ID
from tests.support.model_server import Reply, ToolCall

from .conftest import until
from .test_discord import ALICE, CHANNEL, discord_env, link, replies_in


def results_of(env, tool_call_round: int) -> str:  # type: ignore[no-untyped-def]
    """The tool results the model was sent in request ``tool_call_round`` (0-based)."""
    return json.dumps([r.output for r in env.model.requests[tool_call_round].tool_results])


async def test_an_admin_turn_lists_channels_creates_a_thread_and_pins(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True) as (env, server):
        await link(env, server, ALICE, env.admin)
        env.script(
            Reply(text="Looking.", tool_calls=[ToolCall("discord_list_channels", {})]),
            Reply(text="Making it.", tool_calls=[ToolCall("discord_create_thread", {"channel_id": CHANNEL, "name": "Release plan"})]),
            Reply(text="Thread made."),
        )
        server.message(ALICE, "open a release thread in alpha", mention=True)
        prompt = await until(lambda: next((t for t in replies_in(server, CHANNEL) if "/allow" in t), None), what="an approval prompt")
        assert "create_thread" in prompt
        listed = [c for c in server.rest if c.method == "GET" and c.path == f"/guilds/{GUILD_ID}/channels"]
        assert len(listed) == 1, "the channel list came from Discord's REST API"
        assert '\\"name\\": \\"alpha\\"' in results_of(env, 1) and CHANNEL in results_of(env, 1)
        assert server.threads == [], "nothing made before the approval"
        pid = prompt.split("Approval #", 1)[1].split(" ", 1)[0]
        server.message(ALICE, f"/allow {pid}", mention=True)
        await until(lambda: any("Thread made." in t for t in replies_in(server, CHANNEL)), what="the turn finished")
        assert [(t["name"], t["parent_id"], t["type"]) for t in server.threads] == [("Release plan", CHANNEL, 11)]
        made = [c for c in server.rest if c.method == "POST" and c.path == f"/channels/{CHANNEL}/threads"]
        assert made and made[0].json["name"] == "Release plan" and made[0].json["type"] == 11
        assert server.threads[0]["id"] in results_of(env, 2)

        # pin (approved at once from Discord as well)
        env.script(Reply(tool_calls=[ToolCall("discord_pin_message", {"channel_id": CHANNEL, "message_id": "1234567890123"})]), Reply(text="Pinned."))
        server.message(ALICE, "pin that", mention=True)
        prompt = await until(lambda: next((t for t in replies_in(server, CHANNEL)[-3:] if "/allow" in t and "pin" in t), None), what="the pin approval")
        pid = prompt.split("Approval #", 1)[1].split(" ", 1)[0]
        server.message(ALICE, f"/allow {pid}", mention=True)
        await until(lambda: server.pins, what="the pin")
        assert server.pins == [(CHANNEL, "1234567890123")]
        env.kernel.store.flush_audit()
        rows = env.kernel.store.query("SELECT actor, outcome FROM audit WHERE action = 'discord.tool' ORDER BY id")
        assert [(r["actor"], r["outcome"]) for r in rows] == [(f"user:{env.admin}", "ok")] * 2


async def test_a_member_turn_is_refused_and_touches_nothing(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True) as (env, server):
        await link(env, server, ALICE, env.member)
        forged = {"_caller": f"{env.admin}:" + "0" * 64}  # the hook's stamp replaces a model's own
        env.script(
            Reply(tool_calls=[ToolCall("discord_list_channels", forged)]),
            Reply(tool_calls=[ToolCall("discord_create_thread", {"channel_id": CHANNEL, "name": "x", **forged})]),
            Reply(text="I may not."),
        )
        server.message(ALICE, "list the channels and open a thread", mention=True)
        # the thread needs approval first; even approved, a member's call is refused
        prompt = await until(lambda: next((t for t in replies_in(server, CHANNEL) if "/allow" in t), None), what="an approval prompt")
        assert "admins only" in results_of(env, 1)
        pid = prompt.split("Approval #", 1)[1].split(" ", 1)[0]
        server.message(ALICE, f"/allow {pid}", mention=True)
        await until(lambda: any("I may not." in t for t in replies_in(server, CHANNEL)), what="the final reply")
        assert "admins only" in json.loads(results_of(env, 2))[-1]
        assert not [c for c in server.rest if c.path.startswith("/guilds/") or c.path.endswith("/threads")], "no management REST call"
        assert server.threads == []
        assert env.audit("discord.tool")[0]["outcome"] == "denied"

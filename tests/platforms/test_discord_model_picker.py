"""The ``/model`` slash command end to end: the real discord.py client registers it on READY
(``PUT /applications/{id}/commands`` at the scripted Discord server), the server delivers
INTERACTION_CREATE (the command and its autocomplete), and the bot's interaction callbacks are
recorded; the scripted model server records which model the next turn asked for."""

from __future__ import annotations

from pathlib import Path

from tests.support.discord_server import DiscordServer
from tests.support.model_server import Reply

from .conftest import until
from .test_discord import ALICE, CHANNEL, MALLORY, discord_env, link, replies_in

BOB = "400000000000000002"
MODELS = ["fake/test-model", "fake/small", "nosuch/x"]  # nosuch: no such provider, never offered


def callback(server: DiscordServer, iid: str) -> dict:
    calls = server.callbacks(iid)
    assert len(calls) == 1, f"one answer per interaction, got {len(calls)}"
    return calls[0].json


async def test_model_picker_lists_allowed_models_and_sets_the_channel_model(tmp_path: Path) -> None:
    async with discord_env(tmp_path, pairing=True, models=MODELS, admin_models=["fake/big"]) as (env, server):
        await until(lambda: server.commands, what="the /model command registered")
        assert [c["name"] for c in server.commands] == ["model"]
        assert server.commands[0]["options"][0]["autocomplete"] is True
        await link(env, server, ALICE, env.member)
        await link(env, server, BOB, env.admin)

        # autocomplete: a member sees the shared models; the admin also sees the admin-only one
        iid = server.interaction(ALICE, "model", {"model": ""}, focused="model")
        await until(lambda: server.callbacks(iid), what="the member's autocomplete answer")
        body = callback(server, iid)
        assert body["type"] == 8
        assert [c["value"] for c in body["data"]["choices"]] == ["fake/test-model", "fake/small"]
        iid = server.interaction(BOB, "model", {"model": "b"}, focused="model")
        await until(lambda: server.callbacks(iid), what="the admin's autocomplete answer")
        assert [c["value"] for c in callback(server, iid)["data"]["choices"]] == ["fake/big"]

        # the bare command lists them (ephemeral: flags 64)
        iid = server.interaction(ALICE, "model")
        await until(lambda: server.callbacks(iid), what="the listing")
        body = callback(server, iid)
        assert body["type"] == 4 and body["data"]["flags"] == 64
        assert "`fake/small`" in body["data"]["content"] and "fake/big" not in body["data"]["content"]

        # a member may not pick the admin-only model
        iid = server.interaction(ALICE, "model", {"model": "fake/big"})
        await until(lambda: server.callbacks(iid), what="the refusal")
        assert "not a model you may use" in callback(server, iid)["data"]["content"]
        assert env.adapter("discord").channel_models == {}

        # picking an allowed one changes the model of the next reply in that channel
        env.script(fallback=Reply(text="Answered by small."))
        iid = server.interaction(ALICE, "model", {"model": "fake/small"})
        await until(lambda: server.callbacks(iid), what="the confirmation")
        assert "now uses `fake/small`" in callback(server, iid)["data"]["content"]
        server.message(ALICE, "which model are you?", mention=True)
        await until(lambda: "Answered by small." in replies_in(server, CHANNEL), what="the reply")
        assert [r.body["model"] for r in env.model.requests if r.body.get("tools")] == ["small"]
        assert env.audit("discord.model")[0]["outcome"] == "ok"

        # `/model default` really puts the conversation back on the default model
        iid = server.interaction(ALICE, "model", {"model": "default"})
        await until(lambda: server.callbacks(iid), what="the reset")
        env.script(fallback=Reply(text="Answered by the default."))
        server.message(ALICE, "and now?", mention=True)
        await until(lambda: "Answered by the default." in replies_in(server, CHANNEL), what="the reply on the default")
        assert [r.body["model"] for r in env.model.requests if r.body.get("tools")] == ["small", "test-model"]

        # a choice taken off the list is not used any more, though it was stored
        iid = server.interaction(ALICE, "model", {"model": "fake/small"})
        await until(lambda: server.callbacks(iid), what="the second choice")
        adapter = env.adapter("discord")
        adapter.config = {**adapter.config, "models": ["fake/test-model"]}
        env.script(fallback=Reply(text="Answered after the list changed."))
        server.message(ALICE, "still small?", mention=True)
        await until(lambda: "Answered after the list changed." in replies_in(server, CHANNEL), what="the reply after the change")
        assert [r.body["model"] for r in env.model.requests if r.body.get("tools")][-1] == "test-model"


async def test_an_unlinked_user_is_refused_ephemerally(tmp_path: Path) -> None:
    async with discord_env(tmp_path, models=MODELS) as (env, server):
        await until(lambda: server.commands, what="the /model command registered")
        iid = server.interaction(MALLORY, "model", {"model": "fake/small"})
        await until(lambda: server.callbacks(iid), what="the refusal")
        body = callback(server, iid)
        assert body["type"] == 4 and body["data"]["flags"] == 64, "only the stranger sees it"
        assert "not linked" in body["data"]["content"]
        iid = server.interaction(MALLORY, "model", {"model": ""}, focused="model")
        await until(lambda: server.callbacks(iid), what="the empty autocomplete")
        assert callback(server, iid)["data"]["choices"] == []
        assert env.model.requests == [] and env.adapter("discord").channel_models == {}
        assert server.created() == [], "nothing posted in the channel"

"""``/model`` under the rules a message has: the role/channel scope refuses it (ephemerally,
nothing stored), one sender's interactions are answered one at a time through the adapter's
per-sender locks, and an interaction whose handling fails is not kept pending. The real
discord.py client against the scripted Discord server (INTERACTION_CREATE in, the callbacks
recorded at ``POST /interactions/{id}/{token}/callback``), a real kernel and SQLite."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.support.discord_server import DiscordServer

from .conftest import until
from .test_discord import ALICE, BETA_CHANNEL, CHANNEL, ROLE_ALPHA, ROLE_BETA, discord_env, link
from .test_discord_model_picker import BOB, MODELS, callback


async def ask(server: DiscordServer, *args: Any, **kwargs: Any) -> dict:
    """Run ``server.interaction(*args, **kwargs)`` and return the bot's one answer (its JSON)."""
    iid = server.interaction(*args, **kwargs)
    await until(lambda: server.callbacks(iid), what=f"the answer to {args}, {kwargs}")
    return callback(server, iid)


def refused(body: dict, reason: str) -> bool:
    return body["type"] == 4 and body["data"]["flags"] == 64 and reason in body["data"]["content"]


async def test_model_outside_the_role_scope_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    roles = {ROLE_ALPHA: {"projects": [1]}, ROLE_BETA: {"projects": [2]}}  # alpha = 1, beta = 2
    bound = {CHANNEL: 1, BETA_CHANNEL: 2}
    async with discord_env(tmp_path, pairing=True, models=MODELS, roles=roles, channel_projects=bound) as (env, server):
        await until(lambda: server.commands, what="the /model command registered")
        await link(env, server, ALICE, env.member)  # mia: a member of project alpha only
        adapter = env.adapter("discord")

        # no role at all: the listing and a choice are refused, autocomplete offers nothing
        no_role = "Your Discord roles give you no Elowen project here."
        assert refused(await ask(server, ALICE, "model"), no_role)
        assert refused(await ask(server, ALICE, "model", {"model": "fake/small"}), no_role)
        assert (await ask(server, ALICE, "model", {"model": ""}, focused="model"))["data"]["choices"] == []
        # the alpha role in the channel bound to beta: refused by the channel
        body = await ask(server, ALICE, "model", {"model": "fake/small"}, channel_id=BETA_CHANNEL, role_ids=(ROLE_ALPHA,))
        assert refused(body, "do not include project 2"), body
        # the beta role: the role allows beta, mia's account does not
        body = await ask(server, ALICE, "model", {"model": "fake/small"}, channel_id=BETA_CHANNEL, role_ids=(ROLE_BETA,))
        assert refused(body, no_role), body
        # a DM carries no roles: only Elowen admins are answered there
        assert refused(await ask(server, ALICE, "model", {"model": "fake/small"}, dm=True), "Direct messages are for Elowen admins")
        assert adapter.channel_models == {} and not adapter.models_path.exists()
        assert env.audit("discord.model") == []

        # the alpha role in the alpha channel: in scope, the choice is stored
        body = await ask(server, ALICE, "model", {"model": "fake/small"}, role_ids=(ROLE_ALPHA,))
        assert "now uses `fake/small`" in body["data"]["content"], body
        stored = {f"{CHANNEL}:{ALICE}": "fake/small"}
        assert adapter.channel_models == stored
        # without the role again, even `/model default` is refused and the choice stays
        assert refused(await ask(server, ALICE, "model", {"model": "default"}), no_role)
        assert adapter.channel_models == stored and json.loads(adapter.models_path.read_text()) == stored
        assert len(env.audit("discord.model")) == 1
        assert server.created(CHANNEL) == [] and server.created(BETA_CHANNEL) == [], "refusals are ephemeral, nothing is posted"
        assert env.model.requests == []


async def test_model_in_a_channel_bound_to_a_project_outside_the_account_is_refused(tmp_path: Path) -> None:
    """No role map, one channel bound to beta: mia (alpha only) may not choose there."""
    async with discord_env(tmp_path, pairing=True, models=MODELS, channel_projects={BETA_CHANNEL: 2}) as (env, server):
        await until(lambda: server.commands, what="the /model command registered")
        await link(env, server, ALICE, env.member)
        adapter = env.adapter("discord")
        body = await ask(server, ALICE, "model", {"model": "fake/small"}, channel_id=BETA_CHANNEL)
        assert refused(body, "Your Elowen account has no access to project 2"), body
        assert (await ask(server, ALICE, "model", {"model": "f"}, channel_id=BETA_CHANNEL, focused="model"))["data"]["choices"] == []
        assert adapter.channel_models == {}
        # the unbound channel is fine
        body = await ask(server, ALICE, "model", {"model": "fake/small"})
        assert "now uses `fake/small`" in body["data"]["content"], body
        assert adapter.channel_models == {f"{CHANNEL}:{ALICE}": "fake/small"}


async def test_one_senders_model_commands_are_answered_one_at_a_time(tmp_path: Path) -> None:
    """A burst of ``/model`` from one sender: each answer is sent only once the previous one
    was (every REST answer is slowed to ``DELAY``), in the order they were sent, so the
    callbacks reach Discord ``DELAY`` apart; another sender's answer is not held up behind them."""
    delay = 0.4
    async with discord_env(tmp_path, pairing=True, models=MODELS) as (env, server):
        await until(lambda: server.commands, what="the /model command registered")
        await link(env, server, ALICE, env.member)
        await link(env, server, BOB, env.admin)
        adapter = env.adapter("discord")
        server.rest_delay = delay
        burst = [server.interaction(ALICE, "model", {"model": m}) for m in ("fake/small", "fake/test-model", "fake/small", "", "fake/test-model")]
        other = server.interaction(BOB, "model", {"model": "fake/small"})
        await until(lambda: all(server.callbacks(i) for i in [*burst, other]), what="every interaction answered")
        for iid in [*burst, other]:
            assert callback(server, iid)["type"] == 4
        arrivals = [server.callbacks(i)[0].at for i in burst]
        assert arrivals == sorted(arrivals), "one sender's commands are answered in the order they were sent"
        gaps = [round(b - a, 3) for a, b in zip(arrivals, arrivals[1:])]
        assert min(gaps) >= delay * 0.9, f"answers to one sender overlapped: gaps {gaps} s"
        assert server.callbacks(other)[0].at < arrivals[1], "another sender waited behind the burst"
        # each choice was applied, in order: the last one stands
        assert adapter.channel_models == {f"{CHANNEL}:{BOB}": "fake/small", f"{CHANNEL}:{ALICE}": "fake/test-model"}
        assert len(env.audit("discord.model")) == 5, "four choices in the burst (one was the listing) and the other sender's"
        await until(lambda: not len(adapter._interacting), timeout=5, what="the per-sender queues dropped")
        assert adapter.pending_interactions == 0


async def test_a_failing_interaction_is_not_kept_pending(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A real fault while handling ``/model``: the brain's link table is renamed away, so looking
    the sender up raises (SQLite: no such table) before any answer. The bot must forget the
    interaction anyway; once the table is back, the next one is answered and forgotten too."""
    async with discord_env(tmp_path, pairing=True, models=MODELS) as (env, server):
        await until(lambda: server.commands, what="the /model command registered")
        await link(env, server, ALICE, env.member)
        adapter = env.adapter("discord")
        env.kernel.store.execute("ALTER TABLE brain_channel_links RENAME TO brain_channel_links_away")
        try:
            with caplog.at_level(logging.ERROR, logger="elowen.plugin.discord"):
                failing = [server.interaction(ALICE, "model", {"model": "fake/small"}), server.interaction(ALICE, "model", {"model": "f"}, focused="model")]
                logged = lambda: {i for i in failing for r in caplog.records if r.exc_info and i in r.getMessage()}  # noqa: E731
                await until(lambda: logged() == set(failing), what="both interactions failed")
            assert all("brain_channel_links" in str(r.exc_info[1]) for r in caplog.records if r.exc_info), [r.getMessage() for r in caplog.records]
            await until(lambda: adapter.pending_interactions == 0, timeout=5, what="the failed interactions forgotten")
            assert all(server.callbacks(iid) == [] for iid in failing)
        finally:
            env.kernel.store.execute("ALTER TABLE brain_channel_links_away RENAME TO brain_channel_links")
        body = await ask(server, ALICE, "model", {"model": "fake/small"})
        assert "now uses `fake/small`" in body["data"]["content"], body
        await until(lambda: adapter.pending_interactions == 0, timeout=5, what="the answered interaction forgotten")
        assert adapter.channel_models == {f"{CHANNEL}:{ALICE}": "fake/small"}

"""The Discord role map must narrow what the turn itself can reach, not only who gets an
answer. mia (a member of alpha AND beta) holds only the alpha role (alpha = project 1) and
writes in the alpha channel: her effective scope is {alpha}. The adapter passes that set to
``gateway.turn(..., projects=)``; the brain builds the turn's tool environment (project list,
path guard, ``tasks.create``), the hook's ``ToolCall.projects`` and any sub-agent from it.
The narrowing is for that turn only: the web's next turn on the same conversation has every
project of the account again."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.model_server import Reply, ToolCall

from .conftest import until
from .test_discord import ALICE, CHANNEL, ROLE_ALPHA, discord_env, link, replies_in


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "beta" / "plans.txt"
    secret.write_text("beta's unreleased plans\n")
    (tmp_path / "alpha" / "notes.txt").write_text("alpha's public notes\n")
    return secret


async def test_a_turn_in_an_alpha_scope_cannot_read_beta(tmp_path: Path) -> None:
    roles = {ROLE_ALPHA: {"projects": [1]}}
    async with discord_env(tmp_path, pairing=True, roles=roles, channel_projects={CHANNEL: 1}) as (env, server):
        env.kernel.store.execute("INSERT INTO user_projects (user_id, project_id) VALUES (?, ?)", (env.member, env.other_project_id))
        secret = _secret(tmp_path)
        await link(env, server, ALICE, env.member)
        script = env.script(
            Reply(text="Reading.", tool_calls=[ToolCall("files_read", {"path": str(secret)}), ToolCall("files_read", {"path": "notes.txt"})]),
            Reply(text="Done."),
        )
        server.message(ALICE, "what is in the plans?", mention=True, role_ids=(ROLE_ALPHA,))
        await until(lambda: any("Done." in t for t in replies_in(server, CHANNEL)), what="the turn ended")
        tool_results = " ".join(str(r.tool_results) for r in script.seen)
        assert "unreleased plans" not in tool_results, "a turn scoped to alpha read a file of beta"
        assert "public notes" in tool_results, "the alpha file stays readable in the alpha scope"
        system = json.dumps(script.seen[0].body["messages"][0])
        assert str(tmp_path / "alpha") in system and str(tmp_path / "beta") not in system, "the prompt lists only the projects in scope"

        # the same conversation from the web (no platform scope): every project of the account
        web = env.script(Reply(text="Reading.", tool_calls=[ToolCall("files_read", {"path": str(secret)})]), Reply(text="Web done."))
        await env.brain.turn(env.member, None, "and from the web?")
        assert "unreleased plans" in " ".join(str(r.tool_results) for r in web.seen), "the narrowing stuck to the conversation"


async def test_a_sub_agent_of_a_narrowed_turn_keeps_the_narrowing(tmp_path: Path) -> None:
    roles = {ROLE_ALPHA: {"projects": [1]}}
    async with discord_env(tmp_path, pairing=True, roles=roles, channel_projects={CHANNEL: 1}, enable_more=("subagent",)) as (env, server):
        assert env.kernel.registry.get("subagent").state == "enabled", env.kernel.registry.describe("subagent")["error"]
        env.kernel.store.execute("INSERT INTO user_projects (user_id, project_id) VALUES (?, ?)", (env.member, env.other_project_id))
        secret = _secret(tmp_path)
        await link(env, server, ALICE, env.member)
        script = env.script(
            Reply(text="Delegating.", tool_calls=[ToolCall("delegate", {"task": f"Read the file {secret} and report what it says."})]),
            Reply(text="Reading.", tool_calls=[ToolCall("files_read", {"path": str(secret)})]),  # the sub-agent
            Reply(text="The file could not be read."),  # the sub-agent's answer
            Reply(text="Done."),
        )
        server.message(ALICE, "delegate reading the plans", mention=True, role_ids=(ROLE_ALPHA,))
        await until(lambda: any("Done." in t for t in replies_in(server, CHANNEL)), what="the turn ended")
        tool_results = " ".join(str(r.tool_results) for r in script.seen)
        run = env.kernel.store.query_one("SELECT state, conversation_id FROM subagent_runs")
        assert run is not None and run["conversation_id"] is not None, "the sub-agent ran"
        child = " ".join(str(r.tool_results) for r in script.seen[1:3])
        assert "outside the roots" in child, "the sub-agent's read of beta was refused by its path guard"
        assert "unreleased plans" not in tool_results, "a sub-agent of an alpha-scoped turn read a file of beta"


async def test_a_narrowed_turn_cannot_schedule_a_prompt(tmp_path: Path) -> None:
    """A scheduled prompt runs later with every project of the account, so a turn narrowed by
    roles may not create one (``cron.add`` sees ``ToolCall.projects`` through its hook)."""
    roles = {ROLE_ALPHA: {"projects": [1]}}
    async with discord_env(tmp_path, pairing=True, roles=roles, channel_projects={CHANNEL: 1}, enable_more=("cron",)) as (env, server):
        assert env.kernel.registry.get("cron").state == "enabled", env.kernel.registry.describe("cron")["error"]
        await link(env, server, ALICE, env.member)
        env.brain.set_yolo_default(env.member, True)  # no approval round: the handler itself must refuse
        script = env.script(
            Reply(text="Scheduling.", tool_calls=[ToolCall("cron_add", {"schedule": "in 20m", "prompt": "read every project's plans"})]),
            Reply(text="Done."),
        )
        server.message(ALICE, "remind me in 20 minutes", mention=True, role_ids=(ROLE_ALPHA,))
        await until(lambda: any("Done." in t for t in replies_in(server, CHANNEL)), what="the turn ended")
        assert "scheduling is not available in this chat" in " ".join(str(r.tool_results) for r in script.seen)
        assert env.kernel.store.query("SELECT id FROM cron_jobs") == [], "a narrowed turn scheduled a prompt"


async def test_a_narrowed_turn_recalls_and_finds_no_memory_of_another_project(tmp_path: Path) -> None:
    roles = {ROLE_ALPHA: {"projects": [1]}}
    more = {"memory": {"embedding_provider": "none"}}
    async with discord_env(tmp_path, pairing=True, roles=roles, channel_projects={CHANNEL: 1}, enable_more=("memory",), more_config=more) as (env, server):
        assert env.kernel.registry.get("memory").state == "enabled", env.kernel.registry.describe("memory")["error"]
        env.kernel.store.execute("INSERT INTO user_projects (user_id, project_id) VALUES (?, ?)", (env.member, env.other_project_id))
        memory = env.kernel.contributions.get("service", "memory").obj.obj
        memory.add(env.member, "The codename of the beta launch is Falcon.", project_id=env.other_project_id)
        memory.add(env.member, "The codename of the alpha release is Heron.", project_id=env.project_id)
        await link(env, server, ALICE, env.member)
        script = env.script(Reply(text="Searching.", tool_calls=[ToolCall("memory_search", {"query": "codename"})]), Reply(text="Done."))
        server.message(ALICE, "which codename?", mention=True, role_ids=(ROLE_ALPHA,))
        await until(lambda: any("Done." in t for t in replies_in(server, CHANNEL)), what="the turn ended")
        system = json.dumps(script.seen[0].body["messages"][0])
        found = " ".join(str(r.tool_results) for r in script.seen)
        assert "Heron" in system and "Heron" in found, "the alpha memory is recalled and found"
        assert "Falcon" not in system, "a turn scoped to alpha recalled a memory of beta"
        assert "Falcon" not in found, "a turn scoped to alpha found a memory of beta"


async def test_the_terminal_asks_in_a_narrowed_turn_even_with_yolo(tmp_path: Path) -> None:
    """A shell command can read past the narrowed path guard, so YOLO does not run it."""
    roles = {ROLE_ALPHA: {"projects": [1]}}
    async with discord_env(tmp_path, pairing=True, roles=roles, channel_projects={CHANNEL: 1}) as (env, server):
        env.kernel.store.execute("INSERT INTO user_projects (user_id, project_id) VALUES (?, ?)", (env.member, env.other_project_id))
        secret = _secret(tmp_path)
        await link(env, server, ALICE, env.member)
        env.brain.set_yolo_default(env.member, True)
        script = env.script(Reply(text="Looking.", tool_calls=[ToolCall("terminal_run", {"command": f"cat {secret}"})]), Reply(text="Done."))
        server.message(ALICE, "show me the plans", mention=True, role_ids=(ROLE_ALPHA,))
        await until(lambda: any("Approval #" in t for t in replies_in(server, CHANNEL)), what="an approval prompt in the channel")
        assert "unreleased plans" not in " ".join(str(r.tool_results) for r in script.seen), "the command ran without asking"

"""The ``/remember`` and ``/forget`` chat commands: a real kernel with the brain and the memory
plugin (real SQLite file, no embedding provider: keyword recall), through the brain's stream
as every surface sends them; each acts on the conversation's user only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import brain_kernel

NO_VECTORS = {"memory": {"embedding_provider": "none"}}


async def _reply(env: Any, user: int, cid: int, text: str) -> str:
    out = []
    async for item in env.service.stream(user, cid, text):
        if item["type"] in ("brain.command", "brain.error"):
            out.append(item.get("text") or item.get("message"))
        if item["type"] == "brain.done":
            break
    assert len(out) == 1, out
    return str(out[0])


def _memory(env: Any) -> Any:
    return env.kernel.contributions.get("service", "memory").obj.obj


async def test_remember_saves_a_manual_memory_of_the_user(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, enable_more=["memory"], plugin_config=NO_VECTORS) as env:
        cid = env.conversation()["id"]
        reply = await _reply(env, env.admin, cid, "/remember my staging server is stg-2")
        assert reply.startswith("Remembered (memory ") and reply.endswith(": my staging server is stg-2")
        saved = await _memory(env).memories(env.admin)
        assert [(m.text, m.source, m.provenance) for m in saved] == [("my staging server is stg-2", "manual", "owner")]
        row = env.kernel.store.query_one("SELECT conversation_id FROM memory_items WHERE id = ?", (saved[0].id,))
        assert row["conversation_id"] == str(cid)
        assert await _memory(env).memories(env.member) == []  # the other user has none
        assert (await _reply(env, env.admin, cid, "/remember   ")).startswith("Usage: /remember")
        assert (await _reply(env, env.admin, cid, "/remember " + "x" * 5000)).startswith("Not remembered: text: 5000 characters")
        assert "/remember <text>" in await _reply(env, env.admin, cid, "/help")


async def test_forget_by_id_and_by_text_touches_only_the_users_memories(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path, enable_more=["memory"], plugin_config=NO_VECTORS) as env:
        memory = _memory(env)
        staging = await memory.remember(env.admin, "My staging server is stg-2")
        await memory.remember(env.admin, "The staging database is pg-7")
        pytest_pref = await memory.remember(env.admin, "I prefer pytest over unittest")
        theirs = await memory.remember(env.member, "My staging server is stg-9")
        cid = env.conversation()["id"]

        # another user's id is answered like a missing one, and stays current
        assert await _reply(env, env.admin, cid, f"/forget {theirs.id}") == f"No current memory {theirs.id} of yours."
        assert [m.id for m in await memory.memories(env.member)] == [theirs.id]

        assert await _reply(env, env.admin, cid, f"/forget {pytest_pref.id}") == f"Forgotten memory {pytest_pref.id} (its text stays in its history)."
        assert await _reply(env, env.admin, cid, f"/forget {pytest_pref.id}") == f"No current memory {pytest_pref.id} of yours."
        assert [m.text for m in await memory.history(env.admin, pytest_pref.id)] == ["I prefer pytest over unittest"]

        # text that two memories contain: listed, nothing forgotten
        several = await _reply(env, env.admin, cid, "/forget staging")
        assert several.startswith("Several memories contain that, nothing forgotten:") and f"  {staging.id}: " in several
        assert len(await memory.memories(env.admin)) == 2
        # text one memory contains: that one goes
        assert await _reply(env, env.admin, cid, "/forget  my STAGING server") == f"Forgotten memory {staging.id}: My staging server is stg-2"
        assert [m.text for m in await memory.memories(env.admin)] == ["The staging database is pg-7"]
        assert [m.text for m in await memory.memories(env.member)] == ["My staging server is stg-9"]
        assert await _reply(env, env.admin, cid, "/forget kubernetes cluster") == "No memory of yours matches that."
        assert (await _reply(env, env.admin, cid, "/forget")).startswith("Usage: /forget")


async def test_without_the_memory_plugin_the_commands_say_so(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        cid = env.conversation()["id"]
        assert await _reply(env, env.admin, cid, "/remember x") == "Long-term memory is off (the memory plugin is not enabled)."
        assert await _reply(env, env.admin, cid, "/forget 1") == "Long-term memory is off (the memory plugin is not enabled)."

"""The memory plugin in a real kernel (real SQLite file), no embedding provider: storing,
keyword-led ranking, supersede / forget history, bad input, per-user isolation of the service,
the hooks (turn context, caller stamp of the tools) and the audit rows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from elowen_builtins.memory.ranking import Weights
from elowen_sdk import ToolCall, TurnContext
from elowen_sdk.services.memory import InvalidMemory, MemoryNotFound
from elowen_sdk.testing import call, plugin_kernel

NO_VECTORS = {"memory": {"embedding_provider": "none"}}


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Any]:
    async with plugin_kernel(tmp_path, enable=["memory"], config=NO_VECTORS, watch_settings=False) as k:
        assert k.registry.get("memory").state == "enabled", k.registry.describe("memory")
        yield k


def _svc(kernel: Any) -> Any:
    return kernel.contributions.get("service", "memory").obj.obj


async def test_remember_recall_ranks_and_counts_uses(kernel: Any) -> None:
    svc = _svc(kernel)
    await svc.remember(1, "My staging server is stg-2", kind="project", importance=0.9)
    await svc.remember(1, "I prefer pytest over unittest", kind="preference")
    await svc.remember(1, "The demo repo deploys with make ship")
    found = await svc.recall(1, "which staging server should I deploy to?")
    assert found[0].text == "My staging server is stg-2" and 0 < found[0].score <= 1
    assert [m.text for m in await svc.recall(1, "pytest or unittest")][0] == "I prefer pytest over unittest"
    row = kernel.store.query_one("SELECT use_count, last_used_at FROM memory_items WHERE text LIKE 'My staging%'")
    assert row["use_count"] == 1 and row["last_used_at"]
    await svc.recall(1, "staging", bump=False)
    assert kernel.store.query_one("SELECT use_count FROM memory_items WHERE text LIKE 'My staging%'")["use_count"] == 1


async def test_near_duplicates_are_recalled_once(kernel: Any) -> None:
    svc = _svc(kernel)
    await svc.remember(1, "My staging server is stg-2")
    await svc.remember(1, "my  staging server is STG-2")
    assert len(await svc.recall(1, "staging server")) == 1


async def test_update_supersedes_and_forget_keeps_history(kernel: Any) -> None:
    svc = _svc(kernel)
    first = await svc.remember(1, "My staging server is stg-2")
    second = await svc.remember(1, "My staging server is stg-3", supersedes=first.id)
    assert [m.text for m in await svc.recall(1, "staging server")] == ["My staging server is stg-3"]
    assert await svc.forget(1, second.id) is True
    assert await svc.recall(1, "staging server") == []
    chain = await svc.history(1, first.id)
    assert [(m.text, m.superseded_by) for m in chain] == [("My staging server is stg-2", second.id), ("My staging server is stg-3", second.id)]
    assert await svc.history(1, second.id) == chain
    assert await svc.forget(1, second.id) is False  # not current any more
    with pytest.raises(MemoryNotFound):
        await svc.remember(1, "x", supersedes=first.id)  # superseded: not current
    assert len(await svc.memories(1, include_superseded=True)) == 2 and await svc.memories(1) == []


@pytest.mark.parametrize(
    "text, fields, message",
    [
        ("", {}, "text"),
        ("   ", {}, "text"),
        ("a\x00b", {}, "NUL"),
        ("x" * 1_000_000, {}, "at most 4000"),
        ("ok", {"importance": 1.5}, "importance"),
        ("ok", {"importance": True}, "importance"),
        ("ok", {"kind": "Not A Kind"}, "kind"),
    ],
)
async def test_bad_input_is_refused_clearly(kernel: Any, text: str, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidMemory, match=message):
        await _svc(kernel).remember(1, text, **fields)
    assert kernel.store.query_one("SELECT count(*) AS n FROM memory_items")["n"] == 0


async def test_one_user_never_gets_anothers_memories(kernel: Any) -> None:
    svc = _svc(kernel)
    mine = await svc.remember(1, "My staging server is stg-2")
    await svc.remember(2, "My staging server is stg-9")
    assert [m.text for m in await svc.recall(2, "staging server")] == ["My staging server is stg-9"]
    assert await svc.forget(2, mine.id) is False
    with pytest.raises(MemoryNotFound):
        await svc.history(2, mine.id)
    with pytest.raises(MemoryNotFound):
        await svc.remember(2, "hijack", supersedes=mine.id)
    assert [m.text for m in await svc.memories(2)] == ["My staging server is stg-9"]
    assert [m.text for m in await svc.recall(1, "staging")] == ["My staging server is stg-2"]


async def test_turn_context_injects_the_users_memories_and_audits_no_text(kernel: Any) -> None:
    svc = _svc(kernel)
    await svc.remember(1, "My staging server is stg-2")
    await svc.remember(2, "My staging server is stg-9")
    turn = await kernel.bus.mutate("turn_context", turn=TurnContext("c1", "1", "deploy to my staging server"))
    assert len(turn.context) == 1 and "stg-2" in turn.context[0] and "stg-9" not in turn.context[0]
    # an unlinked platform sender / ownerless turn has no user: no memories
    assert (await kernel.bus.mutate("turn_context", turn=TurnContext("c2", "", "staging server"))).context == ()
    kernel.store.flush_audit()
    rows = kernel.store.query("SELECT outcome, detail FROM audit WHERE actor = 'memory' AND action = 'hook.mutate:turn_context'")
    assert [r["outcome"] for r in rows] == ["applied"]
    assert "stg-2" not in rows[0]["detail"] and json.loads(rows[0]["detail"])["value"]["chars"] > 0


async def test_token_cap_bounds_the_turn_context(tmp_path: Path) -> None:
    config = {"memory": {"embedding_provider": "none", "recall_token_cap": 16}}
    async with plugin_kernel(tmp_path, enable=["memory"], config=config, watch_settings=False) as kernel:
        svc = _svc(kernel)
        for i in range(6):
            await svc.remember(1, f"Staging fact number {i}: " + "detail " * 8)
        turn = await kernel.bus.mutate("turn_context", turn=TurnContext("c1", "1", "staging fact"))
        assert turn.context[0].count("[memory ") == 1  # the first one is always kept, the rest does not fit


async def test_tools_act_for_the_stamped_user_only(kernel: Any) -> None:
    svc = _svc(kernel)
    theirs = await svc.remember(2, "User two's staging server is stg-9")
    save = kernel.contributions.get("tool", "memory.save").obj
    search = kernel.contributions.get("tool", "memory.search").obj
    forget = kernel.contributions.get("tool", "memory.forget").obj

    async def stamped(tool: str, args: dict[str, Any], user: str) -> dict[str, Any]:
        patched = await kernel.bus.mutate("before_tool_call", call=ToolCall(tool, args, conversation_id="c1", user=user))
        return dict(patched.arguments)

    saved = await call(save, **await stamped("memory.save", {"text": "I like short answers", "kind": "preference"}, "1"))
    assert (await svc.memories(1))[0].id == saved["saved"]
    # the model names user 2 in a forged stamp: the hook overwrites it with the real caller
    args = await stamped("memory.search", {"query": "staging server", "_caller": "2:forged"}, "1")
    assert (await call(search, **args))["memories"] == []
    with pytest.raises(Exception, match="no current memory"):
        await call(forget, **await stamped("memory.forget", {"id": theirs.id}, "1"))
    with pytest.raises(Exception, match="signed-in user"):
        await call(search, query="staging", _caller="2:forged")  # no hook ran: refused
    with pytest.raises(Exception, match="signed-in user"):
        await call(save, **await stamped("memory.save", {"text": "x"}, ""))  # an ownerless turn
    assert [m.text for m in await svc.memories(2)] == ["User two's staging server is stg-9"]
    kernel.store.flush_audit()
    rows = kernel.store.query("SELECT detail FROM audit WHERE action = 'hook.mutate:tool_call'")
    assert rows and all("_caller" in r["detail"] and args["_caller"] not in r["detail"] for r in rows)  # the stamp is not in the audit


async def test_every_change_is_audited_without_text(kernel: Any) -> None:
    svc = _svc(kernel)
    first = await svc.remember(1, "secret-ish fact one")
    second = await svc.remember(1, "secret-ish fact two", supersedes=first.id)
    await svc.forget(1, second.id)
    kernel.store.flush_audit()
    rows = kernel.store.query("SELECT action, target, detail FROM audit WHERE action LIKE 'memory.%' ORDER BY id")
    assert [(r["action"], r["target"]) for r in rows] == [
        ("memory.add", f"memory:{first.id}"),
        ("memory.update", f"memory:{second.id}"),
        ("memory.forget", f"memory:{second.id}"),
    ]
    assert all("secret-ish" not in r["detail"] for r in rows)
    assert json.loads(rows[1]["detail"])["supersedes"] == first.id


async def test_disable_removes_everything_and_keeps_data(kernel: Any) -> None:
    await _svc(kernel).remember(1, "kept across a disable")
    await kernel.registry.disable("memory")
    with pytest.raises(LookupError):
        kernel.contributions.get("service", "memory")
    with pytest.raises(LookupError):
        kernel.contributions.get("loop", "memory.embed")
    await kernel.registry.enable("memory")
    assert [m.text for m in await _svc(kernel).memories(1)] == ["kept across a disable"]


async def test_neighbour_context_brings_in_the_next_memory_of_the_conversation(kernel: Any) -> None:
    svc = _svc(kernel)
    await svc.remember(1, "What did you do last weekend?", conversation_id="c9")
    answer = await svc.remember(1, "I climbed Mount Rainier with Ana.", conversation_id="c9")
    await svc.remember(1, "Unrelated: the printer is on floor 2.")
    # the neighbour lift alone: without the context column (tested in test_context.py), which
    # would find the answer by the question's words as well
    kernel.store.execute("UPDATE memory_items SET context = ''")
    found = await svc.search(1, "what did I do last weekend", limit=6)
    assert answer.id in [m.id for m in found]  # no shared word: it came in as the neighbour of a match
    alone = await svc.search(1, "what did I do last weekend", weights=Weights(neighbour=0.0))
    assert answer.id not in [m.id for m in alone]


async def test_keyword_queries_leave_out_terms_too_common_to_afford(kernel: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from elowen_builtins.memory import store as store_module

    svc = _svc(kernel)
    svc.store.add_many(1, ({"text": f"common note {i}"} for i in range(30)))
    rare = await svc.remember(1, "common zeppelin sighting")
    monkeypatch.setattr(store_module, "MAX_POSTINGS", 10)
    assert svc.store._affordable(["common", "zeppelin"]) == ["zeppelin"]
    assert [i for i, _ in svc.store.keyword(1, "common zeppelin")] == [rare.id]
    assert svc.store.keyword(1, "common") == []  # alone too common: no keyword candidates


async def test_term_costs_count_stemmed_forms(kernel: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from elowen_builtins.memory import store as store_module

    svc = _svc(kernel)
    svc.store.add_many(1, ({"text": f"team meetings number {i}"} for i in range(30)))
    await svc.remember(2, "a zeppelin meeting")  # counts are over every user's memories
    assert svc.store.doc_count("meeting") == 31 and svc.store.doc_count("meet") == 31  # FTS5 stems both to "meet"
    monkeypatch.setattr(store_module, "MAX_POSTINGS", 10)
    assert svc.store._affordable(["meeting", "zeppelin"]) == ["zeppelin"]
    assert svc.store.keyword(2, "meeting zeppelin")[0][1] > 0 and svc.store.keyword(1, "zeppelin") == []

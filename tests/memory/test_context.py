"""The ``context`` column of keyword recall (memory schema v3): a memory of a conversation is
also found by its neighbours' words (weaker than its own), kept right through adds, bulk
imports, supersedes and forgets, per user, and filled in when a v2 file is upgraded. Real
kernel, real SQLite file, no embedding provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from elowen_sdk.testing import plugin_kernel
from tests.memory.test_embedding_queue import V1_TABLES

NO_VECTORS = {"memory": {"embedding_provider": "none"}}


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[Any]:
    async with plugin_kernel(tmp_path, enable=["memory"], config=NO_VECTORS, watch_settings=False) as k:
        assert k.registry.get("memory").state == "enabled", k.registry.describe("memory")
        yield k.contributions.get("service", "memory").obj.obj


def _context(svc: Any, memory_id: int) -> str:
    return str(svc.store.store.query_one("SELECT context FROM memory_items WHERE id = ?", (memory_id,))["context"])


async def test_a_memory_is_found_by_its_neighbours_words_below_the_one_that_has_them(svc: Any) -> None:
    q = await svc.remember(1, "Where did you go hiking in June?", conversation_id="c1")
    a = await svc.remember(1, "Mount Rainier, with Ana.", conversation_id="c1")
    await svc.remember(1, "The printer is on floor 2.")  # no conversation: no context
    assert _context(svc, a.id) == "Where did you go hiking in June?" and _context(svc, q.id) == "Mount Rainier, with Ana."
    hits = dict(svc.store.keyword(1, "hiking in June"))
    assert set(hits) == {q.id, a.id} and hits[q.id] > hits[a.id] > 0  # its own words weigh more
    assert [i for i, _ in svc.store.keyword(1, "printer")] != []


async def test_context_follows_forget_and_supersede(svc: Any) -> None:
    first = await svc.remember(1, "secret codeword bluebird", conversation_id="c1")
    middle = await svc.remember(1, "the middle turn", conversation_id="c1")
    last = await svc.remember(1, "the last turn", conversation_id="c1")
    assert _context(svc, middle.id) == "secret codeword bluebird\nthe last turn"
    assert await svc.forget(1, first.id) is True
    assert _context(svc, middle.id) == "the last turn"  # a forgotten text leaves its neighbours' context
    assert svc.store.keyword(1, "bluebird") == []
    newer = await svc.remember(1, "the middle turn, corrected", supersedes=middle.id, conversation_id="c1")
    assert _context(svc, last.id) == "the middle turn, corrected"  # middle superseded; the new version comes last
    assert _context(svc, newer.id) == "the last turn"
    assert [i for i, _ in svc.store.keyword(1, "middle")] == [newer.id, last.id]


async def test_bulk_import_and_other_users_and_conversations_stay_apart(svc: Any) -> None:
    svc.store.add_many(1, [{"text": f"turn {i} word{i}", "conversation_id": "c1"} for i in range(5)])
    svc.store.add_many(1, [{"text": "other conversation zebra", "conversation_id": "c2"}])
    await svc.remember(2, "another user's yak", conversation_id="c1")
    rows = svc.store.store.query("SELECT id, text, context FROM memory_items WHERE user_id = 1 AND conversation_id = 'c1' ORDER BY id")
    assert [r["context"] for r in rows] == [
        "turn 1 word1",
        "turn 0 word0\nturn 2 word2",
        "turn 1 word1\nturn 3 word3",
        "turn 2 word2\nturn 4 word4",
        "turn 3 word3",
    ]
    assert svc.store.keyword(1, "zebra") and all("zebra" not in r["context"] for r in rows)
    assert svc.store.keyword(1, "yak") == [] and "yak" not in " ".join(r["context"] for r in rows)
    added = await svc.remember(1, "turn 5 appended", conversation_id="c1")
    assert _context(svc, rows[-1]["id"]) == "turn 3 word3\nturn 5 appended" and _context(svc, added.id) == "turn 4 word4"


def test_upgrade_to_3_fills_the_context_and_reindexes(tmp_path: Path) -> None:
    import elowen_builtins.memory as package
    from elowen.core.store import Store
    from elowen_builtins.memory.store import MemoryStore

    store = Store(tmp_path / "elowen.db")
    assert store.apply_plugin_schema("memory", V1_TABLES, 1)
    now = "2026-12-01T00:00:00.000Z"
    for i, (text, conv, sup) in enumerate([("alpha turn", "c", None), ("beta turn", "c", None), ("gamma old", "c", 3), ("delta turn", "c", None)], start=1):
        store.execute(
            "INSERT INTO memory_items (id, user_id, text, conversation_id, created_at, updated_at, superseded_by) VALUES (?, 1, ?, ?, ?, ?, ?)",
            (i, text, conv, now, now, sup),
        )
    assert store.apply_plugin_schema("memory", (Path(package.__file__).parent / "schema.sql").read_text(), 3)
    ctx = {r["id"]: r["context"] for r in store.query("SELECT id, context FROM memory_items ORDER BY id")}
    assert ctx == {1: "beta turn", 2: "alpha turn\ndelta turn", 3: "", 4: "beta turn"}  # the superseded one is skipped and keeps none
    memories = MemoryStore(store)
    assert {i for i, _ in memories.keyword(1, "alpha")} == {1, 2}  # the rebuilt index has both columns
    store.execute("DELETE FROM memory_items WHERE id = 2")  # the delete trigger names both columns
    assert {i for i, _ in memories.keyword(1, "alpha")} == {1}
    assert store.query_one("SELECT count(*) AS n FROM memory_fts WHERE memory_fts MATCH 'beta'")["n"] == 2
    store.close()

"""The embedding queue against a real OpenAI-compatible HTTP server on 127.0.0.1 (see
``embed_server.py``): draining, semantic recall, no-op without a provider, a restart in the
middle of a drain, a model change, a failing endpoint, and the turn's time budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen_sdk import TurnContext
from elowen_sdk.testing import plugin_kernel

from .embed_server import EmbedServer


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer() as s:
        yield s


def _config(server: EmbedServer, **extra: Any) -> dict[str, Any]:
    return {"memory": {"embedding_provider": "openai", "embedding_base_url": server.url, "embedding_model": "bag-64", "embed_interval": 0.05, **extra}}


def _svc(kernel: Any) -> Any:
    return kernel.contributions.get("service", "memory").obj.obj


async def _until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


def _vectors(kernel: Any, model: str | None = None) -> list[dict[str, Any]]:
    sql = "SELECT memory_id, model, dim FROM memory_vectors" + (" WHERE model = ?" if model else "") + " ORDER BY memory_id"
    return kernel.store.query(sql, (model,) if model else ())


async def test_no_provider_is_a_no_op(tmp_path: Path) -> None:
    config = {"memory": {"embedding_provider": "none", "embed_interval": 0.05}}
    async with plugin_kernel(tmp_path, enable=["memory"], config=config, watch_settings=False) as kernel:
        await _svc(kernel).remember(1, "nothing to embed this with")
        await trio.sleep(0.3)
        assert _vectors(kernel) == []
        assert kernel.contributions.get("route", "GET /memories/status")  # still served


async def test_queue_drains_and_semantic_recall_uses_the_vectors(tmp_path: Path, server: EmbedServer) -> None:
    async with plugin_kernel(tmp_path, enable=["memory"], config=_config(server), watch_settings=False) as kernel:
        svc = _svc(kernel)
        a = await svc.remember(1, "staging server stg-2 in the basement rack")
        await svc.remember(1, "prefers pytest over unittest")
        await svc.remember(2, "staging server stg-9 rack")
        await _until(lambda: len(_vectors(kernel)) == 3, "three vectors")
        assert {r["dim"] for r in _vectors(kernel)} == {64}
        assert server.requests[0]["model"] == "bag-64" and isinstance(server.requests[0]["input"], list)
        # dense alone (no keyword candidates) finds it, and only among user 1's memories
        found = await svc.search(1, "basement rack", keyword=False)
        assert [m.id for m in found][:1] == [a.id] and all(m.user_id == 1 for m in found)
        await svc.remember(1, "basement rack holds the backup box")  # appended to the cached vectors
        await _until(lambda: len(_vectors(kernel)) == 4, "four vectors")
        assert len(await svc.search(1, "basement rack", keyword=False)) == 3
        assert kernel.contributions.get("route", "GET /memories/status").obj.handler  # served


async def test_restart_mid_drain_embeds_each_memory_once(tmp_path: Path, server: EmbedServer) -> None:
    async with plugin_kernel(tmp_path, enable=["memory"], config=_config(server, embed_batch=2), watch_settings=False) as kernel:
        server.hold.clear()  # the endpoint hangs: the first batch is in flight
        svc = _svc(kernel)
        for i in range(5):
            await svc.remember(1, f"fact number {i} about the project")
        await _until(lambda: len(server.requests) >= 1, "a request in flight")
        await kernel.registry.disable("memory")  # cancels the tick mid-request
        assert _vectors(kernel) == []
        server.hold.set()
        await kernel.registry.enable("memory")
        await _until(lambda: len(_vectors(kernel)) == 5, "five vectors")
        rows = _vectors(kernel)
        assert sorted(r["memory_id"] for r in rows) == sorted({r["memory_id"] for r in rows})  # one each
        counts = {t: server.inputs().count(t) for t in set(server.inputs())}
        assert len(counts) == 5 and max(counts.values()) <= 2  # only the cut batch was asked twice


async def test_model_change_re_embeds_and_never_mixes(tmp_path: Path, server: EmbedServer) -> None:
    async with plugin_kernel(tmp_path, enable=["memory"], config=_config(server), watch_settings=False) as kernel:
        svc = _svc(kernel)
        for text in ("staging server stg-2", "pytest over unittest", "deploys with make ship"):
            await svc.remember(1, text)
        await _until(lambda: len(_vectors(kernel, "openai/bag-64")) == 3, "first model")
        await kernel.registry.configure("memory", {"embedding_model": "bag-small"})
        await _until(lambda: len(_vectors(kernel, "openai/bag-small")) == 3 and not _vectors(kernel, "openai/bag-64"), "second model only")
        assert {r["dim"] for r in _vectors(kernel)} == {32}
        found = await _svc(kernel).search(1, "staging server", keyword=False)
        assert found and found[0].text == "staging server stg-2"


async def test_a_failing_endpoint_keeps_keyword_recall_and_retries(tmp_path: Path, server: EmbedServer) -> None:
    server.status = 500
    async with plugin_kernel(tmp_path, enable=["memory"], config=_config(server), watch_settings=False) as kernel:
        svc = _svc(kernel)
        await svc.remember(1, "staging server stg-2")
        await _until(lambda: len(server.requests) >= 2, "retried")
        assert _vectors(kernel) == [] and kernel.registry.get("memory").state == "enabled"
        assert [m.text for m in await svc.recall(1, "staging")] == ["staging server stg-2"]
        server.status = 200
        await _until(lambda: len(_vectors(kernel)) == 1, "embedded once the endpoint recovers")


async def test_a_recall_past_its_budget_lets_the_turn_go_on(tmp_path: Path, server: EmbedServer) -> None:
    async with plugin_kernel(tmp_path, enable=["memory"], config=_config(server, recall_budget_ms=30), watch_settings=False) as kernel:
        svc = _svc(kernel)
        await svc.remember(1, "staging server stg-2")
        await _until(lambda: len(_vectors(kernel)) == 1, "embedded")
        cold = await kernel.bus.mutate("turn_context", turn=TurnContext("c1", "1", "where is staging?"))
        assert len(cold.context) == 1 and svc.stats.dense_skipped == 1  # vectors not in memory yet: loaded meanwhile, not waited for
        await _until(lambda: svc.store.loaded(1, "openai/bag-64"), "vectors loaded in the background")
        server.hold.clear()  # embedding the query now hangs
        with trio.fail_after(5):
            turn = await kernel.bus.mutate("turn_context", turn=TurnContext("c1", "1", "where is staging?"))
            late = await kernel.bus.mutate("turn_context", turn=TurnContext("c1", "1", "what is for lunch?"))
        assert len(turn.context) == 1 and "stg-2" in turn.context[0]  # keyword recall, no waiting
        assert late.context == ()  # nothing matches by keyword: the turn goes on without memories
        assert svc.stats.misses == 2
        server.hold.set()


def test_openai_provider_config_errors_are_clear() -> None:
    from elowen_builtins.memory.embeddings import make_embedder
    from elowen_sdk import ConfigError

    with pytest.raises(ConfigError, match="embedding_base_url"):
        make_embedder({"embedding_provider": "openai", "embedding_base_url": "ftp://x", "embedding_model": "m"})
    with pytest.raises(ConfigError, match="embedding_model"):
        make_embedder({"embedding_provider": "openai", "embedding_base_url": "http://127.0.0.1:9/v1", "embedding_model": ""})
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_VAR"):
        make_embedder(
            {"embedding_provider": "openai", "embedding_base_url": "http://127.0.0.1:9/v1", "embedding_model": "m", "embedding_api_key_env": "NO_SUCH_KEY_VAR"}
        )
    assert make_embedder({"embedding_provider": "none"}) is None


V1_TABLES = """-- version: 1
CREATE TABLE memory_items (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, text TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'fact',
    importance REAL NOT NULL DEFAULT 0.5, source TEXT NOT NULL DEFAULT 'manual', provenance TEXT NOT NULL DEFAULT 'owner', project_id INTEGER,
    conversation_id TEXT, message_id TEXT, occurred_at TEXT, actor TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    last_used_at TEXT, use_count INTEGER NOT NULL DEFAULT 0, supersedes INTEGER, superseded_by INTEGER, superseded_at TEXT, superseded_actor TEXT);
CREATE INDEX memory_items_user ON memory_items (user_id, superseded_by);
CREATE INDEX memory_items_supersedes ON memory_items (supersedes);
CREATE VIRTUAL TABLE memory_fts USING fts5 (text, content = 'memory_items', content_rowid = 'id', tokenize = 'porter unicode61');
CREATE VIRTUAL TABLE memory_fts_vocab USING fts5vocab (memory_fts, 'row');
CREATE TRIGGER memory_items_ai AFTER INSERT ON memory_items BEGIN INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text); END;
CREATE TRIGGER memory_items_ad AFTER DELETE ON memory_items BEGIN INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.id, old.text); END;
CREATE TABLE memory_vectors (memory_id INTEGER NOT NULL, model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (memory_id, model)) WITHOUT ROWID;
"""
"""The tables of schema version 1 (before ``vector_model``), as that release created them."""


def test_schema_upgrade_to_2_marks_embedded_memories_and_drops_stale_vectors(tmp_path: Path) -> None:
    import elowen_builtins.memory as package
    from elowen.core.store import Store
    from elowen_builtins.memory.store import MemoryStore

    store = Store(tmp_path / "elowen.db")
    assert store.apply_plugin_schema("memory", V1_TABLES, 1)
    now = "2026-12-01T00:00:00.000Z"
    for i, (text, sup) in enumerate([("embedded", None), ("not yet", None), ("old version", 1)], start=1):
        store.execute("INSERT INTO memory_items (id, user_id, text, created_at, updated_at, superseded_by) VALUES (?, 1, ?, ?, ?, ?)", (i, text, now, now, sup))
    for mid in (1, 3):
        store.execute("INSERT INTO memory_vectors VALUES (?, 'm', 2, ?, ?)", (mid, b"\0" * 8, now))
    assert store.apply_plugin_schema("memory", (Path(package.__file__).parent / "schema.sql").read_text(), 3)
    assert [r["memory_id"] for r in store.query("SELECT memory_id FROM memory_vectors")] == [1]  # the superseded one's vector went
    memories = MemoryStore(store)
    assert [r["text"] for r in memories.pending("m", 10)] == ["not yet"]
    assert [r["text"] for r in memories.pending("other", 10)] == ["not yet", "embedded"]
    assert memories.pending_count("m") == 1 and memories.pending_count("other") == 2
    store.close()

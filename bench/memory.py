"""Retrieval quality of the memory plugin on LoCoMo: plain BM25, the plugin's keyword signal
alone, embeddings alone and the plugin's blended ranking, side by side in one run.

For each conversation of a file of LoCoMo's shape (Maharana et al., 2024, "Evaluating Very
Long-Term Conversational Memory of LLM Agents"; ``[{"conversation": {"session_N": [turn…],
"session_N_date_time": "…"}, "qa": [{"question", "evidence": ["D1:3"…], "category"}]}]``),
every dialog turn is stored as a memory of one user, as ``[<session date>] <speaker>: <text>``
(plus ``[shares a photo: <caption>]`` when the turn has one), through the plugin's own store in
a real kernel (real SQLite file); the vectors come from the embedded model (all-MiniLM-L6-v2)
and are stored as the embedding queue stores them. Every question except category 5
(unanswerable) is asked with the plugin's ``search`` (top 6, no token cap); scored are recall@6
(the share of a question's evidence turns among the 6) and MRR (1 / rank of the first evidence
turn, 0 when none is in the 6), overall and per category (1 multi-hop, 2 temporal, 3
open-domain, 4 single-hop). No language model is in the retrieval path.

Modes: ``bm25`` — plain FTS5 BM25 over the raw turn text of the conversation (no date,
speaker or caption; FTS5's default ``unicode61`` tokenizer, no stemming; see
:class:`PlainBM25`), the issue's baseline; ``bm25_elowen`` — the plugin's keyword signal
alone (its FTS5 table over the stored, enriched text, porter stemming, stopwords);
``dense`` — the plugin's vectors alone; ``blended`` — the plugin's ranking. The ratios of
blended to each baseline are printed and kept in ``meta``.

Run: ``.venv/bin/python bench/memory.py PATH [--json] [--limit-conversations N] [--query-precision int8|float32]``; with
``--json`` the last line is ``{"bm25": {...}, "dense": {...}, "blended": {...}}``, each with
``recall_at_6``, ``mrr`` and ``by_category`` (plus ``bm25_elowen`` and ``meta``: counts, timings
and ratios).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elowen_builtins.memory.embeddings import LocalEmbedder, pack  # noqa: E402
from elowen_builtins.memory.ranking import Weights  # noqa: E402
from elowen_builtins.memory.store import fts_terms  # noqa: E402
from elowen_sdk.testing import plugin_kernel  # noqa: E402

K = 6
MODES = ("bm25", "bm25_elowen", "dense", "blended")
BASELINES = ("bm25", "bm25_elowen", "dense")
DENSE_ONLY = Weights(semantic=1.0, keyword=0.0, importance=0.0, recency=0.0, use=0.0, neighbour=0.0)
KEYWORD_ONLY = Weights(semantic=0.0, keyword=1.0, importance=0.0, recency=0.0, use=0.0, neighbour=0.0)


def _date(raw: str) -> str:
    """``1:56 pm on 8 May, 2023`` → ``8 May 2023`` (the raw text when it does not parse)."""
    try:
        return datetime.strptime(raw.split(" on ", 1)[1].replace(",", ""), "%d %B %Y").strftime("%-d %B %Y")
    except (IndexError, ValueError):
        return raw


def turns_of(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dia_id, memory text)`` of every turn, in order."""
    out = []
    sessions = sorted((int(m.group(1)), k) for k in conversation if (m := re.fullmatch(r"session_(\d+)", k)))
    for n, key in sessions:
        date = _date(str(conversation.get(f"session_{n}_date_time", "")))
        for turn in conversation[key]:
            text = f"[{date}] {turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            out.append((turn["dia_id"], text))
    return out


def raw_turns_of(conversation: dict[str, Any]) -> list[str]:
    """The raw text of every turn, in :func:`turns_of`'s order (the plain BM25 baseline's)."""
    sessions = sorted((int(m.group(1)), k) for k in conversation if (m := re.fullmatch(r"session_(\d+)", k)))
    return [str(turn["text"]) for _, key in sessions for turn in conversation[key]]


def evidence_of(qa: dict[str, Any]) -> set[str]:
    """The evidence dialog ids, normalised (``D8:6; D9:17`` split, ``D:11:26`` → ``D11:26``)."""
    out = set()
    for item in qa.get("evidence", []):
        for part in re.split(r"[;,\s]+", str(item)):
            m = re.fullmatch(r"D:?(\d+):(\d+)", part)
            if m:
                out.add(f"D{m.group(1)}:{m.group(2)}")
    return out


class PlainBM25:
    """The issue's baseline: plain FTS5 BM25 over one conversation's raw turn text (no date,
    no speaker, no caption), FTS5's default ``unicode61`` tokenizer (no stemming), ``bm25()``
    with FTS5's k1 = 1.2, b = 0.75; the query is the question's words minus the plugin's
    English stopwords and one-letter words, each quoted, joined with OR (as the plugin's)."""

    def __init__(self, raw: list[str]) -> None:
        import apsw

        self.db = apsw.Connection(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5 (text)")
        with self.db:
            self.db.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", list(enumerate(raw)))

    def search(self, question: str, limit: int = K) -> list[int]:
        terms = fts_terms(question)
        if not terms:
            return []
        match = " OR ".join(f'"{w}"' for w in terms)
        return [r[0] for r in self.db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (match, limit))]


def _score(ranked: list[str], evidence: set[str]) -> tuple[float, float]:
    top = ranked[:K]
    recall = len(evidence & set(top)) / len(evidence)
    mrr = next((1.0 / (i + 1) for i, d in enumerate(top) if d in evidence), 0.0)
    return recall, mrr


def _key(texts: list[str]) -> str:
    import hashlib

    return hashlib.sha256(("\x00".join(texts) + LocalEmbedder.model_id).encode()).hexdigest()[:24]


def _cached(cache: Path | None, texts: list[str]) -> list[Any] | None:
    """Vectors of ``texts`` from an earlier run's ``--cache`` folder, if there."""
    if cache is None or not (cache / f"{_key(texts)}.npy").exists():
        return None
    import numpy as np

    return list(np.load(cache / f"{_key(texts)}.npy"))


def _store(cache: Path | None, texts: list[str], vectors: list[Any]) -> None:
    if cache is not None:
        import numpy as np

        cache.mkdir(parents=True, exist_ok=True)
        np.save(cache / f"{_key(texts)}.npy", np.stack(vectors))


async def run(path: Path, limit: int | None, cache: Path | None = None, query_precision: str = "int8") -> dict[str, Any]:
    data = json.loads(path.read_text())
    if limit:
        data = data[:limit]
    embedder = LocalEmbedder(threads=2, query_precision=query_precision)
    t0 = time.perf_counter()
    await embedder.load()
    load_s = time.perf_counter() - t0
    sums: dict[str, dict[int, list[tuple[float, float]]]] = {m: defaultdict(list) for m in MODES}
    embedded = 0
    embedded_timed = 0
    embed_s = 0.0
    query_s = {m: 0.0 for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        config = {"memory": {"embedding_provider": "none"}}
        async with plugin_kernel(tmp, enable=["memory"], config=config, watch_settings=False) as kernel:
            backend = kernel.contributions.get("service", "memory").obj.obj
            backend.embedder = embedder  # the provider the queue would use; the bench stores its vectors itself
            store = backend.store
            for n, sample in enumerate(data, start=1):
                turns = turns_of(sample["conversation"])
                plain = PlainBM25(raw_turns_of(sample["conversation"]))
                store.add_many(n, ({"text": t, "conversation_id": sample.get("sample_id", str(n))} for _, t in turns), actor="bench")
                rows = store.store.query("SELECT id, text FROM memory_items WHERE user_id = ? ORDER BY id", (n,))
                dia = {r["id"]: d for r, (d, _) in zip(rows, turns)}
                texts = [r["text"] for r in rows]
                vectors = _cached(cache, texts)
                if vectors is None:
                    t1 = time.perf_counter()
                    vectors = await embedder.embed(texts)
                    embed_s += time.perf_counter() - t1
                    embedded_timed += len(rows)
                    _store(cache, texts, vectors)
                embedded += len(rows)
                store.put_vectors(embedder.model_id, [(r["id"], n, pack(v), int(v.shape[0])) for r, v in zip(rows, vectors)])
                for qa in sample["qa"]:
                    if qa.get("category") == 5:
                        continue
                    evidence = evidence_of(qa)
                    if not evidence:
                        continue
                    for mode in MODES:
                        t2 = time.perf_counter()
                        if mode == "bm25":
                            ranked = [turns[i][0] for i in plain.search(qa["question"])]
                            query_s[mode] += time.perf_counter() - t2
                            sums[mode][int(qa["category"])].append(_score(ranked, evidence))
                            continue
                        if mode == "bm25_elowen":
                            found = await backend.search(n, qa["question"], limit=K, dense=False, weights=KEYWORD_ONLY)
                        elif mode == "dense":
                            found = await backend.search(n, qa["question"], limit=K, keyword=False, weights=DENSE_ONLY)
                        else:
                            found = await backend.search(n, qa["question"], limit=K)
                        query_s[mode] += time.perf_counter() - t2
                        sums[mode][int(qa["category"])].append(_score([dia[m.id] for m in found], evidence))
    report: dict[str, Any] = {}
    for mode in MODES:
        every = [s for cat in sums[mode].values() for s in cat]
        report[mode] = {
            "recall_at_6": round(sum(r for r, _ in every) / len(every), 4),
            "mrr": round(sum(m for _, m in every) / len(every), 4),
            "by_category": {
                str(c): {"n": len(v), "recall_at_6": round(sum(r for r, _ in v) / len(v), 4), "mrr": round(sum(m for _, m in v) / len(v), 4)}
                for c, v in sorted(sums[mode].items())
            },
            "query_ms_mean": round(query_s[mode] * 1000 / max(1, len(every)), 2),
        }
    report["meta"] = {
        "conversations": len(data),
        "memories": embedded,
        "questions": len([s for cat in sums["bm25"].values() for s in cat]),
        "model_load_s": round(load_s, 2),
        "query_embedding": f"{embedder.query_backend} {embedder.query_precision}",
        "embed_memories_per_s": round(embedded_timed / embed_s, 1) if embed_s else None,
    }
    for base in BASELINES:
        for key in ("recall_at_6", "mrr"):
            report["meta"][f"ratio_blended_to_{base}_{key.split('_')[0]}"] = round(report["blended"][key] / report[base][key], 3) if report[base][key] else None
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a JSON file of LoCoMo's shape")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    parser.add_argument("--limit-conversations", type=int, default=None, help="only the first N conversations (a quick look)")
    parser.add_argument("--cache", type=Path, default=None, help="keep the memories' vectors in this folder and reuse them (outside the project)")
    parser.add_argument(
        "--query-precision", choices=("int8", "float32"), default="int8", help="the query model on ONNX Runtime (the plugin's embedding_query_precision)"
    )
    args = parser.parse_args()
    report = trio.run(run, args.path, args.limit_conversations, args.cache, args.query_precision)
    for mode in MODES:
        r = report[mode]
        cats = "  ".join(f"c{c}:{v['recall_at_6']:.3f}/{v['mrr']:.3f}" for c, v in r["by_category"].items())
        print(f"{mode:11s} recall@6 {r['recall_at_6']:.3f}  MRR {r['mrr']:.3f}  ({cats})  {r['query_ms_mean']} ms/query")
    m = report["meta"]
    print(
        f"{m['conversations']} conversations, {m['memories']} memories, {m['questions']} questions; model load {m['model_load_s']} s; queries on {m['query_embedding']}; "
        f"embedding {m['embed_memories_per_s']} memories/s"
    )
    for base in BASELINES:
        print(f"blended / {base}: recall@6 {m[f'ratio_blended_to_{base}_recall']}x, MRR {m[f'ratio_blended_to_{base}_mrr']}x")
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()

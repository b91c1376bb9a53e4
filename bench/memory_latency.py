"""Latency of the memory plugin's turn-start recall, and the embedding queue's throughput.

1. Recall latency with 1k, 10k and 100k memories of one user: the ``turn_context`` hook run as
   the brain runs it (``kernel.bus.mutate``), embedding of the query by the embedded model
   (all-MiniLM-L6-v2) included, each query a new text (no query cache hit). The stored texts
   are sentences drawn from a fixed vocabulary (for FTS5) and their vectors random unit vectors
   of 384 dimensions (embedding 100k texts with the CPU model would take about half an hour;
   search cost does not depend on what the vectors mean). The first recall after start starts
   loading the user's vectors in the background and ranks without them (it does not wait); it
   and the load time are reported apart, and the timed recalls start once the load is done.
   Target at 100k: p50 ≤ 20 ms, p99 ≤ 60 ms. Besides wall-clock time, the process CPU time of
   each recall (worker threads included) is reported: on a shared machine it moves much less
   with the load than wall-clock time does.
2. Embedding-queue throughput: ``drain_once`` over 512 fresh memories with the embedded model
   (memories per second, batches of 32).

Each size is run once per query backend (``--query-backends int8,float32,torch``: ONNX Runtime
with the int8 query model (the plugin's default), ONNX Runtime with the float export, then
sentence-transformers' torch path, as the baselines of the same run).

Run: ``.venv/bin/python bench/memory_latency.py [--sizes 1000,10000,100000] [--queries 200] [--query-backends int8,float32,torch]``
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elowen_builtins.memory.embeddings import LocalEmbedder, drain_once, pack  # noqa: E402
from elowen_sdk import TurnContext  # noqa: E402
from elowen_sdk.testing import plugin_kernel  # noqa: E402

WORDS = (
    "server staging deploy pytest repo build cache docker python trio sqlite index vector memory user project meeting "
    "sister brother coffee tea morning evening laptop keyboard editor vim emacs branch merge release ticket review "
    "london lisbon paris berlin kyoto garden painting guitar violin running swimming book movie dinner lunch"
).split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def latency(size: int, queries: int, embedder: LocalEmbedder) -> dict[str, Any]:
    import numpy as np

    rng = random.Random(size)
    with tempfile.TemporaryDirectory() as tmp:
        config = {"memory": {"embedding_provider": "none", "recall_budget_ms": 5000}}
        async with plugin_kernel(tmp, enable=["memory"], config=config, watch_settings=False, hook_timeout=120) as kernel:
            backend = kernel.contributions.get("service", "memory").obj.obj
            backend.embedder = embedder
            store = backend.store
            for start in range(0, size, 10_000):
                store.add_many(1, ({"text": _sentence(rng)} for _ in range(min(10_000, size - start))), actor="bench")
            ids = [r["id"] for r in store.store.query("SELECT id FROM memory_items WHERE user_id = 1 ORDER BY id")]
            vecs = np.random.default_rng(size).standard_normal((len(ids), 384)).astype("<f4")
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            for start in range(0, len(ids), 10_000):
                store.put_vectors(embedder.model_id, [(i, 1, pack(v), 384) for i, v in zip(ids[start : start + 10_000], vecs[start : start + 10_000])])
            store._vectors.clear()  # start cold, as after a restart

            cpu: list[float] = []

            async def one(text: str, *, cold: bool = False) -> float:
                t0, c0 = time.perf_counter(), time.process_time()
                turn = await kernel.bus.mutate("turn_context", turn=TurnContext("c1", "1", text))
                elapsed = (time.perf_counter() - t0) * 1000
                cpu.append((time.process_time() - c0) * 1000)
                assert cold or turn.context, "no memories recalled"  # cold: keyword only, and every word here may be too common
                return elapsed

            first = await one("what do I keep on the staging server " + _sentence(rng), cold=True)  # starts the vector load, does not wait for it
            t0 = time.perf_counter()
            while not store.loaded(1, embedder.model_id):
                await trio.sleep(0.005)
            load_s = time.perf_counter() - t0
            skipped = backend.stats.dense_skipped
            texts = [f"question {i}: " + _sentence(rng) for i in range(queries)]
            cpu.clear()
            times = [await one(t) for t in texts]
            cpu_times = list(cpu)
            skipped = backend.stats.dense_skipped - skipped
            # the same queries again: their vectors are in the query cache, so this is the
            # retrieval alone (FTS5, the matrix product, blend, rows, use counts)
            warm = [await one(t) for t in texts]
            embed_only = []
            for i in range(min(50, queries)):
                t0 = time.perf_counter()
                await embedder.embed([f"only the query {i} " + _sentence(rng)])
                embed_only.append((time.perf_counter() - t0) * 1000)
    return {
        "memories": size,
        "first_ms": round(first, 1),
        "vector_load_s": round(load_s, 2),
        "dense_skipped": skipped,
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(_pct(times, 99), 2),
        "cpu_p50_ms": round(statistics.median(cpu_times), 2),
        "cpu_p99_ms": round(_pct(cpu_times, 99), 2),
        "query_embedding_p50_ms": round(statistics.median(embed_only), 2),
        "retrieval_p50_ms": round(statistics.median(warm), 2),
        "retrieval_p99_ms": round(_pct(warm, 99), 2),
    }


async def throughput(embedder: LocalEmbedder, count: int = 512) -> float:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        async with plugin_kernel(tmp, enable=["memory"], config={"memory": {"embedding_provider": "none"}}, watch_settings=False) as kernel:
            store = kernel.contributions.get("service", "memory").obj.obj.store
            store.add_many(1, ({"text": _sentence(rng)} for _ in range(count)), actor="bench")
            t0 = time.perf_counter()
            stored = 0
            while stored < count:
                stored += await drain_once(store, embedder, batch=32, max_batches=64)
            return count / (time.perf_counter() - t0)


async def main(sizes: list[int], queries: int, backends: list[str]) -> None:
    embedders = {}
    for name in backends:
        if name not in ("int8", "float32", "torch"):
            raise SystemExit(f"--query-backends: int8, float32 or torch, got {name!r}")
        embedder = LocalEmbedder(threads=1, query_backend="torch" if name == "torch" else "auto", query_precision="int8" if name == "int8" else "float32")
        t0 = time.perf_counter()
        await embedder.load()
        embedders[name] = embedder
        print(
            f"query backend {name}: {embedder.query_backend} {embedder.query_precision} ({embedder.query_backend_reason}); model load {time.perf_counter() - t0:.1f} s; "
            f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
        )
    for size in sizes:
        for embedder in embedders.values():  # the baseline (torch) in the same run, size by size
            r = await latency(size, queries, embedder)
            print(
                f"{r['memories']:>7} memories, query on {embedder.query_backend + ' ' + embedder.query_precision:<19}: recall p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms "
                f"(CPU time p50 {r['cpu_p50_ms']}, p99 {r['cpu_p99_ms']} ms; first after start {r['first_ms']} ms, keyword only; "
                f"vectors loaded in the background in {r['vector_load_s']} s; timed recalls without vectors: {r['dense_skipped']}); "
                f"query embedding alone p50 {r['query_embedding_p50_ms']} ms; retrieval without it p50 {r['retrieval_p50_ms']} ms, "
                f"p99 {r['retrieval_p99_ms']} ms"
            )
    embedder = next(iter(embedders.values()))
    print(
        f"embedding queue: {await throughput(embedder):.1f} memories/s (batches of 32, 1 thread); load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--query-backends", default="int8,float32,torch", help="query embedding backends to compare: int8 and float32 (ONNX Runtime), torch")
    args = parser.parse_args()
    trio.run(main, [int(s) for s in args.sizes.split(",")], args.queries, args.query_backends.split(","))

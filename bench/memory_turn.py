"""A brain turn's overhead with the memory plugin enabled vs disabled (the ``bench/brain.py``
case: a real kernel with the brain plugin, an in-process model that answers at once, two model
calls and one tool call per turn; model time excluded). With memory: the user has 500 memories,
recalled at each turn start by the ``turn_context`` hook — keyword only (no provider), and with
the embedded model (the query embedded per turn, each turn a new text) on ONNX Runtime as
configured by default (int8 query model, 2 query threads) and, as the same run's baselines, the
float32 export and torch. Target: ≤ +10 ms median.

Run: ``.venv/bin/python bench/memory_turn.py [--turns N]``
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from brain import InstantModel  # noqa: E402
from memory_latency import _sentence  # noqa: E402


class _Model(InstantModel):
    """The brain bench's instant model, with the provider list the brain checks a model spec against."""

    def providers(self) -> list[dict[str, Any]]:
        return [{"name": "bench", "kind": "openai", "base_url": "", "source": "settings", "error": None}]

    def default_spec(self) -> str:
        return "bench/instant"


from elowen.core.store import utc_iso  # noqa: E402
from elowen_builtins.memory.embeddings import drain_once  # noqa: E402
from elowen_sdk.testing import plugin_kernel  # noqa: E402


async def overhead(mode: str, turns: int) -> dict[str, Any]:
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "proj"
        project.mkdir()
        (project / "hello.txt").write_text("hello\n")
        enable = ["brain", "inference"] + ([] if mode == "off" else ["memory"])
        config = {
            "memory": {
                "embedding_provider": "none" if mode == "keyword" else "local",
                "embedding_query_backend": "torch" if mode == "local-torch" else "auto",
                "embedding_query_precision": "float32" if mode == "local-float32" else "int8",
                "embed_interval": 3600,
                "recall_budget_ms": 5000,
            }
        }
        async with plugin_kernel(root, enable=enable, config=config, watch_settings=False) as kernel:
            now = utc_iso()
            uid = kernel.store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('a', 'admin', '[\"*\"]', ?)", (now,))
            kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('p', ?, ?)", (str(project), now))
            if mode != "off":
                backend = kernel.contributions.get("service", "memory").obj.obj
                backend.store.add_many(uid, ({"text": _sentence(rng)} for _ in range(500)), actor="bench")
                if mode.startswith("local"):
                    await backend.embedder.load()
                    print(f"  {mode}: queries embedded on {backend.embedder.query_backend} ({backend.embedder.query_precision})", flush=True)
                    while await drain_once(backend.store, backend.embedder, batch=64, max_batches=64):
                        pass
            service = kernel.contributions.get("service", "brain").obj.obj
            model = _Model()
            service.relay = lambda: model
            conv = service.create_conversation(uid, model="bench/instant")
            times = []
            cpu = []
            for i in range(turns + 10):
                t0, c0 = time.perf_counter(), time.process_time()
                await service.turn(uid, conv["id"], f"read hello.txt ({i}) " + _sentence(rng))
                if i >= 10:
                    times.append((time.perf_counter() - t0) * 1000)
                    cpu.append((time.process_time() - c0) * 1000)
            return {
                "mode": mode,
                "median_ms": statistics.median(times),
                "p95_ms": sorted(times)[int(len(times) * 0.95) - 1],
                "cpu_median_ms": statistics.median(cpu),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    base = None
    base_cpu = 0.0
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for mode in ("off", "keyword", "local", "local-float32", "local-torch"):
        r = trio.run(overhead, mode, args.turns)
        if base is None:
            base, base_cpu = r["median_ms"], r["cpu_median_ms"]
        extra = "" if mode == "off" else f" (+{r['median_ms'] - base:.2f} ms)"
        cpu = f"CPU time median {r['cpu_median_ms']:.2f} ms" + ("" if mode == "off" else f" (+{r['cpu_median_ms'] - base_cpu:.2f} ms)")
        print(f"memory {mode:13s}: turn median {r['median_ms']:.2f} ms{extra}, p95 {r['p95_ms']:.2f} ms, {cpu} over {args.turns} turns")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

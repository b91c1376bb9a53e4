"""Brain benchmarks; prints its figures.

1. Overhead of a turn excluding model time, with 50 extra tools registered: a real kernel with
   the brain plugin and a real SQLite file; the inference relay is replaced by an in-process
   model that answers at once (no HTTP), so what is timed is Elowen's own work per turn —
   storing messages, the tool table, hooks, the system prompt, events on the bus, one tool call
   round (``files.read`` through the path guard). Target: ≤ 5 ms per turn.
2. Time to first token of the embedded local model (SmolLM2-135M, llama-cpp-python), cold
   (model load included) and warm, if it is installed.

Run: ``.venv/bin/python bench/brain.py [--turns N]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elowen.core.store import utc_iso  # noqa: E402
from elowen.daemon.server import build_state  # noqa: E402
from elowen_builtins.inference.types import ChatRequest, ChatResult, Delta, Message, ToolCall, Usage  # noqa: E402
from elowen_sdk import Tool  # noqa: E402
from elowen_sdk.testing import plugin_kernel  # noqa: E402


class _Stream:
    def __init__(self, items: list[Any]) -> None:
        self._items = iter(items)
        self.result: ChatResult | None = None

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> Any:
        try:
            item = next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None
        if isinstance(item, ChatResult):
            self.result = item
        return item

    async def __aenter__(self) -> _Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class InstantModel:
    """Answers the first call of a turn with a ``files.read`` call, the second with text."""

    def __init__(self) -> None:
        self.tools_seen = 0

    def providers(self) -> list[dict[str, Any]]:
        """The one provider this stand-in relay serves (the shape of ``Relay.providers``)."""
        return [{"name": "bench", "kind": "openai", "base_url": "", "source": "settings", "error": None}]

    def stream(self, request: ChatRequest) -> _Stream:
        self.tools_seen = max(self.tools_seen, len(request.tools))
        last = request.messages[-1]
        if last.role == "user":
            result = ChatResult("", (ToolCall("call_1", "files_read", {"path": "hello.txt"}),), Usage(10, 5), "tool_calls")
            return _Stream([result])
        text = "The file says hello."
        return _Stream([Delta(text=text[:10]), Delta(text=text[10:]), ChatResult(text, (), Usage(10, 5))])


async def turn_overhead(turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "proj"
        project.mkdir()
        (project / "hello.txt").write_text("hello\n")
        async with plugin_kernel(root, enable=["brain", "inference"]) as kernel:
            build_state(kernel)  # the daemon's host services: the brain reads users and grants through them
            now = utc_iso()
            uid = kernel.store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('a', 'admin', '[\"*\"]', ?)", (now,))
            kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('p', ?, ?)", (str(project), now))
            for i in range(50):
                kernel.contributions.add(
                    "bench", "tool", Tool(f"bench.tool{i}", f"Tool {i}.", lambda i=i: i, {"type": "object", "properties": {"x": {"type": "string"}}}), []
                )
            service = kernel.contributions.get("service", "brain").obj.obj
            model = InstantModel()
            service.relay = lambda: model
            conv = service.create_conversation(uid, model="bench/instant")
            times = []
            for i in range(turns + 10):
                t0 = time.perf_counter()
                await service.turn(uid, conv["id"], f"read hello.txt ({i})")
                if i >= 10:
                    times.append((time.perf_counter() - t0) * 1000)
            if model.tools_seen < 50:
                raise SystemExit(f"bench/brain.py: only {model.tools_seen} tools were offered (expected the 50 extra): the set-up is wrong")
            return {"tools": model.tools_seen, "median_ms": statistics.median(times), "p95_ms": sorted(times)[int(len(times) * 0.95) - 1], "turns": len(times)}


async def local_ttft() -> dict[str, float] | str:
    try:
        from elowen_builtins.inference.relay import Relay
    except ImportError as exc:
        return f"unavailable: {exc}"
    relay = Relay(lambda: {})
    out: dict[str, float] = {}
    try:
        for label in ("cold_ms", "warm_ms"):
            t0 = time.perf_counter()
            async with relay.stream(ChatRequest("", [Message("user", "Say hello.")], max_tokens=32, stream=True)) as stream:
                async for item in stream:
                    if isinstance(item, Delta) and item.text and label not in out:
                        out[label] = (time.perf_counter() - t0) * 1000
            out[label.replace("_ms", "_total_ms")] = (time.perf_counter() - t0) * 1000
    except Exception as exc:  # not installed: say so
        return f"unavailable: {exc}"
    finally:
        await relay.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    overhead = trio.run(turn_overhead, args.turns)
    print(
        f"turn overhead (2 model calls + 1 tool call, {overhead['tools']} tools offered, model time excluded): "
        f"median {overhead['median_ms']:.2f} ms, p95 {overhead['p95_ms']:.2f} ms over {overhead['turns']} turns (target ≤ 5 ms)"
    )
    ttft = trio.run(local_ttft)
    if isinstance(ttft, str):
        print(f"local model time to first token: {ttft}")
    else:
        print(
            f"local model (SmolLM2-135M Q4_1) time to first token: cold {ttft['cold_ms']:.0f} ms "
            f"(whole reply {ttft['cold_total_ms']:.0f} ms), warm {ttft['warm_ms']:.0f} ms (whole reply {ttft['warm_total_ms']:.0f} ms)"
        )


if __name__ == "__main__":
    main()

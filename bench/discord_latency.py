"""Discord benchmarks; prints its figures.

1. Bridge cost: a round trip trio → asyncio thread → trio of a no-op coroutine through
   :class:`elowen_builtins.discord.bridge.AsyncioThread` (p50/p99), and the asyncio → trio
   hand-off (``run_sync_soon``) alone.
2. Inbound message → first streamed token visible: the scripted Discord server
   (tests/support/discord_server.py) dispatches a DM MESSAGE_CREATE over the real gateway
   WebSocket; the real discord.py client (on its own asyncio thread) hands it to trio, the
   brain runs a turn against the scripted model server (answering at once), and the first
   delta is POSTed back as a message. Timed at the server: dispatch → that POST's arrival.
   Sequential (``--turns``, p50/p99), then ``--concurrent`` linked senders at once (p50/p99
   of each sender's first token, and the wall time until every final reply was shown).

Run: ``.venv/bin/python bench/discord_latency.py [--turns 50] [--concurrent 50]``
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

from elowen_builtins.discord.bridge import AsyncioThread  # noqa: E402
from tests.platforms.conftest import platform_env, secret_file, until  # noqa: E402
from tests.support.discord_server import DiscordServer  # noqa: E402
from tests.support.model_server import Reply  # noqa: E402

REPLY = "Here is the answer, streamed to Discord as it is written."


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def show(label: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(f"{label}: n={len(ms)} p50={statistics.median(ms):.2f} ms p99={pct(ms, 99):.2f} ms max={max(ms):.2f} ms")


async def bridge(rounds: int) -> None:
    thread = AsyncioThread("bench-bridge")
    thread.start()

    async def noop() -> int:
        return 1

    trips: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        await thread.call(noop(), timeout=10)
        trips.append(time.perf_counter() - start)
    show("bridge round trip trio→asyncio→trio", trips)
    hops: list[float] = []
    for _ in range(rounds):
        done = trio.Event()
        sent = time.perf_counter()
        arrived: list[float] = []

        def land(arrived: list[float] = arrived, done: trio.Event = done) -> None:
            arrived.append(time.perf_counter())
            done.set()

        thread.loop.call_soon_threadsafe(lambda land=land: thread.to_trio(land))
        await done.wait()
        hops.append(arrived[0] - sent)
    show("asyncio→trio hand-off (incl. one call_soon_threadsafe)", hops)
    thread.stop()
    await thread.join(5)


def _link(env: Any, author: str, name: str) -> int:
    store = env.kernel.store
    uid = store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES (?, 'admin', '[\"*\"]', '2026-12-01T00:00:00Z')", (name,))
    store.execute(
        "INSERT INTO brain_channel_links (platform, platform_user, user_id, created_at) VALUES ('discord', ?, ?, '2026-12-01T00:00:00Z')", (author, uid)
    )
    return int(uid)


async def first_token(turns: int, concurrent: int) -> None:
    with tempfile.TemporaryDirectory(prefix="elowen-bench-discord-") as tmp, DiscordServer() as server:
        tmp_path = Path(tmp)
        token = secret_file(tmp_path / "token", "bench-token-123456")
        cfg = {
            "token_file": str(token),
            "api_base": server.api_base,
            "gateway_url": server.gateway_url,
            "edit_interval": 0.5,
            "max_concurrent_turns": max(50, concurrent),
        }
        async with platform_env(tmp_path, "discord", cfg) as env:
            env.script(fallback=Reply(text=REPLY))
            await until(lambda: env.platform("discord").get("state") == "connected", what="connected")

            async def one(author: str) -> tuple[float, float]:
                dm = "6" + author[1:]
                before = len(server.created(dm))
                sent = time.monotonic()
                await trio.to_thread.run_sync(lambda: server.message(author, "question", dm=True))
                posts = await until(lambda: server.created(dm)[before:], timeout=120, what="the first token")
                await until(lambda: REPLY in server.texts(dm), timeout=120, what="the final reply")
                return posts[0].at - sent, time.monotonic() - sent

            # one sender per turn: a channel allows 5 message creates/edits per 5 s, and the
            # point here is the pipeline, not Discord's per-channel bucket (measured below)
            seq_authors = [f"41{i:016d}" for i in range(turns + 1)]
            for i, a in enumerate(seq_authors):
                _link(env, a, f"bench-seq-{i}")
            await one(seq_authors[0])  # warm-up
            seq = [(await one(a))[0] for a in seq_authors[1:]]
            show("inbound → first streamed token (sequential, one channel each)", seq)
            same = "41" + "9" * 16
            _link(env, same, "bench-same")
            burst = [(await one(same))[0] for _ in range(10)]
            show("inbound → first streamed token (10 in a row in ONE channel: Discord's bucket)", burst)

            authors = [f"42{i:016d}" for i in range(concurrent)]
            for i, a in enumerate(authors):
                _link(env, a, f"bench-{i}")
            results: list[tuple[float, float]] = []
            start = time.monotonic()

            async def run(a: str) -> None:
                results.append(await one(a))

            async with trio.open_nursery() as nursery:
                for a in authors:
                    nursery.start_soon(run, a)
            wall = time.monotonic() - start
            show(f"inbound → first streamed token ({concurrent} conversations at once)", [r[0] for r in results])
            print(f"{concurrent} concurrent conversations: all final replies shown after {wall:.2f} s; rate-limited requests: {server.limited}")


async def main(args: argparse.Namespace) -> None:
    await bridge(args.rounds)
    await first_token(args.turns, args.concurrent)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2000)
    trio.run(main, parser.parse_args())

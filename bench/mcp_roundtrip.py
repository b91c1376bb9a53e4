"""The MCP server at ``/mcp``: cold start with the ``mcp`` plugin, and a tool call's round trip
against the REST call it stands for.

1. Cold start (fresh home, every builtin plugin, so ``mcp`` too): process start → first ``200``
   from ``GET /health``, → ``plugins: ready``, and the first MCP round trip after that (the
   SDK is imported then: connect + ``tools/list``). The lazy import keeps ``/health`` ≤ 1 s.
2. Round trip, one warm client each, sequential calls: the official SDK client's
   ``call_tool("task_get")`` against ``GET /tasks/{id}`` with httpx, same token. An MCP tool
   call is a stateless streamable HTTP POST answered as SSE, whose tool makes the REST call
   itself on loopback — so it costs one REST call plus the MCP framing.

Run: ``.venv/bin/python bench/mcp_roundtrip.py [calls] [cold-start runs]``; prints ms.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def start(home: Path, off: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], str, float, float]:
    """The daemon with every plugin but ``off``; its URL, seconds to /health 200 and to
    plugins ready."""
    env = {**os.environ, "ELOWEN_LOG_LEVEL": "WARNING"}
    env.pop("ELOWEN_DB", None)
    home.mkdir(parents=True)
    # no coding-agent provider: nothing is ever dispatched to a CLI
    (home / "config.toml").write_text("".join(f"[plugins.{n}]\nenabled = false\n" for n in ("claude-code", "opencode", "codex", "kilo", *off)))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "elowen.daemon", "--home", str(home), "--port", "0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    first = None
    while True:
        if proc.poll() is not None or time.perf_counter() - t0 > 60:
            raise RuntimeError("the daemon did not start")
        with contextlib.suppress(OSError, ValueError, KeyError, httpx.HTTPError):
            url = f"http://127.0.0.1:{json.loads((home / 'daemon.pid').read_text())['port']}"
            r = httpx.get(f"{url}/health", timeout=1)
            if r.status_code == 200:
                first = first or time.perf_counter() - t0
                if r.json().get("plugins") == "ready":
                    return proc, url, first, time.perf_counter() - t0
        time.sleep(0.005)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(20)


async def first_mcp(url: str, token: str) -> float:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    t0 = time.perf_counter()
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
            await client.list_tools()
    return time.perf_counter() - t0


async def round_trips(url: str, token: str, task_id: int, calls: int) -> tuple[list[float], list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    mcp_ms: list[float] = []
    rest_ms: list[float] = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
            for _ in range(10):  # warm up both paths
                await client.call_tool("task_get", {"task_id": task_id})
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as rest:
                for _ in range(10):
                    await rest.get(f"/tasks/{task_id}")
                for _ in range(calls):
                    t0 = time.perf_counter()
                    result = await client.call_tool("task_get", {"task_id": task_id})
                    mcp_ms.append((time.perf_counter() - t0) * 1000)
                    assert not result.is_error
                    t0 = time.perf_counter()
                    r = await rest.get(f"/tasks/{task_id}")
                    rest_ms.append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200
    return mcp_ms, rest_ms


def main(calls: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="elowen-bench-mcp-") as tmp:
        # runs with and without the mcp plugin interleave, so machine load hits both alike
        health: dict[str, list[float]] = {"on": [], "off": []}
        ready: dict[str, list[float]] = {"on": [], "off": []}
        first = []
        for i in range(runs):
            for mode in ("on", "off"):
                home = Path(tmp) / f"cold-{mode}-{i}"
                proc, url, h, r = start(home, () if mode == "on" else ("mcp",))
                try:
                    if mode == "on":
                        first.append(trio.run(first_mcp, url, (home / "admin.token").read_text().strip()))
                    health[mode].append(h)
                    ready[mode].append(r)
                finally:
                    stop(proc)
        for mode in ("on", "off"):
            print(
                f"cold start, all plugins, mcp {mode:>3} ({runs} runs): /health 200 median {statistics.median(health[mode]) * 1000:.0f} ms "
                f"(best {min(health[mode]) * 1000:.0f}, worst {max(health[mode]) * 1000:.0f}); plugins ready median {statistics.median(ready[mode]) * 1000:.0f} ms"
            )
        print(f"first MCP connect + tools/list after start (imports the SDK): median {statistics.median(first) * 1000:.0f} ms")

        proc, url, _, _ = start(Path(tmp) / "warm")
        try:
            token = (Path(tmp) / "warm" / "admin.token").read_text().strip()
            auth = {"Authorization": f"Bearer {token}"}
            (Path(tmp) / "proj").mkdir()
            pid = httpx.post(f"{url}/projects", json={"name": "bench", "path": str(Path(tmp) / "proj")}, headers=auth).json()["id"]
            task = httpx.post(f"{url}/tasks", json={"title": "bench", "project_id": pid}, headers=auth).json()["id"]
            mcp_ms, rest_ms = trio.run(round_trips, url, token, task, calls)
        finally:
            stop(proc)
        for label, xs in (("MCP tools/call task_get", mcp_ms), ("REST GET /tasks/{id}   ", rest_ms)):
            print(f"{label}: p50 {_pct(xs, 50):.2f} ms, p99 {_pct(xs, 99):.2f} ms, mean {statistics.fmean(xs):.2f} ms ({len(xs)} calls)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, int(sys.argv[2]) if len(sys.argv) > 2 else 3)

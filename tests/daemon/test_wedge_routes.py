"""Plugin routes: two plugins may each serve ``GET /hang`` under their own ``/plugins/<name>``
prefix, and a handler that hangs is cut at ``ELOWEN_RESPONSE_TIMEOUT`` with a 504 (real
kernel with real plugin packages, the daemon's real app)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import trio

from elowen.daemon.app import create_app
from elowen.daemon.server import build_state
from elowen_sdk.testing import plugin_kernel

PLUGIN = """
import threading, time
import trio
from elowen_sdk import Route, hookimpl

async def hang(request):
    await trio.sleep(3600)

def ping(request):
    return {{"plugin": "{name}"}}

@hookimpl
def register_routes(ctx, register):
    def block(request):  # sync and blocking: must not hold the daemon's event loop
        time.sleep(float(request.query.get("s", "2")))
        row = {{"one": len([ctx.config])}}  # ctx works from the worker thread
        return {{"main_thread": threading.current_thread() is threading.main_thread(), "one": row["one"]}}

    register(Route(method="GET", path="/hang", handler=hang, anonymous=True))
    register(Route(method="GET", path="/ping", handler=ping, anonymous=True))
    register(Route(method="GET", path="/block", handler=block, anonymous=True))
"""


def make_plugin(root: Path, name: str) -> str:
    pkg = root / f"{name}_pkg_{uuid.uuid4().hex[:6]}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(PLUGIN.format(name=name))
    (pkg / "elowen-plugin.toml").write_text(
        f'name = "{name}"\nversion = "1.0.0"\napi = "1"\nentry = "{pkg.name}.plugin"\n\n[contributes]\nroutes = ["GET /hang", "GET /ping", "GET /block"]\n'
    )
    return f"{pkg.name}.plugin"


async def test_same_route_in_two_plugins_and_a_hung_handler_is_504(tmp_path: Path) -> None:
    sys.path.insert(0, str(tmp_path))
    try:
        modules = [make_plugin(tmp_path, "one"), make_plugin(tmp_path, "two")]
        async with plugin_kernel(tmp_path, enable=["one", "two"], modules=modules, entry_points=False) as kernel:
            app = create_app(build_state(kernel), response_timeout=0.5)
            client = app.test_client()
            for name in ("one", "two"):
                r = await client.get(f"/plugins/{name}/ping")
                assert r.status_code == 200, (name, await r.get_data())
                assert (await r.get_json()) == {"plugin": name}
            t0 = time.monotonic()
            with trio.fail_after(5):
                r = await client.get("/plugins/two/hang")
            assert r.status_code == 504
            body = await r.get_json()
            assert body["error"]["code"] == "timeout" and "ELOWEN_RESPONSE_TIMEOUT" in body["error"]["message"]
            assert time.monotonic() - t0 < 2
            kernel.store.flush_audit()
            collisions = kernel.store.query("SELECT * FROM audit WHERE outcome = 'collision'")
            assert collisions == []
    finally:
        sys.path.remove(str(tmp_path))


async def test_a_third_party_sync_handler_that_blocks_does_not_hold_the_daemon(tmp_path: Path) -> None:
    sys.path.insert(0, str(tmp_path))
    try:
        modules = [make_plugin(tmp_path, "three")]
        async with plugin_kernel(tmp_path, enable=["three"], modules=modules, entry_points=False) as kernel:
            app = create_app(build_state(kernel), response_timeout=30)
            client = app.test_client()
            order: list[str] = []

            async def slow() -> None:
                r = await client.get("/plugins/three/block?s=2")
                order.append("block")
                assert r.status_code == 200 and (await r.get_json()) == {"main_thread": False, "one": 1}

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)
                await trio.sleep(0.2)
                r = await client.get("/plugins/three/ping")  # answered while the other blocks
                order.append("ping")
                assert r.status_code == 200
            assert order == ["ping", "block"]
            quick = create_app(build_state(kernel), response_timeout=0.5)
            r = await quick.test_client().get("/plugins/three/block?s=3")
            assert r.status_code == 504  # a blocked sync handler is abandoned at the timeout
    finally:
        sys.path.remove(str(tmp_path))

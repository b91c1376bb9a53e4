"""``POST /plugins/{name}/disable`` with dependents: 409 ``has_dependents`` naming them, or
``{"cascade": true}`` disabling them first; a consumer waiting for its provider shows the reason
in ``GET /plugins``. The daemon's real app over a real kernel (real SQLite file), called through
Quart's test client; the test plugins are those of ``tests/kernel/deps.py``."""

from __future__ import annotations

from pathlib import Path

from elowen.core.kernel import Kernel
from elowen.daemon.app import create_app
from elowen.daemon.auth import bootstrap_admin
from elowen.daemon.server import build_state
from tests.kernel import deps
from tests.kernel.deps import plugin

GREETER = "deptest.greeter"


async def test_disable_refused_with_dependents_then_cascade(tmp_path: Path) -> None:
    deps.LOG.clear()
    home = tmp_path / "home"
    sources = [plugin("alpha", requires=[GREETER]), plugin("zeta", provides=[GREETER])]
    async with Kernel.open(home, db_path=tmp_path / "elowen.db", discover_entry_points=False, sources=sources, watch_settings=False) as kernel:
        assert bootstrap_admin(kernel.store, home)
        app = create_app(build_state(kernel))
        client = app.test_client()
        auth = {"Authorization": f"Bearer {(home / 'admin.token').read_text().strip()}"}

        r = await client.post("/plugins/alpha/enable", headers=auth)
        assert r.status_code == 200
        body = await r.get_json()
        assert body["state"] == "error" and body["error"].startswith("waiting for service 'deptest.greeter'")
        listed = {p["name"]: p for p in (await (await client.get("/plugins", headers=auth)).get_json())["items"]}
        assert listed["alpha"]["error"] == body["error"]

        assert (await (await client.post("/plugins/zeta/enable", headers=auth)).get_json())["state"] == "enabled"
        assert kernel.registry.get("alpha").state == "enabled"

        r = await client.post("/plugins/zeta/disable", headers=auth)
        assert r.status_code == 409
        error = (await r.get_json())["error"]
        assert error["code"] == "has_dependents" and "alpha" in error["message"]
        assert kernel.registry.get("zeta").state == "enabled"

        r = await client.post("/plugins/zeta/disable", headers=auth, json={"cascade": "yes"})
        assert r.status_code == 422, "a strict body: cascade is a boolean"

        r = await client.post("/plugins/zeta/disable", headers=auth, json={"cascade": True})
        assert r.status_code == 200
        body = await r.get_json()
        assert body["state"] == "disabled" and body["cascaded"] == ["alpha"]
        assert kernel.registry.get("alpha").state == "disabled"
        assert [e[1] for e in deps.LOG if e[0] == "unload"] == ["alpha", "zeta"]

        r = await client.post("/plugins/alpha/disable", headers=auth)
        assert r.status_code == 200 and (await r.get_json())["cascaded"] == []

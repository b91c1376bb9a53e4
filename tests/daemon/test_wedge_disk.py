"""A full database answers 507 with a clear message (nothing kept, the disk reserve released),
``/health`` keeps answering, and a start on a full home is one line naming it. The "full disk"
is SQLite's own SQLITE_FULL, produced with ``PRAGMA max_page_count`` on the real file (a real
full filesystem needs mount privileges the test suite does not have)."""

from __future__ import annotations

from pathlib import Path

from elowen.daemon.app import create_app
from elowen.daemon.server import _storage_problem, build_state
from elowen.hosting import RESERVE_NAME, make_reserve
from elowen_sdk.testing import plugin_kernel


async def test_full_database_is_507_and_health_still_answers(tmp_path: Path) -> None:
    async with plugin_kernel(tmp_path, entry_points=False) as kernel:
        state = build_state(kernel)
        app = create_app(state)
        client = app.test_client()
        token = kernel.home / "admin.token"
        from elowen.daemon.auth import bootstrap_admin

        bootstrap_admin(kernel.store, kernel.home)
        headers = {"Authorization": f"Bearer {token.read_text().strip()}"}
        (tmp_path / "proj").mkdir()
        r = await client.post("/projects", json={"name": "p", "path": str(tmp_path / "proj")}, headers=headers)
        assert r.status_code == 201, await r.get_data()
        assert make_reserve(kernel.home)
        pages = kernel.store.query_one("PRAGMA page_count")["page_count"]
        kernel.store.execute(f"PRAGMA max_page_count = {pages}")
        before = kernel.store.query_one("SELECT count(*) AS n FROM tasks")["n"]
        for _ in range(3):
            r = await client.post("/tasks", json={"title": "t", "project_id": 1, "description": "x" * 90_000}, headers=headers)
            if r.status_code != 201:
                break
        assert r.status_code == 507, (r.status_code, await r.get_data())
        body = await r.get_json()
        assert body["error"]["code"] == "disk_full"
        assert "is full" in body["error"]["message"] and "MiB free" in body["error"]["message"]
        assert kernel.store.query_one("SELECT count(*) AS n FROM tasks")["n"] <= before + 2
        assert not (kernel.home / RESERVE_NAME).exists()  # released for the log and /health
        assert (await client.get("/health")).status_code == 200


def test_a_full_or_read_only_home_is_one_line(tmp_path: Path) -> None:
    line = _storage_problem(tmp_path / "home", OSError(28, "No space left on device"))
    assert "\n" not in line
    assert str(tmp_path / "home") in line and "MiB free" in line and "No space left" in line

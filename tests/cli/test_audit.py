"""``elowen audit`` against a real daemon: filters by actor, action and outcome, ``--limit``,
``--json`` and the table; admin only. And ``GET /audit``: the ``outcome`` filter applies and an
unknown query parameter is refused (422) instead of returning every row."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Home

pytestmark = pytest.mark.slow


def _fail_login(daemon: Home, name: str) -> None:
    r = httpx.post(f"{daemon.url}/auth/login", json={"name": name, "password": "wrong-password"}, timeout=10)
    assert r.status_code == 401


def test_audit_filters_limit_json_and_table(daemon: Home) -> None:
    created = daemon.json("user", "add", "audra")
    uid = created["user"]["id"]
    _fail_login(daemon, "nobody-here")
    _fail_login(daemon, "audra")

    denied = daemon.json("audit", "--outcome", "denied")
    assert denied and {r["outcome"] for r in denied} == {"denied"}
    assert [r["action"] for r in denied[:2]] == ["auth.login", "auth.login"]
    assert denied[0]["id"] > denied[1]["id"]  # newest first

    made = daemon.json("audit", "--action", "user.create", "--outcome", "ok")
    assert f"user:{uid}" in [r["target"] for r in made]
    assert {r["action"] for r in made} == {"user.create"}

    anon = daemon.json("audit", "--actor", "anonymous", "--limit", "1")
    assert len(anon) == 1 and anon[0]["actor"] == "anonymous"
    assert daemon.json("audit", "--actor", "no-such-actor") == []

    proc = daemon.run("audit", "--actor", "anonymous", "--limit", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["ID", "TIME", "ACTOR", "ACTION", "TARGET", "OUTCOME", "DETAIL"]
    assert len(lines) == 2 and "auth.login" in lines[1] and "denied" in lines[1]
    assert "older rows not shown" in proc.stderr
    assert "(no audit rows)" in daemon.ok("audit", "--action", "no.such.action")


def test_audit_is_admin_only(daemon: Home) -> None:
    token = daemon.json("user", "add", "auditmember")["token"]
    proc = daemon.run("audit", env={"ELOWEN_TOKEN": token})
    assert proc.returncode == 1 and proc.stdout == ""
    assert "error:" in proc.stderr


def test_api_outcome_filter_and_unknown_parameters(daemon: Home) -> None:
    _fail_login(daemon, "ghost")
    with httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.token()}"}, timeout=10) as api:
        rows = api.get("/audit", params={"outcome": "denied", "limit": 500}).json()["items"]
        assert rows and all(r["outcome"] == "denied" for r in rows)
        every = api.get("/audit", params={"limit": 500}).json()["items"]
        assert len(every) > len(rows)
        bad = api.get("/audit", params={"outcom": "denied"})
        assert bad.status_code == 422
        assert bad.json()["error"]["code"] == "validation_error" and "outcom" in bad.json()["error"]["message"]

"""Plugin config values (a provider's ``env`` may hold API keys) and tracebacks are shown to
admins only."""

from __future__ import annotations

import httpx

from .helpers import make_user


def test_members_never_see_plugin_config_values_or_tracebacks(shared_daemon):
    admin = httpx.Client(base_url=shared_daemon.url, headers={"Authorization": f"Bearer {shared_daemon.admin_token}"})
    r = admin.patch("/plugins/opencode/config", json={"values": {"env": {"OPENAI_API_KEY": "sk-test-secret"}}})
    assert r.status_code == 200, r.text
    try:
        assert admin.get("/plugins/opencode").json()["config"]["env"] == {"OPENAI_API_KEY": "sk-test-secret"}
        _, token = make_user(admin, "plugin-reader")
        member = httpx.Client(base_url=shared_daemon.url, headers={"Authorization": f"Bearer {token}"})
        for response in (member.get("/plugins/opencode"), member.get("/plugins")):
            assert response.status_code == 200
            assert "sk-test-secret" not in response.text
    finally:
        admin.patch("/plugins/opencode/config", json={"values": {"env": {}}})

"""The settings page's plugin toggle, for a plugin that enabled plugins require: the daemon's
409 ``has_dependents`` is shown as the page's message (not a 500), and nothing changes. A real
daemon and web process (the stack), driven over HTTP as htmx does."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from .stack import Stack


@pytest.fixture
def web(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as c:
        assert c.post("/login", data={"token": stack.admin_token, "next": "/"}).status_code == 302
        m = re.search(r'<meta name="csrf-token" content="([^"]+)">', c.get("/settings").text)
        assert m
        c.headers.update({"X-CSRF-Token": m.group(1), "HX-Request": "true"})
        yield c


@pytest.mark.slow
def test_disabling_a_required_plugin_shows_the_refusal(web: httpx.Client, stack: Stack) -> None:
    with httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {stack.admin_token}"}, timeout=10) as api:
        assert api.get("/plugins/agents").json()["state"] == "enabled"
        r = web.post("/actions/plugins/tmux/disable")
        assert r.status_code == 200
        assert 'class="flash err"' in r.text and "is required by enabled plugins" in r.text and "agents" in r.text
        assert api.get("/plugins/tmux").json()["state"] == "enabled"

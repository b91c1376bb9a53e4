"""The Providers page and ``GET /executors`` say when a provider's agents run unsandboxed (a
real daemon and web server, ``tests/web/stack.py``)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import tomli_w

from tests.agents.test_sandbox import needs_bwrap
from tests.web.stack import Stack


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    s.write_config()
    data = tomllib.loads((s.home / "config.toml").read_text())
    data["plugins"]["claude-code"]["config"]["sandbox"] = "none"
    data["plugins"].setdefault("codex", {}).setdefault("config", {})["sandbox"] = "bwrap"
    data["plugins"]["agents"]["config"]["project_sandbox"] = {"website": "none"}
    (s.home / "config.toml").write_text(tomli_w.dumps(data))
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


@needs_bwrap
def test_unsandboxed_providers_are_flagged(stack: Stack) -> None:
    with stack.admin() as api:
        listed = {i["name"]: i for i in api.get("/executors").json()["items"]}
    claude, codex = listed["claude"]["sandbox"], listed["codex"]["sandbox"]
    assert claude["mode"] == "none" and claude["sandboxed"] is False and "UNSANDBOXED" in claude["warning"]
    assert codex["mode"] == "bwrap" and codex["sandboxed"] is True and "website" in codex["warning"]  # a project set to none
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as web:
        assert web.post("/login", data={"token": stack.admin_token, "next": "/"}).status_code == 302
        page = web.get("/settings").text
    assert 'class="hint warn sandbox-warning" role="alert" data-executor="claude"' in page
    assert "UNSANDBOXED (sandbox = none)" in page

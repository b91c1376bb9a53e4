"""Setup health, through a real daemon and web process: whether each CLI executor's program is
found (path, version) in ``GET /executors``, Settings → Providers and the board's executor
picker; the board's create form warns (creating nothing) before a task on a CLI that is not
found, creates blocked with "Create", and retries a card on another executor; a member's
Settings shows the instance's real values, never a credential.

The Claude Code program is a small script answering ``--version`` like Claude Code 2.1.197 does
(``2.1.197 (Claude Code)``) and otherwise running the fake agent; Codex's is a path that does
not exist."""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import tomli_w

from tests.daemon.helpers import make_user
from tests.support.waiting import wait
from tests.web.stack import FAKE_AGENT, Stack

MISSING = "/nonexistent/elowen-test/codex"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    s.write_config()
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "2.1.197 (Claude Code)"; exit 0; fi\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
    claude.chmod(0o755)
    data = tomllib.loads((s.home / "config.toml").read_text())
    data["plugins"]["claude-code"]["config"].update(binary=str(claude), default_model="opus-realvalue", env={"ANTHROPIC_AUTH_TOKEN": "sk-never-shown"})
    data["plugins"]["codex"] = {"config": {"binary": MISSING}}
    (s.home / "config.toml").write_text(tomli_w.dumps(data))
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


@contextmanager
def _web(stack: Stack, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.web_url, timeout=20, follow_redirects=False) as c:
        assert c.post("/login", data={"token": token, "next": "/"}).status_code == 302
        yield c


def _csrf(page: str) -> dict[str, str]:
    m = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert m, "no csrf token on the page"
    return {"X-CSRF-Token": m.group(1), "HX-Request": "true"}


def test_executors_say_whether_each_cli_is_found(stack: Stack) -> None:
    with stack.admin() as api:
        items = {i["name"]: i for i in api.get("/executors").json()["items"]}
    claude = stack.root / "bin" / "claude"
    assert items["claude"]["cli"] == {"program": str(claude), "found": True, "path": str(claude), "version": "2.1.197"}
    assert items["codex"]["cli"] == {"program": MISSING, "found": False, "path": None, "version": None}
    assert "cli" not in items["elowen"]  # the brain runs in-process: no program to find


def test_settings_and_the_board_show_cli_health_and_warn_before_creating(stack: Stack) -> None:
    project = stack.project()
    with _web(stack, stack.admin_token) as web, stack.admin() as api:
        settings = web.get("/settings").text
        found = re.search(r'<p class="hint cli-found" data-executor="claude">(.*?)</p>', settings)
        assert found and str(stack.root / "bin" / "claude") in found.group(1) and "version 2.1.197" in found.group(1)
        missing = re.search(r'<p class="hint warn cli-missing" role="alert" data-executor="codex">(.*?)</p>', settings)
        assert missing and MISSING in missing.group(1)

        board = web.get("/kanban").text
        assert '<option value="codex" data-missing>codex: CLI not found</option>' in board
        assert re.search(r'<option value="sonnet">sonnet</option>', board)  # found: no mark
        assert re.search(r'<option value="">Default \(kilo:parked\)</option>', board)  # "Default" says what it is
        assert "instance's fallback executor" in board
        assert '<details class="card create" id="new-task">' in board  # behind its button, closed
        headers = _csrf(board)

        def titled(title: str) -> list[dict]:
            return [t for t in api.get("/tasks", params={"limit": 200}).json()["items"] if t["title"] == title]

        warned = web.post("/actions/tasks", data={"title": "on codex", "project_id": str(project), "exec": "codex", "start": "1"}, headers=headers)
        assert warned.status_code == 200 and "exec-missing" in warned.text and MISSING in warned.text and "Create anyway" in warned.text
        assert titled("on codex") == []  # nothing was created
        anyway = web.post(
            "/actions/tasks", data={"title": "on codex", "project_id": str(project), "exec": "codex", "start": "1", "confirm_missing": "1"}, headers=headers
        )
        assert anyway.headers.get("X-Elowen-Ok") == "1", anyway.text
        blocked = wait(lambda: (lambda ts: ts[0] if ts and ts[0]["state"] == "blocked" else None)(titled("on codex")), "the codex task blocked")
        assert "Cannot start codex" in blocked["resume_note"]

        # "Create" (not "Create and start"): created blocked, no agent; the warning is not needed
        held = web.post("/actions/tasks", data={"title": "held", "project_id": str(project), "exec": "codex", "start": "0"}, headers=headers)
        assert held.headers.get("X-Elowen-Ok") == "1" and "not started" in held.text, held.text
        task = titled("held")[0]
        assert task["state"] == "blocked" and "Created without starting" in task["resume_note"]
        assert api.get("/sessions", params={"task": task["id"]}).json()["items"] == []
        # the mission picker's value becomes the task's mission label at creation
        made = web.post(
            "/actions/tasks", data={"title": "in mission", "project_id": str(project), "exec": "sonnet", "mission": "5", "start": "0"}, headers=headers
        )
        assert made.headers.get("X-Elowen-Ok") == "1", made.text
        assert titled("in mission")[0]["labels"] == ["mission:5"]

        # a card's "Retry with…": the blocked codex task goes back to open on another executor
        board = web.get("/kanban").text
        assert f'hx-post="/actions/tasks/{blocked["id"]}/retry"' in board
        retried = web.post(f"/actions/tasks/{blocked['id']}/retry", data={"exec": "claude:sonnet"}, headers=headers)
        assert retried.headers.get("X-Elowen-Ok") == "1", retried.text
        after = api.get(f"/tasks/{blocked['id']}").json()
        assert after["exec"] == "claude:sonnet" and after["state"] in ("open", "in_progress")


def test_a_members_settings_show_the_real_values_but_no_credential(stack: Stack) -> None:
    with stack.admin() as api:
        _, token = make_user(api, "mia")
    member = httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    record = member.get("/plugins/claude-code").json()
    assert record["config"]["default_model"] == "opus-realvalue" and "env" not in record["config"]
    assert record["config_hidden"] == ["env"]
    with _web(stack, token) as web:
        page = web.get("/settings").text
    assert 'id="cfg-claude-code-default_model" name="default_model" value="opus-realvalue"' in page
    assert "sk-never-shown" not in page and "(set; shown to admins only)" in page

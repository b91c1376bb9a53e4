"""The dashboard's "Needs you now" in a real browser (Debian's chromium via Playwright) against a
real daemon, web process and a real agent process in tmux (the fake Claude Code of
``tests/agents/fake_agent.py``: real captured screens, reads real keys): a waiting permission
prompt answered inline with Allow (the agent gets the key), blocked tasks with their title,
and finished work whose worktree branch waits for review."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.waiting import wait
from tests.web.conftest import login, wait_js
from tests.web.stack import Stack

from .conftest import keep_screenshot
from .gitrepo import keep_worktrees_in, make_repo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("dashboard"))
    s.write_config()
    keep_worktrees_in(s.home / "config.toml", s.root / "worktrees")
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


def test_needs_you_now(browser: Any, stack: Stack) -> None:
    page = login(browser, stack, 1440, 900)
    assert page.inner_text("#needs").strip() == "Nothing needs you now."
    repo = make_repo(stack.root / "dash-repo")
    with stack.admin() as c:
        project = c.post("/projects", json={"name": "dash", "path": str(repo)}).json()["id"]
        task = c.post("/tasks", json={"title": "Agent needing a yes", "project_id": project, "exec": "claude:fake"}).json()
        stuck = c.post("/tasks", json={"title": "Cannot go on", "project_id": project}).json()
        c.patch(f"/tasks/{stuck['id']}", json={"state": "blocked"}).raise_for_status()
    # live: the waiting prompt arrives with its task's title and an inline Allow
    decision = page.wait_for_selector(f"#needs [data-decision]:has(a[href='/tasks/{task['id']}'])", timeout=30000)
    assert "Agent needing a yes" in decision.query_selector(".task-link").inner_text()
    assert "waiting" in decision.query_selector(".waited").inner_text()
    assert "hello-from-fake" in decision.inner_text()  # the exact request the agent wants to run
    page.wait_for_selector(f"#needs .blocked-task[data-task='{stuck['id']}']:has-text('Cannot go on')")
    wait(lambda: any(e["event"] == "prompt" for e in stack.fake_events()), "the fake agent's prompt")
    keep_screenshot(page, "needs-1440")
    decision.query_selector("button[value=approve]").click()
    wait(lambda: any(e["event"] == "idle" for e in stack.fake_events()), "the agent to go on after Allow")
    assert [e["key"] for e in stack.fake_events() if e["event"] == "key"] == ["1"]
    page.wait_for_selector(f"#needs [data-decision]:has(a[href='/tasks/{task['id']}'])", state="detached", timeout=10000)
    # finished: its worktree branch is work to review, linked to the task's review panel
    with stack.admin() as c:
        c.post(f"/tasks/{task['id']}/cancel").raise_for_status()
    item = page.wait_for_selector(f"#needs .to-review[data-task='{task['id']}']", timeout=15000)
    assert f"elowen/task-{task['id']}" in item.inner_text() and "Agent needing a yes" in item.inner_text()
    wait_js(page, "!document.querySelector('#needs').textContent.includes('Nothing needs you now')")
    assert not page.errors
    page.context.close()

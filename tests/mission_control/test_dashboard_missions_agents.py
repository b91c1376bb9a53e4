"""The dashboard's missions and agents in real chromium against a real daemon, web process,
overseer and a real agent process in tmux (the fake Claude Code): each mission shows its tasks
done of total (from the tasks' real states), its autonomy level and whether it is engaged or
paused, live; each running agent shows its task's title, project, executor, signal and age, and
the panel says that spend per agent is not recorded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.conftest import login, wait_js
from tests.web.stack import Stack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("dash-missions"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


def test_missions_progress_level_state_and_agents(browser: Any, stack: Stack) -> None:
    project = stack.project()
    with stack.admin() as c:
        c.post("/plugins/overseer/enable").raise_for_status()
        try:
            ids = [c.post("/tasks", json={"title": f"Mission part {i}", "project_id": project}).json()["id"] for i in range(3)]
            mission = c.post("/missions", json={"name": "Ship it", "level": "L2", "project_id": project, "task_ids": ids, "engage": False}).json()
            page = login(browser, stack, 1440, 900)
            row = f"#missions [data-mission='{mission['id']}']"
            page.wait_for_selector(row, timeout=10000)
            assert page.get_attribute(f"{row} .mission-progress", "data-done") == "0"
            assert "0 of 3 tasks done" in page.inner_text(f"{row} .mission-progress")
            assert page.inner_text(f"{row} .pill.level") == "L2"
            assert page.inner_text(f"{row} .pill[class*=state-]") == "paused"  # not engaged yet

            # progress follows the tasks' real states, live (task.* events)
            c.patch(f"/tasks/{ids[0]}", json={"state": "closed"}).raise_for_status()
            c.post(f"/tasks/{ids[1]}/cancel").raise_for_status()
            page.wait_for_selector(f"{row} .mission-progress[data-done='1']", timeout=10000)
            wait_js(page, f"document.querySelector(\"{row} .mission-progress\").textContent.includes('1 cancelled')")
            assert "1 of 3 tasks done, 1 cancelled" in " ".join(page.inner_text(f"{row} .mission-progress").split())

            # engaged, then paused; the level changed elsewhere shows up too
            c.post(f"/missions/{mission['id']}/engage").raise_for_status()
            wait_js(page, f"document.querySelector(\"{row} .pill[class*=state-]\").textContent === 'engaged'")
            c.post(f"/missions/{mission['id']}/pause").raise_for_status()
            wait_js(page, f"document.querySelector(\"{row} .pill[class*=state-]\").textContent === 'paused'")
            c.patch(f"/missions/{mission['id']}", json={"level": "L0"}).raise_for_status()
            wait_js(page, f"document.querySelector(\"{row} .pill.level\")?.textContent === 'L0'")

            # a running agent: task title, project, executor, signal, age; spend said to be absent
            task = c.post("/tasks", json={"title": "Agent at work", "project_id": project, "exec": "claude:fake"}).json()
            agent = page.wait_for_selector(f"#agents [data-task='{task['id']}']", timeout=30000)
            text = agent.inner_text()
            assert f"#{task['id']} Agent at work" in text and "claude" in text
            assert page.inner_text(f"#agents [data-task='{task['id']}'] .agent-project") == "demo"
            assert page.inner_text(f"#agents [data-task='{task['id']}'] .agent-age") in ("under a minute", "1 min")
            assert agent.query_selector(".pill[data-signal]") is not None
            assert "Spend per agent is not recorded" in page.inner_text("#agents-spend")
            c.post(f"/tasks/{task['id']}/cancel").raise_for_status()
            assert not page.errors
            page.context.close()
        finally:
            c.post("/plugins/overseer/disable").raise_for_status()

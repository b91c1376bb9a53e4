"""The kanban board at 2,000 tasks, in a real browser (Debian's chromium via Playwright) against
a real daemon and web process: per-state counts from ``GET /tasks/counts``, each column paged
newest first by the daemon's cursor (no 500-task cap), Closed/Cancelled bounded with "Show
more", a new task visible at once, and filters kept in the URL.

The agents plugin is off in this stack (no scheduler walking 2,000 ready tasks on a 2-core
machine); the board needs only the daemon's task routes."""

from __future__ import annotations

import time
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import tomli_w

from tests.web.conftest import login, wait_js
from tests.web.stack import Stack

from .conftest import keep_screenshot

pytestmark = pytest.mark.slow  # seeding 2,000 tasks through the API takes ~30 s

N_TASKS = 2000
STATES = ("open", "in_progress", "blocked", "closed", "cancelled")


def _state_of(i: int) -> str:
    """The state task number ``i`` (0-based) is put in: 20% open, 5% in progress, 5% blocked,
    45% closed, 25% cancelled."""
    r = i % 20
    return "open" if r < 4 else "in_progress" if r == 4 else "blocked" if r == 5 else "closed" if r < 15 else "cancelled"


@dataclass
class BoardStack(Stack):
    def write_config(self) -> None:
        super().write_config()
        path = self.home / "config.toml"
        config = tomllib.loads(path.read_text())
        for name in ("agents", "deriver"):
            config["plugins"].setdefault(name, {})["enabled"] = False
        path.write_text(tomli_w.dumps(config))


@dataclass(frozen=True)
class Seeded:
    ids: dict[str, list[int]]  # state -> task ids, ascending
    labelled: Counter[str]  # state -> tasks labelled "ui"
    project: int


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BoardStack, Seeded]]:
    s = BoardStack(tmp_path_factory.mktemp("kanban"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        project = s.project()
        ids: dict[str, list[int]] = {st: [] for st in STATES}
        labelled: Counter[str] = Counter()
        t0 = time.perf_counter()
        with s.admin() as c:
            for i in range(N_TASKS):
                labels = ["ui"] if i % 10 == 0 else []
                task = c.post("/tasks", json={"title": f"Seeded task {i}", "project_id": project, "priority": i % 5, "labels": labels}).json()
                state = _state_of(i)
                if state != "open":
                    c.patch(f"/tasks/{task['id']}", json={"state": state}).raise_for_status()
                ids[state].append(int(task["id"]))
                labelled[state] += bool(labels)
        print(f"seeded {N_TASKS} tasks through the API in {time.perf_counter() - t0:.1f} s")
        yield s, Seeded(ids, labelled, project)
    finally:
        s.stop()


def test_counts_and_newest_first_paging_cover_every_task(board: tuple[BoardStack, Seeded]) -> None:
    stack, seeded = board
    with stack.admin() as c:
        counts = c.get("/tasks/counts").json()
        assert counts["counts"] == {st: len(seeded.ids[st]) for st in STATES} and counts["total"] == N_TASKS
        assert c.get("/tasks/counts", params={"label": "ui"}).json()["counts"] == {st: seeded.labelled[st] for st in STATES}
        # page the biggest column newest first, 500 at a time: every id once, in order
        seen: list[int] = []
        cursor = None
        while True:
            page = c.get("/tasks", params={"state": "closed", "order": "desc", "limit": 500, **({"cursor": cursor} if cursor else {})}).json()
            seen += [t["id"] for t in page["items"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert seen == sorted(seeded.ids["closed"], reverse=True)
        # text filter: LIKE wildcards are literal
        assert c.get("/tasks/counts", params={"q": "task 1999"}).json()["total"] == 1
        assert c.get("/tasks/counts", params={"q": "%"}).json()["total"] == 0
        assert c.get("/tasks", params={"order": "sideways"}).status_code == 422


def _column(page: Any, state: str) -> dict[str, Any]:
    return page.evaluate(
        """s => { const col = document.querySelector(`#kanban section[data-state=${s}]`);
        return {count: Number(col.querySelector('.count').textContent), cards: [...col.querySelectorAll('.task-card')].map(c => Number(c.dataset.task)),
                more: !!col.querySelector('.more button')}; }""",
        state,
    )


def test_board_with_2000_tasks(browser: Any, board: tuple[BoardStack, Seeded]) -> None:
    stack, seeded = board
    page = login(browser, stack, 1440, 900)
    t0 = time.perf_counter()
    page.goto(stack.web_url + "/kanban")
    page.wait_for_selector("#conn[data-state=live]")
    print(f"/kanban with {N_TASKS} tasks: loaded and live in {(time.perf_counter() - t0) * 1000:.0f} ms")
    for state in STATES:
        col = _column(page, state)
        assert col["count"] == len(seeded.ids[state]), state  # the real count, not the cards shown
        shown = 10 if state in ("closed", "cancelled") else 50
        assert col["cards"] == sorted(seeded.ids[state], reverse=True)[:shown], state  # newest first
        assert col["more"] is (len(seeded.ids[state]) > shown), state

    keep_screenshot(page, "kanban-2000-1440", full_page=False)
    # Closed is bounded; "Show more" adds the next page in place
    page.click("#kanban section[data-state=closed] .more button")
    wait_js(page, "document.querySelectorAll('#kanban section[data-state=closed] .task-card').length === 60")
    assert _column(page, "closed")["cards"] == sorted(seeded.ids["closed"], reverse=True)[:60]

    # a new task is on the board at once, on top of Open, and the count follows
    title = f"Task number {N_TASKS + 1} {time.time_ns()}"
    page.click("#new-task-toggle")  # the create form is behind its button
    page.fill("#t-title", title)
    t0 = time.perf_counter()
    page.click("#create-task button[type=submit]")
    page.wait_for_selector(f"#kanban section[data-state=open] .task-card:first-child:has-text('{title}')", timeout=10000)
    print(f"created → first card of Open: {(time.perf_counter() - t0) * 1000:.0f} ms")
    assert _column(page, "open")["count"] == len(seeded.ids["open"]) + 1

    # a per-card action: Reopen on the newest cancelled card (seeded without a label)
    newest = max(seeded.ids["cancelled"])
    page.click(f"#kanban section[data-state=cancelled] .task-card[data-task='{newest}'] .card-reopen")
    page.wait_for_selector(f"#kanban section[data-state=open] .task-card[data-task='{newest}']", timeout=10000)
    assert _column(page, "cancelled")["count"] == len(seeded.ids["cancelled"]) - 1
    assert _column(page, "open")["count"] == len(seeded.ids["open"]) + 2
    assert not page.errors
    page.context.close()


def test_filters_live_in_the_url(browser: Any, board: tuple[BoardStack, Seeded]) -> None:
    stack, seeded = board
    page = login(browser, stack, 1440, 900)
    page.goto(stack.web_url + "/kanban?label=ui")
    page.wait_for_selector("#conn[data-state=live]")
    for state in STATES:
        assert _column(page, state)["count"] == seeded.labelled[state], state
    assert page.input_value("#f-label") == "ui"
    assert page.get_attribute("#kanban", "data-src") == "/partials/kanban?label=ui"  # live refreshes keep the filter
    # the form: text + priority, submitted as a GET into the URL
    page.fill("#f-label", "")
    page.fill("#f-q", "Seeded task 1234")
    page.select_option("#f-priority", "4")
    page.click("#kanban-filters button[type=submit]")
    page.wait_for_url("**/kanban?*")
    query = parse_qs(urlparse(page.url).query)
    assert query["q"] == ["Seeded task 1234"] and query["priority"] == ["4"]
    cards = page.evaluate("[...document.querySelectorAll('#kanban .task-card')].map(c => c.textContent)")
    assert len(cards) == 1 and "Seeded task 1234" in cards[0]  # 1234 % 5 == 4
    page.select_option("#f-priority", "3")
    page.click("#kanban-filters button[type=submit]")
    page.wait_for_selector("#kanban .task-card", state="detached")
    assert sum(_column(page, st)["count"] for st in STATES) == 0
    assert not page.errors
    page.context.close()

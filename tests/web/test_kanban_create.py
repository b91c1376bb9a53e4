"""The board's create form in real chromium: behind its "New task" button; "Create" makes a task
that does not start (blocked, with a note) while "Create and start" makes an open one; on an
executor whose CLI is not found the form warns first and creates nothing until "Create anyway";
a card's "Retry with…" reopens it on another executor.

The stack's Claude Code is the fake agent (found); Codex is pointed at a program that does not
exist, so its specs are "CLI not found"."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import tomli_w

from tests.support.waiting import wait
from tests.web.stack import Stack

from .conftest import login

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    import tomllib

    s = Stack(tmp_path_factory.mktemp("kanban-create"))
    s.write_config()
    data = tomllib.loads((s.home / "config.toml").read_text())
    data["plugins"]["codex"] = {"config": {"binary": "/nonexistent/elowen-test/codex"}}
    (s.home / "config.toml").write_text(tomli_w.dumps(data))
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


def _task(stack: Stack, title: str) -> dict[str, Any] | None:
    with stack.admin() as api:
        return next((t for t in api.get("/tasks", params={"limit": 200}).json()["items"] if t["title"] == title), None)


def test_create_form_buttons_warning_and_retry(browser: Any, stack: Stack) -> None:
    stack.project()
    page = login(browser, stack)
    page.goto(stack.web_url + "/kanban")
    assert not page.is_visible("#t-title")  # behind its button
    page.click("#new-task-toggle")
    assert page.is_visible("#t-title")

    held = f"Held {time.time_ns()}"
    page.fill("#t-title", held)
    page.select_option("#t-exec", "sonnet")
    page.click("#create-only")
    page.wait_for_selector("#create-result .flash.ok")
    task = wait(lambda: _task(stack, held), "the held task")
    assert task["state"] == "blocked" and "Created without starting" in task["resume_note"]

    warned = f"On codex {time.time_ns()}"
    page.fill("#t-title", warned)
    page.select_option("#t-exec", "codex")
    assert "CLI not found" in page.inner_text("#t-exec option[value=codex]")
    page.click("#create-start")
    page.wait_for_selector("#create-result .exec-missing")
    assert "not found" in page.inner_text("#create-result") and _task(stack, warned) is None
    page.click("#create-result button:has-text('Create anyway')")
    made = wait(lambda: _task(stack, warned), "the task created anyway")
    assert made["exec"] == "codex"

    # its card (blocked: the program is missing) offers Retry with… another executor
    blocked = wait(lambda: (lambda t: t if t and t["state"] == "blocked" else None)(_task(stack, warned)), "the codex task blocked")
    card = f"#kanban .task-card[data-task='{blocked['id']}']"
    page.wait_for_selector(f"{card} .card-retry")
    page.click(f"{card} .card-retry summary")
    page.select_option(f"#retry-{blocked['id']}", "sonnet")
    page.click(f"{card} .card-retry button[type=submit]")
    wait(lambda: (lambda t: t if t["exec"] == "sonnet" and t["state"] != "blocked" else None)(_task(stack, warned)), "retried on sonnet")
    assert not page.errors
    page.context.close()


def test_new_task_button_opens_from_the_keyboard(browser: Any, stack: Stack) -> None:
    page = login(browser, stack)
    page.goto(stack.web_url + "/kanban")
    page.focus("#new-task-toggle")
    page.keyboard.press("Enter")
    page.wait_for_selector("#t-title", state="visible")
    page.context.close()

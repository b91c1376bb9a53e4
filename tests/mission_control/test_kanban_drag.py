"""Dragging cards between kanban columns in real chromium (Playwright's ``drag_to``, which
fires HTML5 drag and drop events) against a real daemon and web process: a legal move runs the
card's action (onto Cancelled cancels, onto Open reopens) and the daemon's state follows; an
illegal drop is refused with its reason in the live region and the card stays; the card's
buttons do the same from the keyboard.

The agents plugin is off in this stack: no agent takes the reopened tasks, so their states are
exactly what the drags made them."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import tomli_w

from elowen.daemon.services.tasks import TRANSITIONS
from elowen.web.views import panels  # first: it imports .kanban itself
from elowen.web.views.kanban import MOVES, move_of
from tests.web.conftest import login
from tests.web.stack import Stack


def test_every_drag_the_board_runs_is_a_legal_transition() -> None:
    for (src, dst), action in MOVES.items():
        assert dst in TRANSITIONS[src] and action in ("cancel", "reopen"), (src, dst)
    for src in panels.TASK_STATES:
        for dst in panels.TASK_STATES:
            move = move_of(src, dst)
            assert ("action" in move) is ((src, dst) in MOVES)
            if "reason" in move:
                assert move["reason"].strip()
    assert move_of("closed", "cancelled") == {"reason": "is closed: it can only be reopened (drop it on Open)."}


@dataclass
class DragStack(Stack):
    def write_config(self) -> None:
        super().write_config()
        path = self.home / "config.toml"
        config = tomllib.loads(path.read_text())
        for name in ("agents", "deriver"):
            config["plugins"].setdefault(name, {})["enabled"] = False
        path.write_text(tomli_w.dumps(config))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DragStack]:
    s = DragStack(tmp_path_factory.mktemp("kanban-drag"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


def _state(stack: Stack, task_id: int) -> str:
    with stack.admin() as c:
        return str(c.get(f"/tasks/{task_id}").json()["state"])


def _card(task_id: int, state: str | None = None) -> str:
    col = f"#kanban section[data-state={state}] " if state else "#kanban "
    return f"{col}.task-card[data-task='{task_id}']"


@pytest.mark.slow
def test_drag_legal_moves_refuse_illegal_ones(browser: Any, stack: DragStack) -> None:
    project = stack.project()
    ids: dict[str, int] = {}
    with stack.admin() as c:
        for name, state in (("opened", "open"), ("closed", "closed"), ("cancelled", "cancelled"), ("keyboard", "closed")):
            task = c.post("/tasks", json={"title": f"Drag {name}", "project_id": project}).json()
            if state != "open":
                c.patch(f"/tasks/{task['id']}", json={"state": state}).raise_for_status()
            ids[name] = int(task["id"])
    page = login(browser, stack, 1440, 900)
    page.goto(stack.web_url + "/kanban")
    page.wait_for_selector("#conn[data-state=live]")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))

    # Open → Cancelled: cancels (after the same confirmation as the Cancel button)
    page.locator(_card(ids["opened"], "open")).drag_to(page.locator("#kanban section[data-state=cancelled]"))
    page.wait_for_selector(_card(ids["opened"], "cancelled"), timeout=10000)
    assert _state(stack, ids["opened"]) == "cancelled"
    assert dialogs and f"#{ids['opened']}" in dialogs[0]
    assert f"Task #{ids['opened']} cancelled." in page.inner_text("#flash-kanban")

    # Cancelled → Open: reopens
    page.locator(_card(ids["cancelled"], "cancelled")).drag_to(page.locator("#kanban section[data-state=open]"))
    page.wait_for_selector(_card(ids["cancelled"], "open"), timeout=10000)
    assert _state(stack, ids["cancelled"]) == "open"
    assert f"Task #{ids['cancelled']} reopened." in page.inner_text("#flash-kanban")

    # Closed → In progress: refused with the reason, the card stays in Closed
    closed = ids["closed"]
    page.locator(_card(closed, "closed")).drag_to(page.locator("#kanban section[data-state=in_progress]"))
    page.wait_for_selector("#flash-kanban .flash.err[role=alert]")
    assert page.inner_text("#flash-kanban") == f"Task #{closed} cannot be started by a drop: drop it on Open to queue it, and an agent takes it."
    assert page.is_visible(_card(closed, "closed")) and _state(stack, closed) == "closed"
    # the drag was announced with where the card may go
    assert page.inner_text("#kanban-announce") == f"Dragging task #{closed} (Closed). It can be dropped on: Open."

    # Closed → Cancelled: the daemon's rule (closed can only become open), said before asking it
    page.locator(_card(closed, "closed")).drag_to(page.locator("#kanban section[data-state=cancelled]"))
    page.wait_for_function(f"document.getElementById('flash-kanban').textContent.includes('Task #{closed} is closed: it can only be reopened')")
    assert page.is_visible(_card(closed, "closed")) and _state(stack, closed) == "closed"
    assert len(dialogs) == 1  # a refused drop asks nothing

    # the keyboard way: the card's Reopen button, reached by Tab-free focus and Enter
    page.focus(f"{_card(ids['keyboard'], 'closed')} .card-reopen")
    page.keyboard.press("Enter")
    page.wait_for_selector(_card(ids["keyboard"], "open"), timeout=10000)
    assert _state(stack, ids["keyboard"]) == "open"
    assert not page.errors
    page.context.close()

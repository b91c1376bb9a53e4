"""The task page's live terminal in a real browser (Debian's chromium via Playwright) against a
real daemon, web process and tmux pane: the keyboard can never reach the agent without an
explicit entry, underscores are drawn inside their row, and a phone gets a readable font that
scrolls instead of shrinking.

The agent is the recording agent of ``agentstack.py``: every byte it reads is in a file, so
"nothing was typed" is checked at the agent itself."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.waiting import wait
from tests.web.conftest import login, wait_js

from .agentstack import SCREEN_MARK, UNDERSCORES, AgentStack, astack  # noqa: F401  (fixture)
from .png import decode

pytestmark = pytest.mark.slow

HELPER = "document.activeElement && document.activeElement.classList.contains('xterm-helper-textarea')"


@pytest.fixture(scope="module")
def agent(astack: AgentStack) -> tuple[int, str]:  # noqa: F811
    return astack.start_agent("Terminal keyboard safety")


def _open(browser: Any, stack: AgentStack, task_id: int, width: int = 1440, height: int = 900) -> Any:
    page = login(browser, stack, width, height)
    page.goto(f"{stack.web_url}/tasks/{task_id}")
    page.wait_for_selector("#terminal[data-connected='1']")
    wait_js(page, "t => (document.querySelector('#terminal .xterm-rows') || {}).textContent?.includes(t)", arg=SCREEN_MARK, timeout=30000)
    return page


def _sentinel_after(stack: AgentStack, session: str, before: int) -> bytes:
    """Type a unique line through the daemon's keys API and return what the agent read after
    ``before`` up to it: keys the browser typed meanwhile would show up in front of it."""
    mark = f"sentinel-{uuid.uuid4().hex[:8]}"
    with stack.admin() as c:
        c.post(f"/sessions/{session}/keys", json={"text": mark, "submit": True}).raise_for_status()
    return wait(lambda: (lambda got: got if got.endswith(f"{mark}\r".encode()) else None)(stack.typed()[before:]), "the sentinel")


def test_tab_never_reaches_the_agent_without_an_explicit_entry(browser: Any, astack: AgentStack, agent: tuple[int, str]) -> None:  # noqa: F811
    task_id, session = agent
    page = _open(browser, astack, task_id)
    # "Allow typing" starts off
    assert page.get_attribute("#terminal", "data-input") == "0"
    assert page.get_attribute("#term-input", "aria-pressed") == "false"
    # worst case: typing allowed (then focus goes back to the page top)
    page.click("#term-input")
    page.wait_for_selector("#terminal[data-input='1'][data-connected='1']")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    before = len(astack.typed())
    seen_box = 0
    for _ in range(80):  # more than every tab stop of the page, twice round
        page.keyboard.press("Tab")
        assert not page.evaluate(HELPER), "Tab moved focus into the terminal's input"
        seen_box += page.evaluate("document.activeElement.id === 'terminal'")
    assert seen_box >= 1  # the terminal box is a tab stop of its own (not skipped)
    got = _sentinel_after(astack, session, before)
    assert got.startswith(b"sentinel-"), f"the agent read keys the page never meant to send: {got!r}"

    # the explicit entry: Enter on the focused box, then keys go to the agent; Esc leaves
    page.focus("#terminal")
    page.keyboard.press("Enter")
    assert page.evaluate(HELPER) and page.get_attribute("#terminal", "data-entered") == "1"
    before = len(astack.typed())
    page.keyboard.type("hi_there")
    page.keyboard.press("Enter")
    wait(lambda: astack.typed()[before:] == b"hi_there\r", "the typed line at the agent", timeout=10)
    page.keyboard.press("Escape")
    assert not page.evaluate(HELPER) and page.evaluate("document.activeElement.id") == "terminal"
    assert page.get_attribute("#terminal", "data-entered") == "0"
    before = len(astack.typed())
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert not page.evaluate(HELPER)
    assert _sentinel_after(astack, session, before).startswith(b"sentinel-")  # Esc was not sent either
    assert not page.errors
    page.context.close()


def _underscore_pixels(page: Any) -> tuple[int, int]:
    """In the terminal row that holds the full line of underscores: how many pixel columns
    inside the row's own box show a light stroke, out of the line's width in pixels."""
    rect = page.evaluate(
        """u => {
        const rows = [...document.querySelectorAll('#terminal .xterm-rows > div')];
        const row = rows.find(r => r.textContent.startsWith(u));
        if (!row) return null;
        const b = row.getBoundingClientRect();
        const screen = document.querySelector('#terminal .xterm-screen').getBoundingClientRect();
        const cell = screen.width / 200;
        return {x: b.left, y: b.top, width: Math.min(b.width, cell * u.length), height: b.height};
    }""",
        UNDERSCORES,
    )
    assert rect, "the row of underscores is not drawn"
    page.evaluate("document.activeElement && document.activeElement.blur()")
    image = decode(page.screenshot(clip=rect))
    lit = 0
    for x in range(image.width):
        if any(sum(image.pixel(x, y)) > 300 for y in range(image.height)):
            lit += 1
    return lit, image.width


def test_underscores_are_drawn_inside_their_row(browser: Any, astack: AgentStack, agent: tuple[int, str]) -> None:  # noqa: F811
    task_id, _ = agent
    page = _open(browser, astack, task_id)
    wait_js(page, "u => [...document.querySelectorAll('#terminal .xterm-rows > div')].some(r => r.textContent.startsWith(u))", arg=UNDERSCORES)
    page.wait_for_timeout(300)  # the vendored font's re-measure
    lit, width = _underscore_pixels(page)
    print(f"underscore row: {lit} of {width} pixel columns lit")
    assert lit >= 0.8 * width, f"the underscores are clipped: only {lit} of {width} pixel columns show a stroke"
    assert "fake_created.txt" in page.evaluate("document.querySelector('#terminal .xterm-rows').textContent")
    family = page.evaluate("getComputedStyle(document.querySelector('#terminal .xterm-rows')).fontFamily")
    assert "Elowen Mono" in family
    assert page.evaluate("document.fonts.check(\"12px 'Elowen Mono'\")")  # the vendored font loaded
    page.context.close()


def test_phone_terminal_scrolls_instead_of_shrinking_below_11px(browser: Any, astack: AgentStack, agent: tuple[int, str]) -> None:  # noqa: F811
    task_id, _ = agent
    page = _open(browser, astack, task_id, 390, 844)
    wait_js(page, "document.querySelector('#terminal').dataset.fontSize")
    size = float(page.get_attribute("#terminal", "data-font-size"))
    assert size >= 11, f"terminal font {size} px on a phone"
    box = page.evaluate("(() => { const b = document.querySelector('#terminal'); return [b.scrollWidth, b.clientWidth]; })()")
    assert box[0] > box[1]  # the 200-column pane scrolls sideways inside its box
    doc = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert doc[0] <= doc[1], f"the page itself overflows sideways: {doc}"
    page.context.close()

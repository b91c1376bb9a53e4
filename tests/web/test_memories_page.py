"""The Memories page in Debian's chromium (Playwright) against a real daemon and web process:
add → edit (a new version supersedes) → history → forget (after the confirmation) round trip,
search and the kind filter, where a memory came from (saved by hand, ``/remember`` in a
conversation, with the conversation's title and "Open conversation"), the empty state naming
whether curation is on, a second user never seeing the first's memories (admins included: each
sees only their own), and the memory plugin disabled → the page says long-term memory is off (and
comes back live when it is enabled again).

``ELOWEN_WEB_SCREENSHOTS=docs/screenshots`` keeps ``memories-1440.png`` and ``memories-390.png``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import tomli_w

from tests.mission_control.conftest import keep_screenshot

from .conftest import wait_js
from .stack import Stack
from .test_accessibility import CONTRAST_JS, axe, open_page, serious

pytestmark = pytest.mark.slow


class MemoryStack(Stack):
    """The web stack with the memory plugin's embedding provider off (keyword recall only: the
    page does not depend on embeddings, and the offline model would load for nothing)."""

    def write_config(self) -> None:
        super().write_config()
        path = self.home / "config.toml"
        config = tomllib.loads(path.read_text())
        config["plugins"]["memory"] = {"config": {"embedding_provider": "none"}}
        path.write_text(tomli_w.dumps(config))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = MemoryStack(tmp_path_factory.mktemp("memories"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def member(stack: Stack) -> Iterator[str]:
    with stack.admin() as c:
        r = c.post("/users", json={"name": "memmember", "role": "member"})
        assert r.status_code == 201, r.text
        yield str(r.json()["token"])


def memories_page(browser: Any, stack: Stack, token: str | None, size: str = "1440", query: str = "") -> Any:
    page = open_page(browser, stack, size, token=token)
    page.goto(stack.web_url + "/memories" + query)
    page.wait_for_selector("#memories")
    page.wait_for_selector("#conn[data-state=live]")
    return page


def texts(page: Any) -> list[str]:
    return [t.strip() for t in page.eval_on_selector_all("#memories .memory-text", "els => els.map(e => e.textContent)")]


def post_as(page: Any, path: str, form: dict[str, str]) -> httpx.Response:
    """A form post from inside ``page``'s session (its cookie and CSRF token): what a crafted
    request of that user can do."""
    csrf = page.evaluate("document.querySelector('meta[name=csrf-token]').content")
    r = page.request.post(page.url.split("/memories")[0] + path, form=form, headers={"X-CSRF-Token": csrf})
    return httpx.Response(r.status, text=r.text())


def test_add_edit_history_forget_round_trip(browser: Any, stack: Stack) -> None:
    page = memories_page(browser, stack, None)
    dialogs: list[str] = []
    # the empty state says how memories get there, and that curation is off (the default)
    empty = page.inner_text("#memories [data-empty]")
    assert "No memories yet." in empty and "/remember" in empty, empty
    assert page.locator("#memories [data-curation=off]").count() == 1
    assert page.get_attribute("nav.nav a[href='/memories']", "aria-current") == "page"
    # add
    page.fill("#mem-text", "My staging server is stg-2")
    page.select_option("#mem-kind", "project")
    page.select_option("#mem-importance", "0.8")
    page.click("#mem-add-btn")
    wait_js(page, "document.querySelector('#memories .flash.ok')?.textContent.includes('Remembered')")
    assert texts(page) == ["My staging server is stg-2"]
    assert page.input_value("#mem-text") == ""  # the form was reset
    row = page.locator("#memories .memory").first
    first_id = row.get_attribute("data-memory")
    assert row.get_attribute("data-kind") == "project" and row.get_attribute("data-source") == "manual"
    assert "Saved by you" in row.inner_text() and "importance 0.8" in row.inner_text()
    with stack.admin() as c:  # the daemon has it, for this user
        stored = c.get(f"/memories/{first_id}").json()
        assert stored["text"] == "My staging server is stg-2" and stored["importance"] == 0.8
    # edit: a new version supersedes the old one
    page.click(f"#mem-edit-btn-{first_id}")
    page.fill(f"#mem-edit-text-{first_id}", "My staging server is stg-3")
    page.click(f"#mem-save-{first_id}")
    wait_js(page, "document.querySelector('#memories .flash.ok')?.textContent.includes('replaces memory')")
    assert texts(page) == ["My staging server is stg-3"]
    new_id = page.get_attribute("#memories .memory", "data-memory")
    assert new_id != first_id
    assert f"edited (replaces memory {first_id})" in page.inner_text(f"#memory-{new_id}")
    # history: both versions, oldest first, who changed it
    page.click(f"#mem-history-btn-{new_id}")
    page.wait_for_selector(f"#mem-history-{new_id} li[data-version='{new_id}']")
    versions = page.eval_on_selector_all(f"#mem-history-{new_id} li", "els => els.map(e => [e.dataset.version, e.dataset.state, e.textContent])")
    assert [(v[0], v[1]) for v in versions] == [(first_id, "superseded"), (new_id, "current")], versions
    assert "stg-2" in versions[0][2] and f"replaced by memory {new_id} (you" in " ".join(versions[0][2].split())
    # search and the kind filter
    page.fill("#mem-text", "I prefer pytest over unittest")
    page.select_option("#mem-kind", "preference")
    page.click("#mem-add-btn")
    wait_js(page, "document.querySelectorAll('#memories .memory').length === 2")
    page.fill("#mem-q", "staging")
    page.click("#mem-search-btn")
    page.wait_for_url("**/memories?q=staging*")
    assert texts(page) == ["My staging server is stg-3"]
    assert "1 memory match" in page.inner_text("#mem-count")
    page.goto(stack.web_url + "/memories?kind=preference")
    assert texts(page) == ["I prefer pytest over unittest"]
    assert page.input_value("#mem-filter-kind") == "preference"
    page.goto(stack.web_url + "/memories?q=kubernetes")
    assert "No memory matches" in page.inner_text("#memories [data-empty]")
    page.goto(stack.web_url + "/memories")
    # forget: cancelling the confirmation keeps it, accepting forgets it
    page.once("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.click(f"#mem-forget-{new_id}")
    page.wait_for_timeout(300)
    assert dialogs and dialogs[0].startswith("Forget this memory?") and "stg-3" in dialogs[0]
    assert "My staging server is stg-3" in texts(page)
    page.once("dialog", lambda d: d.accept())
    page.click(f"#mem-forget-{new_id}")
    wait_js(page, f"document.querySelector('#memories .flash.ok')?.textContent.includes('Forgot memory {new_id}')")
    assert texts(page) == ["I prefer pytest over unittest"]
    with stack.admin() as c:
        chain = c.get(f"/memories/{new_id}/history").json()["items"]
        assert [m["state"] for m in chain] == ["superseded", "forgotten"]
    # bad input is answered in the page, named
    r = post_as(page, "/actions/memories", {"text": "x" * 5000, "kind": "fact"})
    assert r.status_code == 200 and "flash err" in r.text and "at most" in r.text, r.text[:500]
    r = post_as(page, "/actions/memories/987654/edit", {"text": "nope", "kind": "fact"})
    assert "flash err" in r.text and "987654" in r.text
    assert not page.errors  # type: ignore[attr-defined]
    page.context.close()


def test_a_conversation_memory_names_its_conversation(browser: Any, stack: Stack) -> None:
    with stack.admin() as c:  # /remember is a chat command: instant, no model needed
        r = c.post("/brain/turn", json={"text": "/remember the demo repo deploys with make ship"})
        assert r.status_code == 200, r.text
        conv = c.get("/brain/active").json()["conversation"]
        c.patch(f"/brain/conversations/{conv['id']}", json={"title": "Deploy notes"}).raise_for_status()
    page = memories_page(browser, stack, None)
    row = page.locator("#memories .memory", has_text="make ship")
    row.wait_for()
    assert "in the conversation “Deploy notes”" in " ".join(row.inner_text().split())
    mid = row.get_attribute("data-memory")
    page.click(f"#mem-conv-{mid}")
    page.wait_for_selector("#chat-dock:not([hidden])")
    wait_js(page, "document.querySelector('#mem-chat-flash .flash.ok')")
    assert not page.errors  # type: ignore[attr-defined]
    page.context.close()


def test_a_second_user_never_sees_the_first_users_memories(browser: Any, stack: Stack, member: str) -> None:
    with httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {member}"}) as m:
        mine = m.post("/memories", json={"text": "My cat is called Biscuit", "kind": "person"})
        assert mine.status_code == 201, mine.text
    with stack.admin() as c:
        theirs = c.post("/memories", json={"text": "The backup window is Sunday 02:00", "kind": "fact"}).json()
    page = memories_page(browser, stack, member)
    assert set(texts(page)) == {"My cat is called Biscuit"}  # (twice after a rerun)
    assert "backup window" not in page.content()
    page.goto(stack.web_url + "/memories?q=backup+window+Sunday")
    assert texts(page) == [] and "02:00" not in page.content()
    # a post without the session's CSRF token is refused
    assert page.request.post(f"{stack.web_url}/actions/memories", form={"text": "forged"}).status == 403
    # their id, asked for directly: answered like a missing one, nothing changes
    r = page.request.get(f"{stack.web_url}/partials/memory_history?id={theirs['id']}")
    assert "02:00" not in r.text() and "flash err" in r.text()
    r2 = post_as(page, f"/actions/memories/{theirs['id']}/forget", {})
    assert "flash err" in r2.text and "02:00" not in r2.text
    r3 = post_as(page, f"/actions/memories/{theirs['id']}/edit", {"text": "hijacked", "kind": "fact"})
    assert "flash err" in r3.text and "02:00" not in r3.text
    page.context.close()
    # and the admin sees only their own, never the member's
    admin = memories_page(browser, stack, None)
    assert "The backup window is Sunday 02:00" in texts(admin)
    assert "Biscuit" not in admin.content()
    admin.goto(stack.web_url + "/memories?q=cat+called")
    assert texts(admin) == [] and "Biscuit" not in admin.content()
    admin.context.close()
    with stack.admin() as c:
        assert c.get(f"/memories/{theirs['id']}").json()["state"] == "current"


def test_screenshots_and_accessibility(browser: Any, stack: Stack) -> None:
    with stack.admin() as c:
        for text, kind, imp in (("Deploys go through make ship, never by hand", "project", 0.9), ("Prefers short answers with code first", "preference", 0.6)):
            c.post("/memories", json={"text": text, "kind": kind, "importance": imp}).raise_for_status()
        edited = c.post("/memories", json={"text": "The on-call phone is with Sam", "kind": "person"}).json()
        now = c.patch(f"/memories/{edited['id']}", json={"text": "The on-call phone is with Priya this week"}).json()
    found: dict[str, Any] = {}
    for size in ("1440", "390"):
        page = memories_page(browser, stack, None, size)
        page.click(f"#mem-history-btn-{now['id']}")
        page.wait_for_selector(f"#mem-history-{now['id']} li")
        page.wait_for_timeout(300)
        bad = serious(axe(page))
        if bad:
            found[size] = bad
        least = 24 if size == "1440" else 44
        small = page.evaluate(
            """(min) => [...document.querySelectorAll('main button, main select, main input:not([type=hidden]), main textarea, main summary, main .btn')]
                 .filter(e => { const r = e.getBoundingClientRect(); return e.checkVisibility() && r.width > 0 && (r.width + 0.5 < min || r.height + 0.5 < min); })
                 .map(e => (e.id || e.tagName) + ' ' + Math.round(e.getBoundingClientRect().height))""",
            least,
        )
        assert not small, (size, small)
        unlabelled = page.evaluate(
            "[...document.querySelectorAll('main input:not([type=hidden]), main textarea, main select')].filter(e => !e.labels || !e.labels.length).map(e => e.id)"
        )
        assert unlabelled == [], unlabelled
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), f"{size}: the page scrolls sideways"
        if size == "1440":  # tabbing through the page: every control shows a focus ring of ≥ 3:1
            page.focus("#mem-text")
            seen, wrong = 0, []
            for _ in range(30):
                page.keyboard.press("Tab")
                got = page.evaluate(CONTRAST_JS)
                if got is not None:
                    seen += 1
                    if not got["ok"]:
                        wrong.append(got)
            assert seen >= 20 and not wrong, wrong
            page.click(f"#mem-history-btn-{now['id']}")  # the history open again for the picture
            page.wait_for_selector(f"#mem-history-{now['id']} li")
        keep_screenshot(page, f"memories-{size}")
        page.context.close()
    assert not found, json.dumps(found, indent=1)


def test_plugin_disabled_the_page_says_so(browser: Any, stack: Stack, member: str) -> None:
    page = memories_page(browser, stack, None)  # plugin.* events reach admins only (members reload)
    assert page.locator("#mem-add").count() == 1
    with stack.admin() as c:
        off = c.post("/plugins/memory/disable", json={"cascade": True})  # the curator requires it
        off.raise_for_status()
        try:
            # the open page's list follows live (plugin.* events)
            page.wait_for_selector("#memories [data-memory-off]", timeout=15000)
            assert "Turn it on in Settings" in page.inner_text("#memories")
            fresh = memories_page(browser, stack, member)
            text = fresh.inner_text("main")
            assert "Long-term memory is off." in text and "An admin can turn it on" in text
            assert fresh.locator("#mem-add").count() == 0 and fresh.locator("#mem-search").count() == 0
            r = post_as(fresh, "/actions/memories", {"text": "while off", "kind": "fact"})
            assert "memory plugin) is off" in r.text
            fresh.context.close()
        finally:
            c.post("/plugins/memory/enable").raise_for_status()
            for name in off.json().get("cascaded") or []:
                c.post(f"/plugins/{name}/enable").raise_for_status()
    page.wait_for_selector("#memories .memory", timeout=15000)
    assert "I prefer pytest over unittest" in texts(page)  # kept while it was off
    assert not page.errors  # type: ignore[attr-defined]
    page.context.close()

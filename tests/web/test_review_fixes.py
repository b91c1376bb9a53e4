"""Fixes from a review of the web front end, each against a real daemon and web process (and,
for what only a browser shows, Debian's chromium through Playwright): the timeline filter,
live user and project lists, readable questions in the escalations inbox with user names, the
chat dock with the brain off, the terminal inside its card, anchored headings below the sticky
header, and the smaller wording, JSON-field and focus fixes."""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trio

from elowen.web.views.actions import coerce_config
from tests.support.waiting import wait

from .conftest import login, wait_js
from .stack import Stack

DAEMON_DOWN = "Not available: the Elowen daemon is not answering."
BRAIN_OFF = "The brain plugin is off — turn it on in Settings → Plugins."


# ---------------------------------------------------------------------- helpers


def _member(stack: Stack) -> tuple[int, str, str]:
    """A new member: ``(id, name, token)``."""
    name = f"m-{uuid.uuid4().hex[:8]}"
    with stack.admin() as c:
        r = c.post("/users", json={"name": name, "role": "member"})
        r.raise_for_status()
    return int(r.json()["user"]["id"]), name, r.json()["token"]


@pytest.fixture
def web(stack: Stack) -> Iterator[httpx.Client]:
    """A web client logged in as admin (token login), with the page's CSRF token in
    ``headers``."""
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as c:
        r = c.post("/login", data={"token": stack.admin_token, "next": "/"})
        assert r.status_code == 302, r.text
        page = c.get("/settings")
        m = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert m
        c.headers["X-CSRF-Token"] = m.group(1)
        c.headers["HX-Request"] = "true"
        yield c


async def _collect(url: str, token: str, into: list[dict[str, Any]], ready: trio.Event) -> None:
    """Append every ``user.*`` event of the daemon's stream for ``token`` to ``into``."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=None)) as c:
        async with c.stream("GET", f"{url}/events", params={"types": "user.*"}, headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status_code == 200
            ready.set()
            block: dict[str, str] = {}
            async for line in r.aiter_lines():
                if line == "" and "data" in block:
                    into.append({"type": block.get("event"), "data": json.loads(block["data"])})
                    block = {}
                elif line and not line.startswith(":"):
                    key, _, value = line.partition(":")
                    block[key] = value.lstrip(" ")


async def _until_async(predicate: Any, timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.05)


def _until(predicate: Any, timeout: float = 15.0, what: str = "condition") -> Any:
    return wait(predicate, what, timeout)


# ---------------------------------------------------------------------- 2. user events (daemon)


async def test_user_events_reach_admins_and_the_user_concerned_only(stack: Stack) -> None:
    member_id, _, member_token = _member(stack)
    admin_seen: list[dict[str, Any]] = []
    member_seen: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        for token, into in ((stack.admin_token, admin_seen), (member_token, member_seen)):
            ready = trio.Event()
            nursery.start_soon(_collect, stack.daemon_url, token, into, ready)
            await ready.wait()
        await trio.sleep(0.2)
        async with httpx.AsyncClient(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {stack.admin_token}"}) as c:
            name = f"other-{uuid.uuid4().hex[:6]}"
            created = (await c.post("/users", json={"name": name, "role": "member"})).json()
            other = created["user"]["id"]
            (await c.patch(f"/users/{other}", json={"tool_grants": ["files.read"]})).raise_for_status()
            (await c.put(f"/users/{other}/password", json={"password": "a long passphrase"})).raise_for_status()
            (await c.delete(f"/users/{other}")).raise_for_status()
            (await c.patch(f"/users/{member_id}", json={"tool_grants": ["files.read"]})).raise_for_status()
        await _until_async(lambda: len(admin_seen) >= 5 and len(member_seen) >= 1)
        await trio.sleep(0.3)
        nursery.cancel_scope.cancel()
    about_other = [e for e in admin_seen if e["data"]["id"] == other]
    assert [e["type"] for e in about_other] == ["user.created", "user.updated", "user.updated", "user.removed"]
    assert about_other[0]["data"]["name"] == name and about_other[0]["data"]["user"]["role"] == "member"
    assert about_other[2]["data"]["user"]["has_password"] is True
    assert about_other[3]["data"]["user"] is None and about_other[3]["data"]["name"] == name
    text = json.dumps(admin_seen)
    assert created["token"] not in text and "password_hash" not in text and "scrypt" not in text
    # the member saw only the event about themselves, never the other user's
    assert [(e["type"], e["data"]["id"]) for e in member_seen] == [("user.updated", member_id)]


# ---------------------------------------------------------------------- 8. JSON fields, daemon down


def test_json_config_fields_say_not_valid_json() -> None:
    schema = {"extra_args": {"type": "array"}, "env": {"type": "object"}}
    with pytest.raises(ValueError, match=r"^extra_args: not valid JSON: "):
        coerce_config(schema, {"extra_args": "[oops", "env": "{}"})
    with pytest.raises(ValueError, match=r'^env: expected a JSON object, e.g. \{"KEY": "value"\}$'):
        coerce_config(schema, {"extra_args": "[]", "env": "[1]"})
    assert coerce_config(schema, {"extra_args": '["--verbose"]', "env": ""}) == {"extra_args": ["--verbose"], "env": {}}


def test_settings_json_hint_level_wording_and_invalid_json_answer(web: httpx.Client) -> None:
    page = web.get("/settings", headers={"HX-Request": "false"}).text
    assert "JSON, e.g. [&#34;--verbose&#34;]" in page or 'JSON, e.g. ["--verbose"]' in page
    r = web.post("/actions/plugins/claude-code/config", data={"_fields": "extra_args", "extra_args": "[--verbose"})
    assert r.status_code == 200 and "extra_args: not valid JSON:" in r.text and "expected array" not in r.text


def test_overseer_default_level_empty_choice_is_worded(web: httpx.Client, stack: Stack) -> None:
    with stack.admin() as c:
        c.post("/plugins/overseer/enable").raise_for_status()
        try:
            page = web.get("/settings", headers={"HX-Request": "false"}).text
        finally:
            c.post("/plugins/overseer/disable").raise_for_status()
    assert re.search(r'<option value=""( selected)?>\(none — a human decides\)</option>', page), page[page.find("default_level") - 200 :][:800]


# ---------------------------------------------------------------------- 3. projects panel (web)


def test_project_panel_wording_for_admins_and_members(web: httpx.Client, stack: Stack) -> None:
    _, _, member_token = _member(stack)
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as m:
        assert m.post("/login", data={"token": member_token, "next": "/"}).status_code == 302
        member_view = m.get("/partials/projects", headers={"HX-Request": "true"}).text
    assert 'data-live="project.*"' in member_view
    assert "(no project: ask an admin to add one)" in member_view and "elowen project add" not in member_view
    admin_view = web.get("/partials/projects").text
    with stack.admin() as c:
        has_projects = bool(c.get("/projects").json()["items"])
    if has_projects:
        assert "<option value=" in admin_view and "No project yet" not in admin_view
    else:
        assert "No project yet: add one with <code>elowen project add NAME PATH</code>" in admin_view


# ---------------------------------------------------------------------- 4. decided by (web)


def test_decided_by_shows_names_for_admins_and_you_for_members(web: httpx.Client, stack: Stack) -> None:
    from elowen.web.views import panels  # the names map is what the templates read

    assert set(panels.ANSWER_KINDS) == {"message", "check", "review"}
    member_id, member_name, member_token = _member(stack)
    with stack.admin() as c:
        admin_id = c.get("/users/me").json()["id"]
        admin_name = c.get("/users/me").json()["name"]
    task_id, decision_ids = _decided_decisions(stack, [f"user:{admin_id}", f"user:{member_id}"])
    with stack.admin() as c:
        c.post(f"/users/{member_id}/projects", json={"project_id": stack.project()}).raise_for_status()
    admin_view = web.get(f"/partials/task?id={task_id}").text
    assert f"by {admin_name}" in admin_view and f"by {member_name}" in admin_view and "by user:" not in admin_view
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as m:
        assert m.post("/login", data={"token": member_token, "next": "/"}).status_code == 302
        member_view = m.get(f"/partials/task?id={task_id}", headers={"HX-Request": "true"}).text
    assert "by you" in member_view and "by another user" in member_view and "by user:" not in member_view
    assert admin_name not in member_view.split('id="dec-h"')[1]


def _decided_decisions(stack: Stack, deciders: list[str]) -> tuple[int, list[int]]:
    """A task with one decided ``review`` decision per decider.

    The agents plugin offers no route to create a decision (its services do), so the rows are
    written into the daemon's real SQLite file, as the plugin's ``DecisionStore.create`` and
    ``settle`` would leave them."""
    project = stack.project()
    with stack.admin() as c:
        task = c.post("/tasks", json={"title": f"Decided {uuid.uuid4().hex[:6]}", "project_id": project}).json()
    db = sqlite3.connect(stack.home / "elowen.db", timeout=10)
    ids = []
    try:
        with db:
            for who in deciders:
                cur = db.execute(
                    "INSERT INTO decisions (kind, task_id, session, payload, status, decided_by, rationale, created_at, decided_at) "
                    "VALUES ('review', ?, NULL, ?, 'approved', ?, 'looks fine', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z')",
                    (task["id"], json.dumps({"request": {"title": "Review"}}), who),
                )
                ids.append(int(cur.lastrowid or 0))
    finally:
        db.close()
    return int(task["id"]), ids


# ---------------------------------------------------------------------- 5. chat with the brain off (web)


def test_chat_turn_with_the_brain_off_says_how_to_turn_it_on(web: httpx.Client, stack: Stack) -> None:
    with stack.admin() as c:
        cascaded = c.post("/plugins/brain/disable", json={"cascade": True}).raise_for_status().json().get("cascaded", [])
        try:
            r = web.post("/chat/turn", json={"text": "hello"})
            view = web.get("/chat/view").text
        finally:
            for name in ("brain", *cascaded):
                c.post(f"/plugins/{name}/enable").raise_for_status()
    assert r.status_code == 404 and r.json()["error"] == {"code": "brain_off", "message": BRAIN_OFF}
    assert "no route" not in r.text
    assert BRAIN_OFF in view and "data-brain-off" in view


# ---------------------------------------------------------------------- browser


@pytest.mark.slow
def test_timeline_filter_hides_rows_and_the_count_agrees(browser: Any, stack: Stack) -> None:
    project = stack.project()
    page = login(browser, stack)
    page.goto(stack.web_url + "/timeline")
    page.wait_for_selector("#conn[data-state=live]")
    with stack.admin() as c:
        c.post("/tasks", json={"title": f"Timeline {uuid.uuid4().hex[:6]}", "project_id": project}).raise_for_status()
    page.wait_for_selector("#timeline li[data-type^='task.']")
    shown = "Array.from(document.querySelectorAll('#timeline li')).filter(li => li.offsetParent !== null).length"
    page.select_option("#tl-type", "plugin.")
    page.fill("#tl-text", "no-such-text-anywhere")
    wait_js(page, f"{shown} === 0")
    assert page.inner_text("#tl-count") == "0"
    assert page.is_visible("#tl-empty") and page.inner_text("#tl-empty") == "No event matches the filter."
    page.fill("#tl-text", "")
    page.select_option("#tl-type", "task.")
    wait_js(page, f"{shown} > 0")
    n = page.evaluate(shown)
    assert page.inner_text("#tl-count") == str(n) and page.is_hidden("#tl-empty")
    assert page.evaluate(
        "Array.from(document.querySelectorAll('#timeline li')).filter(li => li.offsetParent !== null).every(li => li.dataset.type.startsWith('task.'))"
    )
    assert not page.errors
    page.context.close()


@pytest.mark.slow
def test_users_and_projects_update_live(browser: Any, stack: Stack) -> None:
    page = login(browser, stack)
    page.goto(stack.web_url + "/settings")
    page.wait_for_selector("#conn[data-state=live]")
    page.evaluate("window.__sameDocument = true")
    _, name, _ = _member(stack)
    page.wait_for_selector(f"#users strong:text-is('{name}')", timeout=5000)
    kanban = login(browser, stack)
    kanban.goto(stack.web_url + "/kanban")
    kanban.wait_for_selector("#conn[data-state=live]")
    kanban.evaluate("window.__sameDocument = true")
    pname = f"live-{uuid.uuid4().hex[:6]}"
    repo = stack.root / pname
    repo.mkdir()
    with stack.admin() as c:
        c.post("/projects", json={"name": pname, "path": str(repo)}).raise_for_status()
    kanban.wait_for_selector(f"#t-project option:text-is('{pname}')", state="attached", timeout=5000)
    assert page.evaluate("window.__sameDocument") and kanban.evaluate("window.__sameDocument")
    assert not page.errors and not kanban.errors
    page.context.close()
    kanban.context.close()


@pytest.mark.slow
def test_ask_question_is_readable_and_answerable_in_the_inbox(browser: Any, stack: Stack) -> None:
    """An ``elowen ask`` (``POST /asks``): with no inference provider the overseer cannot answer
    and escalates it; the inbox shows the question and the overseer's reason, and answers it."""
    page = login(browser, stack)
    with stack.admin() as c:
        c.post("/plugins/overseer/enable").raise_for_status()
        try:
            question = f"Which port does the staging box use? {uuid.uuid4().hex[:6]}"
            r = c.post("/asks", json={"question": question})
            assert r.status_code == 201, r.text
            ask = r.json()
            page.goto(stack.web_url + "/escalations")
            row = f"#escalations [data-decision='{ask['id']}']"
            page.wait_for_selector(row, timeout=20000)
            assert question in page.inner_text(row)
            page.fill(f"#ans-{ask['id']}", "8443")
            page.click(f"{row} button[value=answer]")
            _until(lambda: c.get(f"/asks/{ask['id']}").json()["answer"] == "8443", what="the ask's answer")
            page.wait_for_selector(row, state="detached", timeout=5000)
            assert page.evaluate("document.activeElement !== document.body")  # focus stayed in the inbox
        finally:
            c.post("/plugins/overseer/disable").raise_for_status()
    assert not page.errors
    page.context.close()


@pytest.mark.slow
def test_chat_input_is_disabled_while_the_brain_is_off(browser: Any, stack: Stack) -> None:
    page = login(browser, stack)
    with stack.admin() as c:
        cascaded = c.post("/plugins/brain/disable", json={"cascade": True}).raise_for_status().json().get("cascaded", [])
        try:
            page.click("#chat-toggle")
            page.wait_for_selector(f"#chat-view [data-brain-off]:has-text('{BRAIN_OFF}')")
            assert page.is_disabled("#chat-input") and page.is_disabled("#chat-send")
            c.post("/plugins/brain/enable").raise_for_status()
            page.wait_for_selector("#chat-view [data-brain-off]", state="detached", timeout=5000)
            wait_js(page, "!document.getElementById('chat-input').disabled")
        finally:
            for name in ("brain", *cascaded):
                c.post(f"/plugins/{name}/enable")
    assert not page.errors
    page.context.close()


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390])
def test_terminal_stays_inside_its_card(browser: Any, stack: Stack, width: int) -> None:
    project = stack.project()
    with stack.admin() as c:
        task = c.post("/tasks", json={"title": "Terminal fit", "project_id": project, "exec": "claude:fake"}).json()
    page = login(browser, stack, width=width)
    page.goto(f"{stack.web_url}/tasks/{task['id']}")
    _until(
        lambda: (page.reload() or page.query_selector("#terminal")) and page.query_selector("#terminal .xterm-screen"), timeout=20, what="the task's terminal"
    )
    wait_js(page, "document.getElementById('terminal').dataset.fontSize !== undefined")
    box = page.evaluate("""() => { const t = document.getElementById('terminal'), card = t.closest('.card');
        const s = t.querySelector('.xterm-screen').getBoundingClientRect();
        return {card: card.getBoundingClientRect().right, box: t.getBoundingClientRect().right,
                screen: s.width, inner: t.clientWidth, font: parseFloat(t.dataset.fontSize),
                scroll: t.scrollWidth, doc: document.documentElement.scrollWidth, client: document.documentElement.clientWidth}; }""")
    assert box["box"] <= box["card"] + 0.5, box  # the terminal box ends inside its card
    assert box["doc"] <= box["client"], box  # and the page does not scroll sideways
    if width == 1280:
        assert 11 <= box["font"] <= 12 and (box["screen"] <= box["inner"] or box["scroll"] > box["inner"]), box  # fits, or scrolls in the box
    else:
        assert box["font"] == 11 and box["scroll"] > box["inner"], box  # at the minimum (11 px) it scrolls inside the box
    assert not page.errors
    page.context.close()


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390])
def test_settings_anchor_heading_is_below_the_sticky_header(browser: Any, stack: Stack, width: int) -> None:
    page = login(browser, stack, width=width, height=700)
    page.goto(stack.web_url + "/settings")
    page.wait_for_selector("#conn[data-state=live]")
    for anchor in ("plugins-h", "limits", "password-h"):
        page.click(f".subnav a[href='#{anchor}']")
        page.wait_for_timeout(150)
        header = page.evaluate("document.querySelector('.top').getBoundingClientRect().bottom")
        top = page.evaluate(f"document.getElementById('{anchor}').getBoundingClientRect().top")
        at_end = page.evaluate("window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 1")
        assert top >= header or at_end, (anchor, top, header)
    assert not page.errors
    page.context.close()


@pytest.mark.slow
def test_plugin_toggle_keeps_focus_and_daemon_down_wording(browser: Any, stack: Stack) -> None:
    page = login(browser, stack)
    page.goto(stack.web_url + "/settings")
    page.wait_for_selector("#conn[data-state=live]")
    page.focus("#plugin-toggle-kilo")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-plugin=kilo][data-state=enabled]")
    page.wait_for_timeout(500)  # the plugin.* event refreshes the panel once more
    assert page.evaluate("document.activeElement.id") == "plugin-toggle-kilo"
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-plugin=kilo][data-state=disabled]")
    page.wait_for_timeout(500)
    assert page.evaluate("document.activeElement.id") == "plugin-toggle-kilo"
    # an error flash goes away after a later success
    page.fill("#cfg-claude-code-extra_args", "[oops")
    page.click("form[hx-post='/actions/plugins/claude-code/config'] button[type=submit]")
    page.wait_for_selector("#flash-cfg-claude-code .flash.err:has-text('not valid JSON')")
    page.click("form[hx-post='/actions/prefs'] button[type=submit]")
    page.wait_for_selector("#flash-prefs .flash.ok")
    assert page.query_selector("#flash-cfg-claude-code .flash") is None
    # the daemon stops: a panel refresh says so in plain words
    stack.stop_daemon()
    try:
        r = page.evaluate("fetch('/partials/plugins', {headers: {'HX-Request': 'true'}}).then(r => r.text())")
        assert DAEMON_DOWN in re.sub(r"<[^>]+>", "", r)
    finally:
        stack.start_daemon()
    assert not page.errors
    page.context.close()


@pytest.mark.slow
def test_a_finished_chat_turn_shows_once_and_the_history_scrolls_to_it(browser: Any, stack: Stack) -> None:
    """The streamed copy of a turn gives way to the stored one (no duplicate), the history is
    scrolled to its newest message, and Send is off while a turn runs (the embedded model)."""
    page = login(browser, stack)
    page.click("#chat-toggle")
    page.wait_for_selector("#chat-dock:not([hidden]) #chat-input")
    idle = "#chat-dock:not([aria-busy])"
    for n in range(3):  # enough history to scroll
        page.fill("#chat-input", f"Say the word banana {n}.")
        page.keyboard.press("Enter")
        page.wait_for_selector(f"#chat-stream .msg.user:has-text('banana {n}')")
        assert page.evaluate(
            "document.getElementById('chat-dock').getAttribute('aria-busy') !== 'true' || document.getElementById('chat-send').disabled"
        )  # one turn at a time
        page.wait_for_selector(idle, timeout=60000)
        page.locator("#chat-view .msg.user", has_text=f"banana {n}").wait_for(timeout=15000)
        page.locator("#chat-stream .msg.user").first.wait_for(state="detached", timeout=15000)
        assert page.locator("#chat-stream .msg.assistant").count() == 0
        assert page.locator("#chat-dock .msg.user", has_text=f"banana {n}").count() == 1  # once, not twice
        assert page.is_enabled("#chat-send")
    note = page.locator("#chat-view .chat-model")  # no provider configured: the embedded model, without tools
    assert "without tools" in note.inner_text() and "local/" in note.inner_text()
    at_bottom = page.evaluate(
        "document.getElementById('chat-view').scrollTop + document.getElementById('chat-view').clientHeight"
        " >= document.getElementById('chat-view').scrollHeight - 2"
    )
    assert at_bottom
    page.fill("#chat-input", "/help")
    page.keyboard.press("Enter")
    page.wait_for_selector("#chat-stream .msg.system:has-text('/goal')", timeout=10000)
    page.wait_for_selector(idle, timeout=15000)
    page.wait_for_timeout(500)  # the view's reload after the command
    assert page.locator("#chat-stream .msg.user", has_text="/help").count() == 1  # a command stays with its output
    assert not page.errors
    page.context.close()


@pytest.mark.slow
def test_timeline_rows_show_when_the_event_happened(browser: Any, stack: Stack) -> None:
    project = stack.project()
    title = f"Stamped {uuid.uuid4().hex[:6]}"
    with stack.admin() as c:
        created = c.post("/tasks", json={"title": title, "project_id": project}).json()["created_at"]
    time.sleep(1.0)  # short: the replay window is the newest 200 events of a shared daemon
    page = login(browser, stack)
    page.goto(stack.web_url + "/timeline")
    row = page.locator(f"#timeline li[data-type='task.created']:has-text('{title}') time")
    row.wait_for(timeout=10000)
    shown = row.get_attribute("datetime")
    assert shown is not None
    # the replayed row carries the publication time (to the millisecond), not the page's
    assert abs(_epoch(shown) - _epoch(created)) < 1.0, (shown, created)
    assert not page.errors
    page.context.close()


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_the_task_page_cancels_and_reopens_a_task(stack: Stack) -> None:
    project = stack.project()
    with stack.admin() as c:
        task_id = c.post("/tasks", json={"title": "cancel me", "project_id": project}).json()["id"]
    with httpx.Client(base_url=stack.web_url, timeout=10) as web:
        assert web.post("/login", data={"token": stack.admin_token}).status_code == 302
        page = web.get(f"/tasks/{task_id}").text
        assert 'id="task-cancel"' in page and 'id="task-reopen"' not in page
        csrf = {"X-CSRF-Token": re.search(r'<meta name="csrf-token" content="([^"]+)">', page).group(1), "HX-Request": "true"}
        r = web.post(f"/actions/tasks/{task_id}/cancel", headers=csrf)
        assert r.headers.get("X-Elowen-Ok") == "1", r.text
        page = web.get(f"/tasks/{task_id}").text
        assert 'id="task-reopen"' in page and 'id="task-cancel"' not in page
        r = web.post(f"/actions/tasks/{task_id}/reopen", headers=csrf)
        assert r.headers.get("X-Elowen-Ok") == "1" and f"Task #{task_id} reopened." in r.text, r.text
        assert 'id="task-cancel"' in web.get(f"/tasks/{task_id}").text
    with stack.admin() as c:
        assert c.get(f"/tasks/{task_id}").json()["state"] == "open"


def test_an_admin_gives_and_takes_projects_and_removes_a_user_in_settings(stack: Stack) -> None:
    project = stack.project()
    name = f"member-{uuid.uuid4().hex[:6]}"
    with stack.admin() as c:
        uid = c.post("/users", json={"name": name, "role": "member"}).json()["user"]["id"]
    with httpx.Client(base_url=stack.web_url, timeout=10) as web:
        assert web.post("/login", data={"token": stack.admin_token}).status_code == 302
        panel = web.get("/partials/users").text
        row = panel.split(f"<strong>{name}</strong>", 1)[1].split("</li>", 1)[0]
        assert "none yet" in row and f'id="remove-user-{uid}"' in row and f'id="addp-{uid}"' in row
        page = web.get("/settings").text
        csrf = {"X-CSRF-Token": re.search(r'<meta name="csrf-token" content="([^"]+)">', page).group(1), "HX-Request": "true"}
        r = web.post(f"/actions/users/{uid}/projects", data={"project_id": str(project)}, headers=csrf)
        assert r.headers.get("X-Elowen-Ok") == "1", r.text
        assert project in _projects_of(stack, uid)
        r = web.post(f"/actions/users/{uid}/projects/{project}/remove", headers=csrf)
        assert r.headers.get("X-Elowen-Ok") == "1", r.text
        assert project not in _projects_of(stack, uid)
        r = web.post(f"/actions/users/{uid}/remove", headers=csrf)
        assert r.headers.get("X-Elowen-Ok") == "1", r.text
        assert f"<strong>{name}</strong>" not in web.get("/partials/users").text


def _projects_of(stack: Stack, uid: int) -> list[int]:
    with stack.admin() as c:
        [user] = [u for u in c.get("/users", params={"limit": 500}).json()["items"] if u["id"] == uid]
    return list(user["projects"])


def test_the_dashboard_pauses_and_resumes_a_mission(stack: Stack) -> None:
    project = stack.project()
    with stack.admin() as c:
        c.post("/plugins/overseer/enable").raise_for_status()
        try:
            mission = c.post("/missions", json={"name": "Resumable", "level": "L1", "project_id": project, "engage": True}).json()
            mid = mission["id"]
            with httpx.Client(base_url=stack.web_url, timeout=10) as web:
                assert web.post("/login", data={"token": stack.admin_token}).status_code == 302
                panel = web.get("/partials/missions").text
                assert f'id="mission-pause-{mid}"' in panel and f'id="mission-resume-{mid}"' not in panel
                page = web.get("/").text
                csrf = {"X-CSRF-Token": re.search(r'<meta name="csrf-token" content="([^"]+)">', page).group(1), "HX-Request": "true"}
                r = web.post(f"/actions/missions/{mid}/pause", headers=csrf)
                assert r.headers.get("X-Elowen-Ok") == "1" and f"Mission #{mid} paused." in r.text, r.text
                assert c.get(f"/missions/{mid}").json()["state"] == "paused"
                assert f'id="mission-resume-{mid}"' in web.get("/partials/missions").text
                r = web.post(f"/actions/missions/{mid}/resume", headers=csrf)
                assert r.headers.get("X-Elowen-Ok") == "1", r.text
                assert c.get(f"/missions/{mid}").json()["state"] == "active"
                assert web.post(f"/actions/missions/{mid}/explode", headers=csrf).status_code == 404
        finally:
            c.post("/plugins/overseer/disable")

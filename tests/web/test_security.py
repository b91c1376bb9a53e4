"""Login, session cookie, CSRF and token secrecy against a real daemon and web process
(plain HTTP; the browser tests check the same from inside a page)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from .stack import Stack


@pytest.fixture
def web(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as c:
        yield c


def _login(web: httpx.Client, stack: Stack) -> str:
    r = web.post("/login", data={"token": stack.admin_token, "next": "/kanban"})
    assert r.status_code == 302 and r.headers["location"] == "/kanban"
    page = web.get("/kanban")
    assert page.status_code == 200
    m = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert m
    return m.group(1)


def test_pages_need_a_login(web: httpx.Client) -> None:
    r = web.get("/kanban")
    assert r.status_code == 302 and r.headers["location"].startswith("/login")
    assert web.get("/partials/kanban").status_code == 401
    assert web.get("/events").status_code == 401
    assert web.get("/health").json()["status"] == "ok"


def test_a_wrong_token_is_refused(web: httpx.Client) -> None:
    r = web.post("/login", data={"token": "elw_not-a-real-token"})
    assert r.status_code == 401 and "not accepted" in r.text
    assert "set-cookie" not in r.headers


def test_session_cookie_flags_and_no_token_in_pages(web: httpx.Client, stack: Stack) -> None:
    r = web.post("/login", data={"token": stack.admin_token})
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("elowen_session=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert stack.admin_token not in cookie
    for path in ("/", "/kanban", "/timeline", "/escalations", "/settings", "/partials/tools", "/chat/view", "/static/live.js", "/static/chat.js"):
        body = web.get(path).text
        assert stack.admin_token not in body, path
    headers = web.get("/").headers
    assert "script-src 'self'" in headers["content-security-policy"] and headers["x-frame-options"] == "DENY"


def test_csrf_is_required_on_every_write(web: httpx.Client, stack: Stack) -> None:
    csrf = _login(web, stack)
    project = stack.project()
    form = {"title": "csrf probe", "project_id": str(project)}
    assert web.post("/actions/tasks", data=form).status_code == 403
    assert web.post("/actions/tasks", data=form, headers={"X-CSRF-Token": "wrong"}).status_code == 403
    assert web.post("/actions/plugins/brain/disable").status_code == 403
    assert web.post("/logout").status_code == 403
    foreign = web.post("/actions/tasks", data=form, headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    with stack.admin() as c:
        assert not [t for t in c.get("/tasks").json()["items"] if t["title"] == "csrf probe"]
    ok = web.post("/actions/tasks", data=form, headers={"X-CSRF-Token": csrf, "Origin": stack.web_url})
    assert ok.status_code == 200 and "Created task" in ok.text and ok.headers["X-Elowen-Ok"] == "1"
    with stack.admin() as c:
        assert [t for t in c.get("/tasks").json()["items"] if t["title"] == "csrf probe"]


def test_logout_ends_the_session(web: httpx.Client, stack: Stack) -> None:
    csrf = _login(web, stack)
    r = web.post("/logout", data={"csrf_token": csrf})
    assert r.status_code == 302 and r.headers["location"] == "/login"
    assert web.get("/kanban").status_code == 302


def test_event_stream_is_relayed_with_resume(web: httpx.Client, stack: Stack) -> None:
    _login(web, stack)
    project = stack.project()
    with stack.admin() as c:
        c.post("/tasks", json={"title": "relay one", "project_id": project}).raise_for_status()
        c.post("/tasks", json={"title": "relay two", "project_id": project}).raise_for_status()
    # resume from the start: both come back, typed, each after its id line
    lines: list[str] = []
    with web.stream("GET", "/events", params={"types": "task.created"}, headers={"Last-Event-ID": "0"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            lines.append(line)
            if "relay two" in line:
                break
    assert "event: ready" in lines
    data = [i for i, line in enumerate(lines) if line.startswith('data: {"type":"task.created"')]
    assert any("relay one" in lines[i] for i in data)
    assert all(lines[i - 1].startswith("id: ") for i in data)

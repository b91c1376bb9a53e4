"""Name + password login through the web front end, against a real daemon and web process:
the session it starts (same cookie, token kept server-side), one message for every failure,
the daemon's throttle shown clearly, logout revoking the login token (and only that kind),
labels on every field; and one real-browser run (Debian's chromium) from the login form to
the live dashboard."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from elowen.core.store import Store

from .stack import Stack


@pytest.fixture
def web(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as c:
        yield c


def _user(stack: Stack, password: str | None, role: str = "member") -> tuple[int, str, str]:
    """A new user (with ``password`` if given): ``(id, name, issued token)``."""
    name = f"pw-{uuid.uuid4().hex[:8]}"
    with stack.admin() as c:
        r = c.post("/users", json={"name": name, "role": role})
        r.raise_for_status()
        uid = int(r.json()["user"]["id"])
        if password is not None:
            c.put(f"/users/{uid}/password", json={"password": password}).raise_for_status()
    return uid, name, r.json()["token"]


def _login_tokens(stack: Stack, uid: int) -> int:
    store = Store(stack.home / "elowen.db")
    try:
        row = store.query_one("SELECT count(*) AS n FROM tokens WHERE user_id = ? AND origin = 'login'", (uid,))
        return int(row["n"]) if row else 0
    finally:
        store.close()


def _csrf(page: str) -> str:
    m = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert m, page[:500]
    return m.group(1)


def _password_login(web: httpx.Client, name: str, password: str, next_: str = "/") -> httpx.Response:
    return web.post("/login", data={"via": "password", "name": name, "password": password, "next": next_})


def test_password_login_starts_a_session_like_a_token_login(web: httpx.Client, stack: Stack) -> None:
    uid, name, _ = _user(stack, "web passphrase")
    assert _login_tokens(stack, uid) == 0
    r = _password_login(web, name, "web passphrase", "/kanban")
    assert r.status_code == 302 and r.headers["location"] == "/kanban", r.text
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("elowen_session=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert _login_tokens(stack, uid) == 1  # the daemon made a token; it stays in the BFF
    page = web.get("/kanban")
    assert page.status_code == 200 and f"Log out {name}" in page.text
    assert "web passphrase" not in page.text and "elw_" not in page.text


@pytest.mark.parametrize("case", ["wrong password", "unknown name", "no password set"])
def test_every_failure_shows_one_message_and_sets_no_cookie(web: httpx.Client, stack: Stack, case: str) -> None:
    _, name, _ = _user(stack, None if case == "no password set" else "right passphrase")
    login_name = f"nobody-{uuid.uuid4().hex[:6]}" if case == "unknown name" else name
    r = _password_login(web, login_name, "wrong passphrase")
    assert r.status_code == 401 and "Wrong name or password." in r.text
    assert "set-cookie" not in r.headers
    assert "wrong passphrase" not in r.text  # the password is never sent back
    assert f'value="{login_name}"' in r.text  # the name is kept for another try


def test_empty_fields_are_refused_without_asking_the_daemon(web: httpx.Client) -> None:
    for data in ({"via": "password", "name": "", "password": "x"}, {"via": "password", "name": "x", "password": ""}, {"via": "password"}):
        r = web.post("/login", data=data)
        assert r.status_code == 400 and "Enter your name and password." in r.text
        assert "set-cookie" not in r.headers
    r = web.post("/login", data={"token": ""})
    assert r.status_code == 400 and "Enter your Elowen token." in r.text


@pytest.mark.parametrize(
    ("name", "password", "message"),
    [
        ("someone", "x" * 1025, "That password is too long: passwords have at most 1024 characters."),
        ("n" * 101, "some passphrase", "That name is too long: names have at most 100 characters."),
        ("someone", "tab\there", "A password may not contain control characters"),
    ],
)
def test_unusable_fields_say_what_is_wrong(web: httpx.Client, stack: Stack, name: str, password: str, message: str) -> None:
    _, real, _ = _user(stack, "right passphrase")
    r = _password_login(web, real if name == "someone" else name, password)
    assert r.status_code == 400 and message in r.text, r.text
    assert "Enter your name and password." not in r.text and "set-cookie" not in r.headers
    assert password not in r.text


def test_a_password_change_ends_other_password_sessions(stack: Stack) -> None:
    uid, name, issued = _user(stack, "first passphrase")
    with httpx.Client(base_url=stack.web_url, timeout=10) as first, httpx.Client(base_url=stack.web_url, timeout=10) as token_login:
        assert _password_login(first, name, "first passphrase").status_code == 302
        assert token_login.post("/login", data={"token": issued}).status_code == 302
        assert first.get("/", follow_redirects=False).status_code == 200
        with stack.admin() as admin:
            r = admin.put(f"/users/{uid}/password", json={"password": "second passphrase"})
            assert r.json()["login_tokens_revoked"] == 1
        assert _login_tokens(stack, uid) == 0
        assert first.get("/partials/kanban", follow_redirects=False).status_code == 401  # that session is over
        assert token_login.get("/partials/kanban", follow_redirects=False).status_code == 200  # a token login stays


def test_a_user_sets_and_changes_their_own_password_in_settings(stack: Stack) -> None:
    uid, name, issued = _user(stack, None)
    with httpx.Client(base_url=stack.web_url, timeout=10) as web:
        assert web.post("/login", data={"token": issued}).status_code == 302
        page = web.get("/settings").text
        assert 'id="pw-new"' in page and 'id="pw-current"' not in page and "Set password" in page
        csrf = {"X-CSRF-Token": _csrf(page), "HX-Request": "true"}
        differ = web.post("/actions/password", data={"password": "one passphrase", "again": "another one"}, headers=csrf)
        assert "The two new passwords differ." in differ.text and "X-Elowen-Ok" not in differ.headers
        ok = web.post("/actions/password", data={"password": "one passphrase", "again": "one passphrase"}, headers=csrf)
        assert "Password saved." in ok.text and ok.headers.get("X-Elowen-Ok") == "1", ok.text
        page = web.get("/settings").text
        assert 'id="pw-current"' in page and "Change password" in page  # now it asks for the current one
        wrong = web.post("/actions/password", data={"current": "not it at all", "password": "two passphrase", "again": "two passphrase"}, headers=csrf)
        assert "X-Elowen-Ok" not in wrong.headers and "password" in wrong.text.lower()
        right = web.post("/actions/password", data={"current": "one passphrase", "password": "two passphrase", "again": "two passphrase"}, headers=csrf)
        assert right.headers.get("X-Elowen-Ok") == "1", right.text
        no_csrf = web.post("/actions/password", data={"password": "three passphrase", "again": "three passphrase"})
        assert no_csrf.status_code == 403
    with httpx.Client(base_url=stack.web_url, timeout=10) as other:
        assert _password_login(other, name, "two passphrase").status_code == 302
        assert _password_login(other, name, "one passphrase").status_code != 302


def test_the_users_panel_shows_who_has_a_password(web: httpx.Client, stack: Stack) -> None:
    _, with_pw, _ = _user(stack, "panel passphrase")
    _, without_pw, _ = _user(stack, None)
    assert web.post("/login", data={"token": stack.admin_token}).status_code == 302
    page = web.get("/partials/users")
    assert page.status_code == 200, page.text
    for name, shown in ((with_pw, "Password: yes"), (without_pw, "Password: no")):
        row = page.text.split(f"<strong>{name}</strong>", 1)[1].split("</li>", 1)[0]
        assert shown in row, row


def test_the_daemons_throttle_is_shown_clearly(web: httpx.Client, stack: Stack) -> None:
    _, name, _ = _user(stack, "right passphrase")
    for _ in range(5):
        assert _password_login(web, name, "a wrong guess").status_code == 401
    r = _password_login(web, name, "right passphrase")
    assert r.status_code == 429
    assert re.search(r"Too many failed attempts for this name\. Wait \d+ seconds, then try again\.", r.text), r.text
    assert "set-cookie" not in r.headers


def test_logout_revokes_the_login_token(web: httpx.Client, stack: Stack) -> None:
    uid, name, issued = _user(stack, "bye passphrase")
    assert _password_login(web, name, "bye passphrase").status_code == 302
    csrf = _csrf(web.get("/").text)
    assert _login_tokens(stack, uid) == 1
    r = web.post("/logout", data={"csrf_token": csrf})
    assert r.status_code == 302 and r.headers["location"] == "/login"
    assert _login_tokens(stack, uid) == 0
    assert web.get("/").status_code == 302
    with httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {issued}"}) as c:
        assert c.get("/users/me").status_code == 200  # the user's other tokens are untouched


def test_logout_of_a_token_login_leaves_the_token_valid(web: httpx.Client, stack: Stack) -> None:
    _, _, issued = _user(stack, None)
    assert web.post("/login", data={"token": issued}).status_code == 302
    r = web.post("/logout", data={"csrf_token": _csrf(web.get("/").text)})
    assert r.status_code == 302
    with httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {issued}"}) as c:
        assert c.get("/users/me").status_code == 200


def test_a_cross_origin_password_login_is_refused(web: httpx.Client, stack: Stack) -> None:
    _, name, _ = _user(stack, "origin passphrase")
    r = web.post("/login", data={"via": "password", "name": name, "password": "origin passphrase"}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "set-cookie" not in r.headers


def test_every_login_field_has_a_label(web: httpx.Client) -> None:
    page = web.get("/login").text
    fields = re.findall(r'<input id="([^"]+)"[^>]*type="(?:text|password)"', page)
    assert set(fields) == {"token", "login-name", "login-password"}
    for field in fields:
        assert f'<label for="{field}">' in page, field
    assert page.count('<form method="post" action="/login"') == 2


def test_passwords_stay_out_of_the_logs(web: httpx.Client, stack: Stack) -> None:
    secret = f"log-{uuid.uuid4().hex}"
    _, name, _ = _user(stack, secret)
    _password_login(web, name, secret + "-wrong")
    assert _password_login(web, name, secret).status_code == 302
    for log in ("daemon.out", "web.out"):
        assert secret not in (stack.root / log).read_text(errors="replace"), log


@pytest.mark.slow
def test_browser_logs_in_with_name_and_password_and_sees_the_live_dashboard(browser: Any, stack: Stack) -> None:
    uid, name, _ = _user(stack, "browser passphrase", role="admin")
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{stack.web_url}/login")
        page.get_by_label("Name", exact=True).fill(name)
        page.get_by_label("Password", exact=True).fill("browser passphrase")
        page.get_by_role("button", name="Log in with password").click()
        page.wait_for_url(f"{stack.web_url}/")
        page.wait_for_selector("#conn[data-state=live]")
        assert page.get_by_title(f"Log out {name}").is_visible()
        [session] = [c for c in ctx.cookies() if c["name"] == "elowen_session"]
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        assert "browser passphrase" not in page.content()
        assert _login_tokens(stack, uid) == 1
        page.get_by_title(f"Log out {name}").click()
        page.wait_for_url(f"{stack.web_url}/login")
        assert _login_tokens(stack, uid) == 0
        assert not errors
    finally:
        ctx.close()

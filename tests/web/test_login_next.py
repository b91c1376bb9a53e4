"""The login form's ``next`` target: only a same-site path, never a control character (a
newline used to answer 500, a tab to redirect to another site after login)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from elowen.web.views.auth import safe_next

from .stack import Stack

HOSTILE = [
    "/\t/evil.example",  # browsers drop the tab: //evil.example
    "/\n/evil.example",
    "/\r\nSet-Cookie: x=1",
    "/ /evil.example",
    "/\x00",
    "/\x7f",
    "//evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "/" + "a" * 5_000,
]


@pytest.fixture
def web(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as c:
        yield c


@pytest.mark.parametrize("target", HOSTILE)
def test_safe_next_refuses(target: str) -> None:
    assert safe_next(target) == "/"


@pytest.mark.parametrize("target", ["/", "/kanban", "/tasks/3?tab=log", "/missions#m2"])
def test_safe_next_keeps_same_site_paths(target: str) -> None:
    assert safe_next(target) == target


@pytest.mark.parametrize("target", HOSTILE[:6])
def test_login_with_a_hostile_next_goes_home(web: httpx.Client, stack: Stack, target: str) -> None:
    r = web.post("/login", data={"token": stack.admin_token, "next": target})
    assert r.status_code == 302, (r.status_code, r.text[:200])
    assert r.headers["location"] == "/"
    page = web.get("/login", params={"next": target})
    assert page.status_code in (200, 302), page.status_code


def test_login_keeps_a_good_next(web: httpx.Client, stack: Stack) -> None:
    r = web.post("/login", data={"token": stack.admin_token, "next": "/kanban?x=1"})
    assert r.status_code == 302 and r.headers["location"] == "/kanban?x=1"


def test_the_login_redirect_quotes_the_path(web: httpx.Client) -> None:
    r = web.get("/kanban?a=1&b=2")
    assert r.status_code == 302
    assert r.headers["location"] == "/login?next=%2Fkanban%3Fa%3D1%26b%3D2"

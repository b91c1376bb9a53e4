"""Fixtures for the web tests: a real daemon + web stack, and Debian's chromium driven by
Playwright (never ``playwright install``: the browser comes from apt, see
``scripts/install-test-deps``)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .stack import Stack, start_stack

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = start_stack(tmp_path_factory.mktemp("web"))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-test-deps (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def login(browser: Any, stack: Stack, width: int = 1280, height: int = 900) -> Any:
    """A new browser context logged in as admin; returns its first page (on the dashboard)."""
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"{stack.web_url}/login")
    page.fill("#token", stack.admin_token)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(f"{stack.web_url}/")
    page.wait_for_selector("#conn[data-state=live]")
    return page


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    d = tmp_path / "screenshots"
    d.mkdir()
    return d


def wait_js(page: Any, expression: str, *, arg: Any = None, timeout: float = 10000) -> Any:
    """Poll ``page.evaluate(expression[, arg])`` until it is truthy (returned), at most
    ``timeout`` ms. Used instead of ``page.wait_for_function``, whose polling evaluates the
    predicate with ``eval`` inside the page, which the web front end's CSP (``script-src
    'self'``, no ``unsafe-eval``) forbids whenever the condition is not true at once."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        value = page.evaluate(expression, arg) if arg is not None else page.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} ms waiting for: {expression}")
        page.wait_for_timeout(50)

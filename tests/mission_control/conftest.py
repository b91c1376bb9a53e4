"""Fixtures for the mission-control tests: Debian's chromium driven by Playwright (the same
launch as ``tests/web``: the browser comes from apt, never ``playwright install``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS


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


def keep_screenshot(page: Any, name: str, *, full_page: bool = True) -> None:
    """Save a full-page screenshot as ``<name>.png`` into ``$ELOWEN_WEB_SCREENSHOTS`` (e.g.
    ``docs/screenshots``, to refresh the docs); nothing when it is unset."""
    import os
    from pathlib import Path

    folder = os.environ.get("ELOWEN_WEB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)

"""The dashboard's missions panel says when no decision path is enabled (every decision then
waits for a human), on the real daemon + web stack of ``tests/web``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.web.stack import Stack, start_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = start_stack(Path(tmp_path_factory.mktemp("dashboard")))
    try:
        yield s
    finally:
        s.stop()


def test_missions_panel_notices_when_no_path_is_enabled(stack: Stack) -> None:
    with stack.admin() as admin, httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as web:
        assert web.post("/login", data={"token": stack.admin_token, "next": "/"}).status_code == 302
        assert admin.post("/plugins/overseer/enable").json()["state"] == "enabled"
        try:
            with_relay = web.get("/partials/missions", headers={"HX-Request": "true"}).text
            assert 'id="missions"' in with_relay and "no-decision-path" not in with_relay
            assert admin.post("/plugins/overseer-relay/disable").json()["state"] == "disabled"
            without = web.get("/partials/missions", headers={"HX-Request": "true"}).text
            assert 'id="no-decision-path"' in without and "every decision waits for a human" in without
            assert "overseer-relay" in without
        finally:
            admin.post("/plugins/overseer-relay/enable").raise_for_status()
            admin.post("/plugins/overseer/disable").raise_for_status()
        back = web.get("/partials/missions", headers={"HX-Request": "true"}).text
        assert "no-decision-path" not in back  # the overseer is off: the panel says so instead

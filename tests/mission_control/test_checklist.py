"""The dashboard's first-run checklist in real chromium against a real daemon and web process:
every step is checked from real state — no project, no task and no ready model at first (the
only model is an embedded one whose file is missing), the fake Claude Code CLI found with its
path — each step ticks live as a project and a task are added, and the checklist is gone once a
provider added in Settings (pointed at the scripted model server) makes the chat ready."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
import tomli_w

from tests.support.model_server import ModelServer
from tests.web.conftest import login
from tests.web.stack import Stack

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
    s = NoModelStack(tmp_path_factory.mktemp("checklist"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


def _done(page: Any) -> dict[str, bool]:
    return dict(page.evaluate("[...document.querySelectorAll('#checklist .step')].map(s => [s.dataset.step, s.dataset.done === 'true'])"))


def test_checklist_follows_real_state_and_hides_when_done(browser: Any, stack: Stack) -> None:
    page = login(browser, stack, 1440, 900)
    assert page.is_visible("#checklist")
    assert _done(page) == {"project": False, "clis": True, "task": False, "model": False}
    claude = page.inner_text("#checklist [data-cli=claude]")
    assert "found at" in claude and str(stack.root / "fake-claude") in claude
    assert "No model can answer the chat" in page.inner_text("#checklist [data-step=model]")
    assert "0 of 4" not in page.inner_text("#checklist-h") and "1 of 4 done" in page.inner_text("#checklist-h")

    project = stack.project()  # ticks live (project.created)
    page.wait_for_selector("#checklist [data-step=project][data-done=true]", timeout=10000)
    with stack.admin() as c:
        c.post("/tasks", json={"title": "First task", "project_id": project}).raise_for_status()
    page.wait_for_selector("#checklist [data-step=task][data-done=true]", timeout=10000)
    assert _done(page) == {"project": True, "clis": True, "task": True, "model": False}

    with ModelServer() as server:
        page.click("#checklist [data-step=model] a[href='/settings#models']")
        page.wait_for_url(f"{stack.web_url}/settings#models")
        page.fill("#mp-name", "scripted")
        page.select_option("#mp-kind", "openai")
        page.fill("#mp-url", f"{server.url}/v1")
        page.fill("#mp-model", "fake-model")
        page.click("#add-provider button[type=submit]")
        flash = page.wait_for_selector("#flash-providers .flash")
        assert "ok" in (flash.get_attribute("class") or ""), flash.inner_text()
        page.goto(stack.web_url + "/")
        page.wait_for_selector("#conn[data-state=live]")
        assert page.query_selector("#checklist[hidden]") is not None and not page.is_visible("#checklist")
    assert not page.errors
    page.context.close()

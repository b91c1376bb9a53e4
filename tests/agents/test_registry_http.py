"""The open provider registry over HTTP: a third party's provider plugin, installed as a real
distribution (an entry point in a ``.dist-info`` on the daemon's ``PYTHONPATH``), appears in
``GET /executors``, in the web's Providers page and executor picker, and is choosable for a
task; with its plugin disabled its specs answer 422 ``executor_unavailable`` and a task on it
waits, its record saying why; with the agents plugin disabled, tasks are kept and wait
(``exec_error`` 409-class ``executors_unavailable``)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import tomli_w

from tests.support.waiting import wait
from tests.web.stack import Stack

ROOT = Path(__file__).resolve().parents[2]


def install_sample_provider(site: Path) -> None:
    """An installed distribution ``elowen-test-mycli`` whose entry point is the sample provider."""
    info = site / "elowen_test_mycli-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: elowen-test-mycli\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[elowen.plugins]\nmycli-provider = tests.agents.sample_provider.plugin\n")


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    site = tmp_path / "site"
    install_sample_provider(site)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{ROOT}")
    s = Stack(tmp_path)
    s.write_config()
    data = tomllib.loads((s.home / "config.toml").read_text())
    data["plugins"]["mycli-provider"] = {"enabled": True, "granted": ["process.spawn"], "config": {"binary": "/nonexistent/mycli"}}
    (s.home / "config.toml").write_text(tomli_w.dumps(data))
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


@contextmanager
def web_login(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.web_url, timeout=10, follow_redirects=False) as c:
        assert c.post("/login", data={"token": stack.admin_token, "next": "/"}).status_code == 302
        yield c


def test_a_third_party_provider_is_choosable_and_its_absence_is_explained(stack: Stack) -> None:
    project = stack.project()
    with stack.admin() as api, web_login(stack) as web:
        listed = {i["name"]: i for i in api.get("/executors").json()["items"]}
        assert listed["mycli"]["enabled"] and listed["mycli"]["plugin"] == "mycli-provider"
        assert listed["mycli"]["aliases"] == {"swift": "swift-2"} and listed["claude"]["aliases"] == {"sonnet": "sonnet", "opus": "opus"}
        assert "kilo" not in listed  # disabled in this stack's config and never seen

        settings = web.get("/settings").text
        assert 'data-executor="mycli"' in settings and "My CLI" in settings and 'id="cfg-mycli-provider"' in settings
        assert 'data-executor="claude"' in settings
        kanban = web.get("/kanban").text
        # mycli's program is missing: its choices are marked so (Settings says the same)
        assert '<option value="swift" data-missing>swift: CLI not found</option>' in kanban and '<option value="mycli:deep-1" data-missing>' in kanban
        assert '<option value="sonnet">' in kanban

        # choosable: it resolves (the program is missing, so the scheduler blocks the task with a note)
        created = api.post("/tasks", json={"title": "on mycli", "project_id": project, "exec": "mycli:deep-1"})
        assert created.status_code == 201, created.text
        assert created.json()["exec_resolved"] == {"provider": "mycli", "model": "deep-1"}
        blocked = wait(
            lambda: (lambda t: t if t["state"] == "blocked" else None)(api.get(f"/tasks/{created.json()['id']}").json()),
            "the task blocked on the missing program",
        )
        assert "/nonexistent/mycli" in blocked["resume_note"] and "mycli-provider" in blocked["resume_note"]

        # a task that waits on it: not ready yet (a dependency is open) while the plugin is disabled
        dep = api.post("/tasks", json={"title": "first", "project_id": project}).json()  # no spec: the fallback (kilo, off) → waits
        assert dep["exec_resolved"] is None and dep["exec_error"]["code"] == "executor_unavailable"
        assert "'kilo'" in dep["exec_error"]["message"] and "disabled" in dep["exec_error"]["message"]  # from its manifest
        later = api.post("/tasks", json={"title": "later", "project_id": project, "exec": "swift", "deps": [dep["id"]]}).json()
        assert api.post("/plugins/mycli-provider/disable", json={}).status_code == 200

        for spec in ("swift", "mycli:deep-1", "mycli"):
            r = api.post("/tasks", json={"title": "refused", "project_id": project, "exec": spec})
            assert r.status_code == 422, r.text
            err = r.json()["error"]
            assert err["code"] == "executor_unavailable" and "mycli-provider" in err["message"] and "claude" in err["message"]
        unknown = api.post("/tasks", json={"title": "refused", "project_id": project, "exec": "nobody:x"}).json()["error"]
        assert unknown["code"] == "unknown_executor" and "available" in unknown["message"]
        assert {i["name"]: i["enabled"] for i in api.get("/executors").json()["items"]}["mycli"] is False
        assert "unavailable" in web.get("/settings").text.split('data-executor="mycli"', 1)[1].split("</p>", 1)[0]

        api.post(f"/tasks/{dep['id']}/close", json={"summary": "done"}).raise_for_status()
        waiting = api.get(f"/tasks/{later['id']}").json()
        assert waiting["state"] == "open" and waiting["exec_resolved"] is None
        assert waiting["exec_error"]["code"] == "executor_unavailable" and "mycli-provider" in waiting["exec_error"]["message"]
        page = web.get(f"/tasks/{later['id']}").text
        assert "Waiting:" in page and "mycli-provider" in page

        # the agents plugin off: no spec resolves; tasks are kept and say why they wait
        assert api.post("/plugins/agents/disable", json={"cascade": True}).status_code == 200
        for body in ({"exec": "sonnet"}, {}):
            kept = api.post("/tasks", json={"title": "x", "project_id": project, **body})
            assert kept.status_code == 201, kept.text
            assert kept.json()["exec_resolved"] is None and kept.json()["exec_error"]["code"] == "executors_unavailable"
            assert "agents plugin" in kept.json()["exec_error"]["message"]
        assert api.get("/executors").status_code == 404

"""A member taken off a project loses its core-loop plan too: against the real daemon process
(the scripted model server plays the planner), a member asks for work in their project, the
admin then removes them from that project; the member can no longer read, approve, re-run or
edit the plan (404, nothing changes), while the admin still can."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, spawn, wait_ready
from tests.support.model_server import ModelServer
from tests.support.waiting import wait

from .conftest import MODEL, Script, item, plan_json

pytestmark = pytest.mark.slow


@pytest.fixture
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, int, int, str]]:
    root = tmp_path_factory.mktemp("coreaccess")
    project = root / "proj"
    project.mkdir()
    script = Script(plan=plan_json(item("Write the converter"), item("Write the tests", deps=(1,))))
    with ModelServer(script) as server:
        home = root / "home"
        home.mkdir()
        loop = {"intake_enabled": True, "plan_approval": True, "executor_enabled": False, "planner_model": MODEL}
        config = {
            "plugins": {name: {"enabled": False} for name in ("claude-code", "opencode", "codex", "kilo")}
            | {"brain": {"config": {"default_model": MODEL}}, "core-loop": {"enabled": True, "config": loop}},
            "inference": {"providers": {"fake": {"kind": "openai", "base_url": server.url + "/v1", "max_retries": 0}}},
        }
        (home / "config.toml").write_text(tomli_w.dumps(config))
        proc = spawn(home)
        try:
            port = wait_ready(home, proc, timeout=90)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        daemon = DaemonProc(home, proc, port, (home / "admin.token").read_text().strip(), home.parent / f"{home.name}-stderr.txt")
        try:
            with daemon.admin() as admin:
                pid = admin.post("/projects", json={"name": "proj", "path": str(project)}).json()["id"]
                user = admin.post("/users", json={"name": "mia", "role": "member", "tool_grants": ["*"]}).json()
                admin.post(f"/users/{user['user']['id']}/projects", json={"project_id": pid}).raise_for_status()
            yield daemon, pid, int(user["user"]["id"]), user["token"]
        finally:
            daemon.stop()


def test_a_member_removed_from_the_project_can_no_longer_touch_its_plan(stack: tuple[DaemonProc, int, int, str]) -> None:
    daemon, pid, mia, token = stack
    with daemon.admin() as admin, daemon.client(token) as member:
        cid = member.post("/brain/conversations", json={"project_id": pid}).json()["id"]
        work = member.post(
            f"/brain/conversations/{cid}/turn",
            params={"stream": "false"},
            json={"text": "Build me a small CLI that converts CSV to JSON, with tests."},
            timeout=30,
        )
        assert work.status_code == 200 and "core-loop project #1" in work.text, work.text
        wait(lambda: member.get("/core-loop/projects/1").json()["project"]["state"] == "awaiting_approval", "plan written", timeout=30)
        held = member.get("/core-loop/projects/1").json()["tasks"][0]["id"]
        assert [p["id"] for p in member.get("/core-loop/projects").json()["projects"]] == [1]

        admin.delete(f"/users/{mia}/projects/{pid}").raise_for_status()

        assert member.get("/core-loop/projects").json()["projects"] == []
        for response in (
            member.get("/core-loop/projects/1"),
            member.post("/core-loop/projects/1/approve"),
            member.post("/core-loop/projects/1/run"),
            member.get("/core-loop/projects/1/receipt"),
            member.patch(f"/core-loop/tasks/{held}", json={"title": "something else"}),
        ):
            assert response.status_code == 404, (response.request.method, response.request.url, response.text)
            assert response.json()["error"]["code"] == "not_found"
        # the chat reply that approves a plan is refused too
        reply = member.post(f"/brain/conversations/{cid}/turn", params={"stream": "false"}, json={"text": "approve plan"}, timeout=30)
        assert "approved: the executor" not in reply.text, reply.text
        tree = admin.get("/core-loop/projects/1").json()
        assert tree["project"]["state"] == "awaiting_approval"  # nothing was approved
        assert tree["tasks"][0]["title"] == "Write the converter"  # nothing was edited

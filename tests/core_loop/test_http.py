"""The core loop over HTTP against the real daemon process: a work request typed into a chat
turn opens a project; the plan is read, edited and approved through ``/core-loop/…`` (owner
checks and clear errors), the executor runs it on the brain worker against the scripted model
server, and the receipt is served."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, spawn, wait_ready
from tests.support.fake_cli import private_tmux_socket
from tests.support.model_server import ModelServer
from tests.support.waiting import wait

from .conftest import EXEC, MODEL, Script, item, plan_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, Script, int, str]]:
    root = tmp_path_factory.mktemp("corehttp")
    project = root / "proj"
    project.mkdir()
    script = Script(plan=plan_json(item("Write the converter"), item("Write the tests", deps=(1,))))
    with ModelServer(script) as server, private_tmux_socket() as sock:
        home = root / "home"
        home.mkdir()
        loop = {"intake_enabled": True, "plan_approval": True, "executor_enabled": True, "executor_interval": 0.2, "planner_model": MODEL}
        config = {
            # agents (and tmux, on a private socket) resolve the elowen: exec spec for the brain worker
            "plugins": {name: {"enabled": False} for name in ("claude-code", "opencode", "codex", "kilo")}
            | {"tmux": {"enabled": True, "config": {"socket": sock}}}
            | {"brain": {"config": {"default_model": MODEL, "worker_interval": 0.1, "worker_max_attempts": 1}}, "core-loop": {"enabled": True, "config": loop}},
            "inference": {"providers": {"fake": {"kind": "openai", "base_url": server.url + "/v1", "max_retries": 0}}},
        }
        (home / "config.toml").write_text(tomli_w.dumps(config))
        proc = spawn(home)
        try:
            port = wait_ready(home, proc, timeout=90)  # generous: the machine is shared
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
            yield daemon, script, pid, user["token"]
        finally:
            daemon.stop()


def test_chat_to_plan_to_receipt_over_http(stack: tuple[DaemonProc, Script, int, str]) -> None:
    daemon, script, pid, member_token = stack
    with daemon.admin() as admin, daemon.client(member_token) as member:
        cid = admin.post("/brain/conversations", json={"project_id": pid}).json()["id"]
        chat = admin.post(f"/brain/conversations/{cid}/turn", params={"stream": "false"}, json={"text": "What is a monad, briefly?"}, timeout=30)
        assert chat.status_code == 200 and "core-loop" not in chat.text
        work = admin.post(
            f"/brain/conversations/{cid}/turn",
            params={"stream": "false"},
            json={"text": "Build me a small CLI that converts CSV to JSON, with tests."},
            timeout=30,
        )
        assert work.status_code == 200 and "core-loop project #1" in work.text
        wait(lambda: admin.get("/core-loop/projects/1").json()["project"]["state"] == "awaiting_approval", "plan written", timeout=30)
        tree = admin.get("/core-loop/projects/1").json()
        assert [t["title"] for t in tree["tasks"]] == ["Write the converter", "Write the tests"]
        assert tree["tasks"][1]["deps"] == [tree["tasks"][0]["id"]] and tree["tasks"][0]["exec"] == EXEC
        assert [p["id"] for p in admin.get("/core-loop/projects").json()["projects"]] == [1]
        # someone else's project is invisible to a member; bad input gets clear errors
        assert member.get("/core-loop/projects").json()["projects"] == []
        assert member.get("/core-loop/projects/1").status_code == 404
        assert member.post("/core-loop/projects/1/approve").status_code == 404
        assert admin.get("/core-loop/projects/abc").status_code in (400, 404)
        assert admin.get("/core-loop/projects/99").json()["error"]["code"] == "not_found"
        bad = admin.patch(f"/core-loop/tasks/{tree['tasks'][0]['id']}", json={"priority": "urgent"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "bad_priority"
        assert admin.patch(f"/core-loop/tasks/{tree['tasks'][0]['id']}", json={"owner": 3}).status_code == 422
        edited = admin.patch(f"/core-loop/tasks/{tree['tasks'][1]['id']}", json={"acceptance": ["pytest: 5 passed"]})
        assert edited.status_code == 200 and edited.json()["acceptance"] == ["pytest: 5 passed"]
        assert admin.get("/core-loop/projects/1/receipt").status_code == 404
        assert script.worker_turns == []
        approved = admin.post("/core-loop/projects/1/approve")
        assert approved.status_code == 200 and approved.json()["state"] == "approved"
        assert admin.post("/core-loop/projects/1/approve").status_code == 409
        wait(
            lambda: admin.get("/core-loop/projects/1").json()["project"]["state"] == "done",
            "run complete",
            timeout=60,
            on_fail=lambda: admin.get("/core-loop/projects/1").text + daemon.output(),
        )
        receipt = admin.get("/core-loop/projects/1/receipt").json()
        assert receipt["receipt"]["stop_reason"] == "complete"
        for line in receipt["receipt"]["tasks"]:
            task = admin.get(f"/tasks/{line['task_id']}").json()
            task = task.get("task", task)
            assert line["status"] == "completed" and line["evidence"] == task["evidence"] and task["state"] == "closed"
        assert "evidence: ran: Write the converter" in receipt["text"]
        assert admin.post("/core-loop/projects/1/run").status_code == 409  # done, not stopped

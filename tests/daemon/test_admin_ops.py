"""Revoking and deleting (users, tokens, projects), refused project paths and names, task
titles without control characters, ``/health``'s identity, the admin-token recovery, and the
plugin routes in ``/openapi.json`` — against real daemon subprocesses."""

from __future__ import annotations

import logging
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from elowen.daemon.identity import home_id
from elowen.daemon.recovery import RecoveryError, reset_admin_token

from .conftest import DaemonProc, spawn, start_daemon, wait_ready
from .helpers import agent_token, assert_error_shape, make_project, make_user


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, Path]]:
    """A daemon whose user home (``HOME``) is a folder of its own, so refusing it is testable."""
    tmp = tmp_path_factory.mktemp("admin")
    user_home = tmp / "userhome"
    user_home.mkdir()
    d = start_daemon(tmp / "home", "--no-plugins", env={"HOME": str(user_home)})
    try:
        yield d, tmp
    finally:
        d.stop()


def test_health_identifies_the_daemon_and_its_home(world: tuple[DaemonProc, Path]) -> None:
    d, _ = world
    body = httpx.get(f"{d.url}/health").json()
    assert body["service"] == "daemon"
    assert body["home"] == home_id(d.home) and len(body["home"]) == 12
    assert str(d.home) not in httpx.get(f"{d.url}/health").text
    assert home_id(d.home) != home_id(d.home.parent / "other-home")


def test_dangerous_project_paths_are_refused(world: tuple[DaemonProc, Path]) -> None:
    d, tmp = world
    (d.home / "inside").mkdir(exist_ok=True)
    with d.admin() as admin:
        for path, why in (
            ("/", "filesystem root"),
            (str(tmp / "userhome"), "home folder"),
            (str(d.home), "Elowen's home"),
            (str(d.home / "inside"), "Elowen's home"),
            (str(tmp), "Elowen's home"),  # contains ELOWEN_HOME
            (str(d.home / "inside" / ".." / ".."), "Elowen's home"),
        ):
            err = assert_error_shape(admin.post("/projects", json={"name": "x", "path": path}), 422)
            assert err["code"] == "invalid_path" and why in err["message"], (path, err)
        assert admin.get("/projects").json()["items"] == []


def test_project_names_are_restricted(world: tuple[DaemonProc, Path]) -> None:
    d, tmp = world
    folder = tmp / "named"
    folder.mkdir()
    with d.admin() as admin:
        for name in ("../evil", "a/b", "..", "tab\there", "new\nline", "x" * 101, " lead", "nul\x00", "semi;colon"):
            err = assert_error_shape(admin.post("/projects", json={"name": name, "path": str(folder)}), 422)
            assert err["code"] == "validation_error" and "name" in err["message"], (name, err)
        r = admin.post("/projects", json={"name": "My proj-1.2_x é", "path": str(folder)})
        assert r.status_code == 201, r.text
        admin.delete(f"/projects/{r.json()['id']}")


def test_task_titles_refuse_control_characters(world: tuple[DaemonProc, Path]) -> None:
    d, tmp = world
    with d.admin() as admin:
        pid = make_project(admin, tmp / "titles", "titles")
        for title in ("a\tb", "line\nbreak", "cr\r", "del\x7f"):
            err = assert_error_shape(admin.post("/tasks", json={"title": title, "project_id": pid}), 422)
            assert "control characters" in err["message"]
        task = admin.post("/tasks", json={"title": "fine title", "project_id": pid}).json()
        assert_error_shape(admin.patch(f"/tasks/{task['id']}", json={"title": "x\ty"}), 422)
        assert admin.get(f"/tasks/{task['id']}").json()["title"] == "fine title"


def test_a_task_in_progress_is_not_reopened_beside_its_agent(world: tuple[DaemonProc, Path]) -> None:
    """Reopening a running task would start a second agent beside the first: 409, nothing
    changed; cancelled first, it reopens."""
    d, tmp = world
    with d.admin() as admin:
        pid = make_project(admin, tmp / "reopen", "reopen")
        task = admin.post("/tasks", json={"title": "busy", "project_id": pid}).json()
        assert admin.patch(f"/tasks/{task['id']}", json={"state": "in_progress"}).status_code == 200
        err = assert_error_shape(admin.patch(f"/tasks/{task['id']}", json={"state": "open"}), 409)
        assert err["code"] == "task_conflict" and "cancel it first" in err["message"]
        assert admin.get(f"/tasks/{task['id']}").json()["state"] == "in_progress"
        assert admin.post(f"/tasks/{task['id']}/cancel").status_code == 200
        assert admin.patch(f"/tasks/{task['id']}", json={"state": "open"}).json()["state"] == "open"


def test_delete_project_refuses_unfinished_tasks_unless_forced(world: tuple[DaemonProc, Path]) -> None:
    d, tmp = world
    with d.admin() as admin:
        pid = make_project(admin, tmp / "gone", "gone")
        other = make_project(admin, tmp / "stays", "stays")
        done = admin.post("/tasks", json={"title": "done", "project_id": pid}).json()["id"]
        admin.post(f"/tasks/{done}/close", json={"summary": "ok"})
        open_ = admin.post("/tasks", json={"title": "open", "project_id": pid}).json()["id"]
        dependent = admin.post("/tasks", json={"title": "dep", "project_id": other, "deps": [open_]}).json()["id"]
        member, token = make_user(admin, "gone-member")
        admin.post(f"/users/{member}/projects", json={"project_id": pid})

        err = assert_error_shape(admin.delete(f"/projects/{pid}"), 409)
        assert err["code"] == "project_busy" and "1 open" in err["message"]
        assert admin.get(f"/projects/{pid}").status_code == 200
        assert_error_shape(admin.delete(f"/projects/{pid}", params={"force": "maybe"}), 422)

        r = admin.delete(f"/projects/{pid}", params={"force": "true"})
        assert r.status_code == 200, r.text
        assert r.json() == {"id": pid, "deleted": True, "tasks_deleted": 2}
        assert_error_shape(admin.get(f"/projects/{pid}"), 404)
        assert_error_shape(admin.get(f"/tasks/{open_}"), 404)
        assert admin.get(f"/tasks/{dependent}").json()["deps"] == []
        users = {u["id"]: u for u in admin.get("/users").json()["items"]}
        assert users[member]["projects"] == []
        assert_error_shape(admin.delete(f"/projects/{pid}"), 404)
        # a project whose tasks are all finished goes without force
        pid2 = make_project(admin, tmp / "finished", "finished")
        t = admin.post("/tasks", json={"title": "t", "project_id": pid2}).json()["id"]
        admin.post(f"/tasks/{t}/cancel")
        assert admin.delete(f"/projects/{pid2}").json()["tasks_deleted"] == 1
        audit = admin.get("/audit", params={"action": "project.delete"}).json()["items"]
        assert {a["target"] for a in audit} >= {f"project:{pid}", f"project:{pid2}"}
    with d.client(token) as member_client:
        assert_error_shape(member_client.delete(f"/projects/{other}"), 403)


def test_revoke_a_users_tokens(world: tuple[DaemonProc, Path]) -> None:
    d, _ = world
    with d.admin() as admin:
        uid, first = make_user(admin, "revokee")
        second = admin.post(f"/users/{uid}/tokens").json()["token"]
        for token in (first, second):
            assert d.client(token).get("/users/me").status_code == 200
        r = admin.delete(f"/users/{uid}/tokens")
        assert r.status_code == 200 and r.json() == {"user_id": uid, "revoked": 2}
        for token in (first, second):
            assert_error_shape(d.client(token).get("/users/me"), 401)
        fresh = admin.post(f"/users/{uid}/tokens").json()["token"]
        assert d.client(fresh).get("/users/me").json()["name"] == "revokee"
        me = admin.get("/users/me").json()["id"]
        assert assert_error_shape(admin.delete(f"/users/{me}/tokens"), 409)["code"] == "self_revoke"
        assert admin.get("/users/me").status_code == 200
        assert_error_shape(admin.delete("/users/999999/tokens"), 404)
    with d.client(fresh) as member:
        assert_error_shape(member.delete(f"/users/{uid}/tokens"), 403)


def test_delete_a_user_keeps_its_tasks(world: tuple[DaemonProc, Path]) -> None:
    d, tmp = world
    with d.admin() as admin:
        pid = make_project(admin, tmp / "owned", "owned")
        uid, token = make_user(admin, "leaver")
        admin.post(f"/users/{uid}/projects", json={"project_id": pid})
        task = d.client(token).post("/tasks", json={"title": "mine", "project_id": pid}).json()
        assert task["owner_id"] == uid
        agent = agent_token(d.home, task["id"])

        r = admin.delete(f"/users/{uid}")
        assert r.status_code == 200, r.text
        assert r.json() == {"id": uid, "deleted": True, "tokens_revoked": 1}
        assert_error_shape(d.client(token).get("/users/me"), 401)
        assert admin.get(f"/tasks/{task['id']}").json()["owner_id"] is None
        assert "leaver" not in {u["name"] for u in admin.get("/users").json()["items"]}
        # the running agent's task token still works
        assert d.client(agent).post(f"/tasks/{task['id']}/progress", json={"text": "still here"}).status_code == 201
        assert_error_shape(admin.delete(f"/users/{uid}"), 404)
        me = admin.get("/users/me").json()["id"]
        assert assert_error_shape(admin.delete(f"/users/{me}"), 409)["code"] == "self_delete"
        # a second admin cannot remove the last other admin either way: the caller is an admin
        other_id, other_token = make_user(admin, "admin2", role="admin")
        assert d.client(other_token).delete(f"/users/{me}").status_code == 200
        assert assert_error_shape(d.client(other_token).delete(f"/users/{other_id}"), 409)["code"] == "self_delete"


def test_reset_admin_token_and_start_up_hint(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(RecoveryError, match="no Elowen database"):
        reset_admin_token(home)
    d = start_daemon(home, "--no-plugins")
    try:
        old = d.admin_token
        (home / "admin.token").unlink()
        with pytest.raises(RecoveryError, match="no user named"):
            reset_admin_token(home, user="nobody")
        with d.admin() as admin:
            make_user(admin, "plain")
        with pytest.raises(RecoveryError, match="not an admin"):
            reset_admin_token(home, user="plain")
        result = reset_admin_token(home)  # while the daemon runs
        assert result.name == "admin" and result.revoked == 1
        new = (home / "admin.token").read_text().strip()
        assert new.startswith("elw_") and new != old
        assert (home / "admin.token").stat().st_mode & 0o777 == 0o600
        assert d.client(new).get("/users").status_code == 200
        assert_error_shape(d.client(old).get("/users"), 401)
        kept = reset_admin_token(home, keep_old=True)
        assert kept.revoked == 0 and d.client(new).get("/users").status_code == 200
    finally:
        assert d.stop() == 0
    (home / "admin.token").unlink()
    proc = spawn(home, "--no-plugins")
    try:
        wait_ready(home, proc)
        log = (home / "logs" / "daemon.log").read_text()
        assert "admin.token is missing but an admin exists" in log and "elowen daemon reset-admin-token" in log
    finally:
        proc.terminate()
        proc.wait(15)


def test_watchfiles_info_lines_are_silenced(tmp_path: Path) -> None:
    from elowen.daemon.server import setup_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("watchfiles").level)
    try:
        setup_logging(tmp_path, "INFO")
        logging.getLogger("watchfiles.main").info("1 change detected")
        logging.getLogger("elowen.test").info("kept")
        for handler in root.handlers:
            handler.flush()
        text = (tmp_path / "logs" / "daemon.log").read_text()
        assert "kept" in text and "change detected" not in text
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("watchfiles").setLevel(saved[2])


def test_openapi_lists_the_plugin_routes_served_now(tmp_path: Path) -> None:
    import schemathesis

    home = tmp_path / "home"
    home.mkdir()
    socket = f"elowen-test-{uuid.uuid4().hex[:10]}"
    (home / "config.toml").write_text(f'[plugins.tmux.config]\nsocket = "{socket}"\n\n[plugins.agents]\nenabled = false\n')
    d = start_daemon(home)
    try:
        with d.admin() as admin:
            doc = admin.get("/openapi.json").json()
            plugin_ops = {(p, m): op for p, ops in doc["paths"].items() for m, op in ops.items() if "x-elowen-plugin" in op}
            assert ("/missions", "get") in plugin_ops and ("/missions/{id}", "patch") in plugin_ops
            assert ("/brain/conversations", "post") in plugin_ops
            assert not any(p.startswith("/sessions") for p, _ in plugin_ops)  # agents is disabled
            op = plugin_ops[("/missions/{id}", "patch")]
            assert op["x-elowen-plugin"] == "overseer" and op["tags"] == ["plugin:overseer"]
            assert op["summary"] and op["security"] == [{"bearer": []}]
            assert op["parameters"] == [{"name": "id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/]+$"}}]
            assert op["responses"]["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
            assert "requestBody" in op
            assert "/tasks" in doc["paths"] and "x-elowen-plugin" not in doc["paths"]["/tasks"]["get"]
            ids = [o["operationId"] for ops in doc["paths"].values() for o in ops.values()]
            assert len(ids) == len(set(ids))
            schema = schemathesis.openapi.from_dict(doc)
            assert len([r.ok() for r in schema.get_all_operations()]) == len(ids)

            assert admin.post("/plugins/overseer/disable").json()["state"] == "disabled"
            doc2 = admin.get("/openapi.json").json()
            assert "/missions" not in doc2["paths"] and "/brain/conversations" in doc2["paths"]
            assert admin.get("/openapi.json").json() == doc2  # cached until contributions change
            assert admin.post("/plugins/overseer/enable").json()["state"] == "enabled"
            assert "/missions" in admin.get("/openapi.json").json()["paths"]
    finally:
        d.stop()
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)

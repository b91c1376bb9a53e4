"""Every acknowledged action keeps its audit row (and its event) when the daemon is killed with
SIGKILL right after the 2xx; ``DELETE /projects`` is one transaction (real daemon, real file)."""

from __future__ import annotations

import signal
from pathlib import Path

from elowen.core.store import Store

from .conftest import start_daemon
from .helpers import make_project


def _rows(home: Path, sql: str) -> list[dict]:
    store = Store(home / "elowen.db")
    try:
        return store.query(sql)
    finally:
        store.close()


def test_audit_rows_of_acknowledged_actions_survive_kill_9(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project_dir = tmp_path / "proj"
    project_dir.mkdir()
    actions = [
        ("project.create", lambda c: c.post("/projects", json={"name": "p", "path": str(project_dir)})),
        ("task.create", lambda c: c.post("/tasks", json={"title": "t", "project_id": 1})),
        ("task.update", lambda c: c.patch("/tasks/1", json={"title": "t2"})),
        ("user.create", lambda c: c.post("/users", json={"name": "bob", "role": "member"})),
        ("task.cancel", lambda c: c.post("/tasks/1/cancel")),
    ]
    for action, call in actions:
        d = start_daemon(home, "--no-plugins")
        with d.admin() as admin:
            r = call(admin)
        assert 200 <= r.status_code < 300, r.text
        d.proc.send_signal(signal.SIGKILL)  # at once after the acknowledgement
        d.proc.wait(10)
        rows = _rows(home, f"SELECT action FROM audit WHERE action = '{action}'")
        assert rows, f"{action}: acknowledged, but its audit row was lost"
    events = [r["type"] for r in _rows(home, "SELECT type FROM events ORDER BY id")]
    assert events[:3] == ["project.created", "task.created", "task.updated"], events


def test_delete_project_is_atomic(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home", "--no-plugins")
    try:
        with d.admin() as admin:
            pid = make_project(admin, tmp_path / "p", "p")
            for i in range(5):
                assert admin.post("/tasks", json={"title": f"t{i}", "project_id": pid}).status_code == 201
            # busy (open tasks) without force: refused, and nothing at all was deleted
            r = admin.delete(f"/projects/{pid}")
            assert r.status_code == 409
            assert len(admin.get("/tasks", params={"project_id": pid}).json()["items"]) == 5
            # a fault at the very last step (a trigger in the real database file, added by a
            # second connection) rolls back every task deletion, event and audit row before it
            side = Store(d.home / "elowen.db")
            try:
                side.execute("CREATE TRIGGER inject_fault BEFORE DELETE ON projects BEGIN SELECT RAISE(ABORT, 'injected fault'); END")
                r = admin.delete(f"/projects/{pid}", params={"force": "true"})
                assert r.status_code == 500, r.text
                assert len(admin.get("/tasks", params={"project_id": pid}).json()["items"]) == 5
                assert side.query("SELECT count(*) AS n FROM events WHERE type = 'task.deleted'") == [{"n": 0}]
                assert side.query("SELECT count(*) AS n FROM audit WHERE action = 'project.delete'") == [{"n": 0}]
                side.execute("DROP TRIGGER inject_fault")
            finally:
                side.close()
            r = admin.delete(f"/projects/{pid}", params={"force": "true"})
            assert r.status_code == 200, r.text
            assert r.json()["tasks_deleted"] == 5
            assert admin.get(f"/projects/{pid}").status_code == 404
    finally:
        d.stop()
    audit = _rows(d.home, "SELECT action FROM audit WHERE action = 'project.delete'")
    assert len(audit) == 1
    deleted = _rows(d.home, "SELECT count(*) AS n FROM events WHERE type = 'task.deleted'")
    assert deleted == [{"n": 5}]

"""A deleted user's id is never given to a new user. Plugins keep their rows by user id
(memories, cron jobs, notifications, conversations): had SQLite handed the highest deleted id
to the next user (an ``INTEGER PRIMARY KEY`` without ``AUTOINCREMENT`` does), the newcomer
would read the deleted user's memories and could resume their scheduled prompts. Real daemon
with the builtin plugins, real SQLite, HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import DaemonProc, start_daemon
from .helpers import make_user


@pytest.fixture
def full_daemon(tmp_path: Path) -> Iterator[DaemonProc]:
    d = start_daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.stop()


def test_a_new_user_never_inherits_a_deleted_users_id_or_data(full_daemon: DaemonProc) -> None:
    with full_daemon.admin() as admin:
        ana_id, ana_token = make_user(admin, "ana")
        with full_daemon.client(ana_token) as ana:
            saved = ana.post("/memories", json={"text": "Ana's locker code is 4711"})
            assert saved.status_code == 201, saved.text
            job = ana.post("/cron/jobs", json={"prompt": "summarise my day", "schedule": "every day at 18:00"})
            assert job.status_code == 201, job.text
            assert ana.post("/notifications/test", json={"title": "for ana"}).status_code == 201
        assert admin.delete(f"/users/{ana_id}").status_code == 200

        bob_id, bob_token = make_user(admin, "bob")
        assert bob_id != ana_id, "the deleted user's id was handed to a new user"
        with full_daemon.client(bob_token) as bob:
            assert bob.get("/memories").json()["items"] == []
            assert bob.get("/memories/search", params={"q": "locker code"}).json()["items"] == []
            assert bob.get("/cron/jobs").json()["items"] == []
            assert bob.get("/notifications").json()["items"] == []

        # and across a restart (the high-water mark is in the database, not in memory)
        carl_id, _ = make_user(admin, "carl")
        assert admin.delete(f"/users/{carl_id}").status_code == 200
    full_daemon.stop()
    restarted = start_daemon(full_daemon.home)
    try:
        with restarted.admin() as admin:
            dora_id, _ = make_user(admin, "dora")
            assert dora_id > carl_id
    finally:
        restarted.stop()


def test_a_new_project_never_gets_a_deleted_projects_id(full_daemon: DaemonProc, tmp_path: Path) -> None:
    # what plugins keep under a project id (a memory's project scope here) must not pass to a new project
    for name in ("one", "two", "three"):
        (tmp_path / name).mkdir()
    with full_daemon.admin() as admin:
        one = admin.post("/projects", json={"name": "one", "path": str(tmp_path / "one")}).json()["id"]
        two = admin.post("/projects", json={"name": "two", "path": str(tmp_path / "two")}).json()["id"]
        scoped = admin.post("/memories", json={"text": "two deploys with make ship", "project_id": two})
        assert scoped.status_code == 201, scoped.text
        assert admin.delete(f"/projects/{two}").status_code in (200, 204)
        three = admin.post("/projects", json={"name": "three", "path": str(tmp_path / "three")}).json()["id"]
        assert three not in (one, two) and three > two, "the deleted project's id was handed to a new project"


def test_the_upgrade_starts_the_project_mark_at_the_highest_id(tmp_path: Path) -> None:
    import apsw

    from elowen.core.store import Store

    db = tmp_path / "v4.db"
    store = Store(db)
    store.execute("INSERT INTO projects (id, name, path, created_at) VALUES (7, 'p', '/p', 'x')")
    store.close()
    conn = apsw.Connection(str(db))  # back to a version 4 file: no project trigger, no mark
    conn.execute("DROP TRIGGER projects_highwater")
    conn.execute("DELETE FROM id_highwater WHERE name = 'projects'")
    conn.execute("PRAGMA user_version = 4")
    conn.close()
    store = Store(db)
    try:
        assert store.schema_version == 5
        assert store.query_one("SELECT n FROM id_highwater WHERE name = 'projects'") == {"n": 7}
        store.execute("DELETE FROM projects WHERE id = 7")
        assert store.query_one("SELECT n FROM id_highwater WHERE name = 'projects'") == {"n": 7}
        assert store.integrity_check() == "ok"
    finally:
        store.close()

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

"""A scheduled prompt bound to a project stops when its owner loses that project, exactly as
it does when the owner is demoted: at once on the ``user.updated`` event (no run keeps firing
into a project its owner can no longer see, failing and notifying every time), and a resume
is refused while the owner still lacks the project. Real daemon with the builtin plugins, real
SQLite, HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc, start_daemon
from tests.daemon.helpers import assert_error_shape, make_project, make_user
from tests.support.waiting import wait


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProc]:
    d = start_daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.stop()


def test_a_job_stops_when_its_owner_loses_its_project(daemon: DaemonProc, tmp_path: Path) -> None:
    with daemon.admin() as admin:
        pid = make_project(admin, tmp_path / "site", "site")
        other = make_project(admin, tmp_path / "blog", "blog")
        uid, token = make_user(admin, "ana")
        for project in (pid, other):
            admin.post(f"/users/{uid}/projects", json={"project_id": project}).raise_for_status()
        with daemon.client(token) as ana:
            bound = ana.post("/cron/jobs", json={"prompt": "check the site", "schedule": "every 2h", "project_id": pid}).json()
            elsewhere = ana.post("/cron/jobs", json={"prompt": "check the blog", "schedule": "every 2h", "project_id": other}).json()
            free = ana.post("/cron/jobs", json={"prompt": "summarise my day", "schedule": "every day at 18:00"}).json()

            admin.delete(f"/users/{uid}/projects/{pid}").raise_for_status()

            wait(lambda: ana.get(f"/cron/jobs/{bound['id']}").json()["state"] == "stopped", "the bound job stopped", timeout=10)
            job = ana.get(f"/cron/jobs/{bound['id']}").json()
            assert job["stop_reason"] == f"owner lost project {pid}" and job["next_fires"] == []
            assert ana.get(f"/cron/jobs/{elsewhere['id']}").json()["state"] == "active"  # still hers
            assert ana.get(f"/cron/jobs/{free['id']}").json()["state"] == "active"
            refused = assert_error_shape(ana.post(f"/cron/jobs/{bound['id']}/resume"), 409)
            assert refused["code"] == "owner_lost_project"
            assert ana.get(f"/cron/jobs/{bound['id']}").json()["state"] == "stopped"

            admin.post(f"/users/{uid}/projects", json={"project_id": pid}).raise_for_status()
            assert ana.post(f"/cron/jobs/{bound['id']}/resume").json()["state"] == "active"

"""The one rule for acting on an agent's work, over EVERY route of the daemon's OpenAPI document.

Roles: ``admin``; ``owner`` (a member of project P who created the task and the mission);
``other`` (another member of P: may look, may not act); ``outsider`` (a member of no project);
``agent`` (the agent token of another task, owned by the admin). Each case gets fresh objects
(a task T and a mission M of the owner in P, a decision D on T, an ended agent session S of T),
so destructive routes do not disturb the others.

Every route is classified in :data:`KINDS` (a route missing there fails the test, so a new
route must be classified):

* ``act``: acting on T / M / D / S — admin and owner get 2xx or a 4xx other than 403; other,
  outsider and agent get 403 or 404;
* ``view``: reading T / M / D / S — admin, owner and other get 2xx; outsider and agent 403/404;
* ``admin``: admin-only — the others get 403 (agent tokens 403 too);
* ``any``: the caller's own things or public — no 5xx for anybody.

One daemon (builtin plugins) for the whole module.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import DaemonProc, start_daemon
from .helpers import agent_token, make_project, make_user, parked_task

ROLES = ("admin", "owner", "other", "outsider", "agent")

KINDS: dict[str, str] = {
    # kernel
    "GET /health": "any",
    "GET /openapi.json": "any",
    "GET /users/me": "any",
    "GET /users": "admin",
    "POST /users": "admin",
    "PATCH /users/{user_id}": "admin",
    "DELETE /users/{user_id}": "admin",
    "POST /users/{user_id}/tokens": "admin",
    "DELETE /users/{user_id}/tokens": "admin",
    "POST /users/{user_id}/projects": "admin",
    "DELETE /users/{user_id}/projects/{project_id}": "admin",
    "PUT /users/{user_id}/password": "admin",
    "DELETE /users/{user_id}/password": "admin",
    "POST /users/{user_id}/password/check": "any",
    "POST /auth/login": "any",
    "POST /auth/logout": "any",
    "GET /projects": "any",
    "POST /projects": "admin",
    "GET /projects/{project_id}": "view",
    "DELETE /projects/{project_id}": "admin",
    "GET /tasks": "any",
    "POST /tasks": "any",
    "GET /tasks/{task_id}": "view",
    "PATCH /tasks/{task_id}": "act",
    "DELETE /tasks/{task_id}": "act",
    "POST /tasks/{task_id}/close": "act",
    "POST /tasks/{task_id}/cancel": "act",
    "POST /tasks/{task_id}/progress": "act",
    "GET /tasks/counts": "any",
    # git: reading answers 404 no_worktree for a task without one, so "view" cannot hold; who
    # may read a task's diff is tested in tests/mission_control/test_review.py
    "GET /worktrees": "any",
    "GET /tasks/{id}/worktree": "any",
    "GET /tasks/{id}/diff": "any",
    "POST /tasks/{id}/merge": "act",
    "POST /tasks/{id}/discard": "act",
    "POST /tasks/{id}/pr": "act",
    "GET /plugins": "any",
    "POST /plugins/rescan": "admin",
    "GET /plugins/{name}": "any",
    "POST /plugins/{name}/enable": "admin",
    "POST /plugins/{name}/disable": "admin",
    "PATCH /plugins/{name}/config": "admin",
    "POST /plugins/{name}/grant": "admin",
    "GET /audit": "admin",
    "GET /events": "any",
    # inference
    "GET /providers": "any",
    "POST /providers": "admin",
    "DELETE /providers/{name}": "admin",
    # overseer
    "GET /missions": "any",
    "POST /missions": "any",
    "GET /missions/{id}": "view",
    "PATCH /missions/{id}": "act",
    "POST /missions/{id}/tasks": "act",
    "DELETE /missions/{id}/tasks/{task_id}": "act",
    "POST /missions/{id}/engage": "act",
    "POST /missions/{id}/resume": "act",
    "POST /missions/{id}/pause": "act",
    "POST /missions/{id}/disengage": "act",
    "GET /escalations": "any",
    "POST /escalations/{id}": "act",
    "POST /asks": "any",
    "GET /asks/{id}": "any",
    # agents
    "GET /sessions": "any",
    "GET /sessions/{name}": "view",
    "POST /sessions/{name}/keys": "act",
    "POST /sessions/{name}/ticket": "act",
    "GET /decisions": "any",
    "GET /decisions/{id}": "view",
    "POST /decisions/{id}": "act",
    "POST /agent/permission": "any",  # agent tokens only, for their own running agent (tests/e2e/test_permission_channel_e2e.py)
    "GET /executors": "any",
    # brain (each user's own conversations)
    "GET /brain/conversations": "any",
    "POST /brain/conversations": "any",
    "GET /brain/conversations/{id}": "any",
    "PATCH /brain/conversations/{id}": "any",
    "POST /brain/conversations/{id}/open": "any",
    "POST /brain/conversations/{id}/turn": "any",
    "POST /brain/conversations/{id}/abort": "any",
    "GET /brain/active": "any",
    "GET /brain/model": "any",
    "POST /brain/turn": "any",
    "POST /brain/abort": "any",
    "GET /brain/approvals": "any",
    "GET /brain/goals": "any",
    "POST /brain/approvals/{id}": "any",
    "GET /brain/prefs": "any",
    "PATCH /brain/prefs": "any",
    "GET /brain/channels": "any",
    "POST /brain/channels/link": "any",
    "POST /brain/channels/unlink": "any",
    # overseer-parked (an overseer principal's routes: everybody else is refused)
    "GET /overseer/poll": "any",
    "POST /overseer/decide": "any",
    "GET /overseer/agents": "any",
    # mcp (each MCP tool call is re-checked as the REST call it stands for: tests/mcp)
    "POST /mcp": "any",
    "GET /mcp": "any",
    "DELETE /mcp": "any",
    "GET /mcp/status": "any",
    # mcp-client (a user's own servers, or instance-wide ones for admins: tests/mcp/test_user_servers.py)
    "GET /mcp-servers": "any",
    "POST /mcp-servers": "any",
    "DELETE /mcp-servers/{name}": "any",
    "GET /mcp-servers/{name}/tools": "any",
    "GET /mcp-servers/{name}/resources": "any",
    "GET /mcp-servers/{name}/resources/read": "any",
    # cron, subagent, memory, notify, core-loop: each user's own records (their own tests
    # check owner-only access: tests/cron, tests/subagent, tests/memory, tests/notify,
    # tests/core_loop); here: never a 5xx for any caller
    "DELETE /cron/jobs/{id}": "any",
    "DELETE /memories/{id}": "any",
    "DELETE /notifications/push/subscriptions/{id}": "any",
    "GET /core-loop/projects": "any",
    "GET /core-loop/projects/{id}": "any",
    "GET /core-loop/projects/{id}/receipt": "any",
    "GET /cron/jobs": "any",
    "GET /cron/jobs/{id}": "any",
    "GET /cron/jobs/{id}/runs": "any",
    "GET /cron/status": "any",
    "GET /memories": "any",
    "GET /memories/export": "any",
    "GET /memories/search": "any",
    "GET /memories/status": "any",
    "GET /memories/{id}": "any",
    "GET /memories/{id}/history": "any",
    "GET /notifications": "any",
    "GET /notifications/deliveries": "any",
    "GET /notifications/push/key": "any",
    "GET /notifications/push/subscriptions": "any",
    "GET /notifications/settings": "any",
    "GET /notifications/surfaces": "any",
    "GET /notifications/{id}": "any",
    "GET /subagent/runs": "any",
    "GET /subagent/runs/{id}": "any",
    "PATCH /core-loop/tasks/{id}": "any",
    "PATCH /memories/{id}": "any",
    "POST /core-loop/projects/{id}/approve": "any",
    "POST /core-loop/projects/{id}/run": "any",
    "POST /cron/jobs": "any",
    "POST /cron/jobs/{id}/pause": "any",
    "POST /cron/jobs/{id}/resume": "any",
    "POST /cron/jobs/{id}/run": "any",
    "POST /cron/preview": "any",
    "POST /memories": "any",
    "POST /memories/purge": "admin",
    "POST /notifications/push/subscriptions": "any",
    "POST /notifications/read-all": "any",
    "POST /notifications/test": "any",
    "POST /notifications/{id}/read": "any",
    "PUT /notifications/settings": "any",
}

#: Minimal valid bodies (writes not listed send ``{}``).
BODIES: dict[str, Any] = {
    "POST /users": lambda w: {"name": f"u{next(w.counter)}"},
    "PATCH /users/{user_id}": {"tool_grants": ["x"]},
    "POST /users/{user_id}/projects": lambda w: {"project_id": w.project},
    "PUT /users/{user_id}/password": {"password": "a long enough passphrase"},
    "DELETE /users/{user_id}/password": {},
    "POST /users/{user_id}/password/check": {"current": "x"},
    "POST /auth/login": lambda w: {"name": f"nobody{next(w.counter)}", "password": "x"},
    "POST /projects": lambda w: w.new_folder(),
    "POST /tasks": lambda w: {"title": "new", "project_id": w.project},
    "PATCH /tasks/{task_id}": {"title": "renamed", "description": "a rewritten prompt"},
    "POST /tasks/{task_id}/close": {"summary": "done"},
    "POST /tasks/{task_id}/progress": {"text": "50%"},
    "POST /agent/permission": {"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "ls"}},
    "PATCH /plugins/{name}/config": {"values": {}},
    "POST /plugins/{name}/grant": {"capability": "net:example.invalid"},
    "POST /providers": {"name": "x", "api": "openai", "base_url": "http://127.0.0.1:9"},
    "POST /missions": lambda w: {"name": f"m{next(w.counter)}", "level": "L0", "project_id": w.project},
    "PATCH /missions/{id}": {"level": "L3"},
    "POST /missions/{id}/tasks": lambda w: {"task_ids": [w.objects["task"]]},
    "POST /escalations/{id}": {"action": "approve"},
    "POST /asks": {"question": "is it done?"},
    "POST /sessions/{name}/keys": {"keys": ["Enter"]},
    "POST /sessions/{name}/ticket": {"input": True},
    "POST /decisions/{id}": {"action": "approve"},
    "POST /brain/conversations": {"title": "x"},
    "PATCH /brain/conversations/{id}": {"title": "y"},
    "POST /brain/conversations/{id}/turn": {"text": ""},
    "POST /brain/turn": {"text": ""},
    "POST /brain/approvals/{id}": {"action": "reject"},
    "PATCH /brain/prefs": {},
    "POST /brain/channels/link": {"code": "XXXX-XXXX"},
    "POST /brain/channels/unlink": {"platform": "x", "platform_user": "y"},
    "POST /overseer/decide": {"decision_id": 1, "action": "approve"},
}

QUERIES = {"GET /overseer/poll": {"wait": "0"}, "GET /asks/{id}": {"wait": "0"}}


@dataclass
class World:
    d: DaemonProc
    tmp: Path
    admin: httpx.Client
    project: int
    owner: tuple[int, str]
    other: tuple[int, str]
    outsider: tuple[int, str]
    counter: itertools.count  # type: ignore[type-arg]
    objects: dict[str, Any]
    paths: dict[str, dict[str, Any]]

    def new_folder(self) -> dict[str, str]:
        folder = self.tmp / f"p{next(self.counter)}"
        folder.mkdir()
        return {"name": folder.name, "path": str(folder)}

    def fresh(self) -> dict[str, Any]:
        """A task, mission, decision and ended session of the owner in P; an agent token of
        another (admin-owned) task; a spare user."""
        with self.d.client(self.owner[1]) as c:
            task = c.post("/tasks", json={"title": "owner's task", "project_id": self.project, "labels": ["rbac"]})
            assert task.status_code == 201, task.text
            tid = task.json()["id"]
            mission = c.post("/missions", json={"name": f"m{next(self.counter)}", "level": "L0", "project_id": self.project, "task_ids": [tid]})
            assert mission.status_code == 201, mission.text
        other_task = parked_task(self.admin, self.project, "admin's task")
        n = next(self.counter)
        session = f"rbac-t{tid}-{uuid.uuid4().hex[:8]}"
        db = sqlite3.connect(self.d.home / "elowen.db", timeout=10)
        try:
            with db:
                db.execute(
                    "INSERT INTO agent_sessions (task_id, attempt, provider, session, workdir, state, started_at, ended_at, project_id) "
                    "VALUES (?, ?, 'codex', ?, '/tmp', 'ended', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z', ?)",
                    (tid, n + 1, session, self.project),
                )
                did = db.execute(
                    "INSERT INTO decisions (kind, task_id, session, payload, status, created_at, project_id) "
                    "VALUES ('question', ?, ?, ?, 'escalated', '2026-01-01T00:00:00Z', ?)",
                    (tid, session, json.dumps({"question": "go on?"}), self.project),
                ).lastrowid
        finally:
            db.close()
        spare, _ = make_user(self.admin, f"spare{n}")
        self.objects = {
            "task": tid,
            "mission": mission.json()["id"],
            "decision": did,
            "session": session,
            "agent": agent_token(self.d.home, other_task),
            "spare": spare,
        }
        return self.objects


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("rbac-acting")
    d = start_daemon(tmp / "home")
    admin = d.admin()
    try:
        project = make_project(admin, tmp / "proj", "P")
        owner = make_user(admin, "owner")
        other = make_user(admin, "other")
        outsider = make_user(admin, "outsider")
        for uid in (owner[0], other[0]):
            assert admin.post(f"/users/{uid}/projects", json={"project_id": project}).status_code == 200
        paths = admin.get("/openapi.json").json()["paths"]
        yield World(d, tmp, admin, project, owner, other, outsider, itertools.count(), {}, paths)
    finally:
        admin.close()
        d.stop()


def _routes(world_paths: dict[str, dict[str, Any]]) -> list[str]:
    return [f"{m.upper()} {p}" for p, ops in world_paths.items() for m in ops]


def _fill(route: str, w: World) -> str:
    method, path = route.split(" ", 1)
    o = w.objects
    values = {
        "task_id": o["task"],
        "user_id": o["spare"],
        "project_id": w.project,
        "name": "codex",
    }
    if path.startswith("/missions/"):
        values["id"] = o["mission"]
    elif path.startswith(("/decisions/", "/escalations/", "/asks/")):
        values["id"] = o["decision"]
    elif path.startswith("/sessions/"):
        values["name"] = o["session"]
    elif path.startswith("/brain/"):
        values["id"] = 1
    elif path.startswith("/providers/"):
        values["name"] = "nonexistent"
    if route == "DELETE /users/{user_id}/projects/{project_id}":
        w.admin.post(f"/users/{o['spare']}/projects", json={"project_id": w.project})
    for key, value in values.items():
        path = path.replace("{" + key + "}", str(value))
    return path


def _token(w: World, role: str) -> str:
    return {"admin": w.d.admin_token, "owner": w.owner[1], "other": w.other[1], "outsider": w.outsider[1], "agent": w.objects["agent"]}[role]


def test_every_route_is_classified(world: World) -> None:
    missing = sorted(set(_routes(world.paths)) - set(KINDS))
    assert not missing, f"classify these routes in KINDS: {missing}"
    acting = [r for r, k in KINDS.items() if k == "act"]
    assert len(acting) >= 16


def _call(w: World, route: str, role: str) -> tuple[int, str]:
    """The status and (the start of) the body; streamed answers are not read to their end."""
    method, _ = route.split(" ", 1)
    path = _fill(route, w)
    body = BODIES.get(route, {} if method in ("POST", "PUT", "PATCH", "DELETE") else None)
    if callable(body):
        body = body(w)
    with w.d.client(_token(w, role)) as c:
        with c.stream(method, path, json=body, params=QUERIES.get(route), timeout=10) as r:
            if r.headers.get("content-type", "").startswith(("text/event-stream", "application/x-ndjson")):
                return r.status_code, ""
            return r.status_code, r.read().decode(errors="replace")


MATRIX = [(route, role) for route in KINDS for role in ROLES]


@pytest.mark.parametrize(("route", "role"), MATRIX, ids=[f"{r}-{role}" for r, role in MATRIX])
def test_matrix(world: World, route: str, role: str) -> None:
    if route not in {r for r in _routes(world.paths)}:
        pytest.skip(f"{route} is not served (its plugin is off)")
    if route == "POST /plugins/{name}/disable" and role == "admin":
        world.admin.post("/plugins/codex/enable")  # left as it was below
    if "{" in route or route.split(" ")[0] != "GET" or not world.objects:
        world.fresh()  # fresh objects for anything that may change or consume them
    status, text = _call(world, route, role)
    kind = KINDS[route]
    where = (route, role, status, text[:300])
    assert status < 500, where
    if kind == "act":
        if role in ("admin", "owner"):
            assert status < 400 or status not in (401, 403), where
        else:
            assert status in (403, 404), where
    elif kind == "view":
        if role in ("admin", "owner", "other"):
            assert 200 <= status < 300, where
        else:
            assert status in (403, 404), where
    elif kind == "admin":
        if role != "admin":
            assert status == 403, where
    if route == "POST /plugins/{name}/disable" and role == "admin":
        world.admin.post("/plugins/codex/enable")


def test_member_cannot_answer_through_escalations_what_decisions_refuses(world: World) -> None:
    """The review's finding: 403 on POST /decisions/{id} but 200 on POST /escalations/{id}."""
    o = world.fresh()
    with world.d.client(world.other[1]) as c:
        assert c.post(f"/decisions/{o['decision']}", json={"action": "approve"}).status_code == 403
        r = c.post(f"/escalations/{o['decision']}", json={"action": "approve"})
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "not_owner"
    assert world.admin.get(f"/decisions/{o['decision']}").json()["status"] == "escalated"


def test_member_cannot_raise_and_engage_another_members_mission(world: World) -> None:
    o = world.fresh()
    with world.d.client(world.other[1]) as c:
        assert c.get(f"/missions/{o['mission']}").status_code == 200  # members may look
        assert c.patch(f"/missions/{o['mission']}", json={"level": "L3"}).status_code == 403
        assert c.post(f"/missions/{o['mission']}/engage", json={}).status_code == 403
    mission = world.admin.get(f"/missions/{o['mission']}").json()
    assert (mission["level"], mission["state"]) == (0, "paused")
    with world.d.client(world.owner[1]) as c:
        assert c.patch(f"/missions/{o['mission']}", json={"level": "L1"}).status_code == 200


def test_member_cannot_rewrite_or_cancel_another_members_task(world: World) -> None:
    o = world.fresh()
    with world.d.client(world.other[1]) as c:
        assert c.get(f"/tasks/{o['task']}").status_code == 200
        for r in (c.patch(f"/tasks/{o['task']}", json={"description": "rm -rf ~"}), c.post(f"/tasks/{o['task']}/cancel"), c.delete(f"/tasks/{o['task']}")):
            assert r.status_code == 403, r.text
            assert r.json()["error"]["code"] == "not_owner"
    task = world.admin.get(f"/tasks/{o['task']}").json()
    assert task["description"] != "rm -rf ~" and task["state"] != "cancelled"
    with world.d.client(world.owner[1]) as c:
        assert c.patch(f"/tasks/{o['task']}", json={"title": "mine"}).status_code == 200


@pytest.mark.parametrize("path", ["/missions", "/decisions/1", "/sessions/x/keys", "/escalations/1", "/tasks"])
def test_deeply_nested_json_is_400_on_plugin_routes_too(world: World, path: str) -> None:
    """A body nested past Python's recursion limit used to answer 500 on plugin routes."""
    body = "[" * 100_000 + "]" * 100_000
    r = world.admin.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, (r.status_code, r.text[:200])
    assert r.json()["error"]["code"] == "malformed_json"
    assert world.admin.get("/health").status_code == 200

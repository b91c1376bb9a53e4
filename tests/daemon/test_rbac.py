"""RBAC matrix against a real daemon: every endpoint × admin, member with project access,
member without, agent token (own task / another task), no token. No response leaks what the
caller may not see."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .conftest import DaemonProc
from .helpers import agent_token, assert_error_shape, make_project, make_user, parked_task

PRINCIPALS = ("admin", "member_in", "member_out", "agent_own", "agent_other", "none")
SECRET = f"SECRET-{uuid.uuid4().hex}"  # titles of project-B tasks: member_in must never see it


@dataclass
class World:
    d: DaemonProc
    tmp: Path
    admin: httpx.Client
    project_a: int
    project_b: int
    member_in: tuple[int, str]
    member_out: tuple[int, str]
    spare: int
    counter: itertools.count  # type: ignore[type-arg]

    def task(self, project: str) -> int:
        pid = self.project_a if project == "A" else self.project_b
        title = f"task in {project}" if project == "A" else f"{SECRET} task"
        return parked_task(self.admin, pid, title)


@pytest.fixture(scope="module")
def world(shared_daemon: DaemonProc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("rbac")
    admin = shared_daemon.admin()
    a = make_project(admin, tmp / "a", "A")
    b = make_project(admin, tmp / "b", "B")
    m_in = make_user(admin, "member-in")
    m_out = make_user(admin, "member-out")
    spare, _ = make_user(admin, "spare")
    assert admin.post(f"/users/{m_in[0]}/projects", json={"project_id": a}).status_code == 200
    yield World(shared_daemon, tmp, admin, a, b, m_in, m_out, spare, itertools.count())
    admin.close()


@dataclass
class Case:
    """One endpoint: ``call(client, world, task_id)`` and the expected status per principal."""

    name: str
    call: Callable[[httpx.Client, World, int], httpx.Response]
    expect: dict[str, int]


def full(admin: int, member_in: int, member_out: int, agent: int = 403) -> dict[str, int]:
    return {"admin": admin, "member_in": member_in, "member_out": member_out, "agent_own": agent, "agent_other": agent, "none": 401}


def admin_only(ok: int) -> dict[str, int]:
    return full(ok, 403, 403)


def task_case(ok: int, own: int = 403) -> dict[str, int]:
    """A task endpoint on a task in project A (agent_own is bound to that very task)."""
    return {"admin": ok, "member_in": ok, "member_out": 404, "agent_own": own, "agent_other": 403, "none": 401}


def acting_case(ok: int, own: int = 403) -> dict[str, int]:
    """Acting on a task in project A that the admin owns: member_in sees it but is not its
    owner (403 ``not_owner``, the one acting rule)."""
    return {**task_case(ok, own), "member_in": 403}


def _plugin_capability(w: World) -> str:
    caps = w.admin.get("/plugins/codex").json()["capabilities"]
    declared = caps["required"] + caps["optional"]
    return declared[0] if declared else "none"


def _create_project(c: httpx.Client, w: World) -> httpx.Response:
    folder = w.tmp / f"p{next(w.counter)}"
    folder.mkdir()
    return c.post("/projects", json={"name": folder.name, "path": str(folder)})


def _events(c: httpx.Client, w: World, t: int) -> httpx.Response:
    with c.stream("GET", "/events") as r:
        r.read() if r.status_code != 200 else None
        return r


CASES = [
    Case("health", lambda c, w, t: c.get("/health"), {p: 200 for p in PRINCIPALS}),
    Case("openapi", lambda c, w, t: c.get("/openapi.json"), {p: 200 for p in PRINCIPALS}),
    Case("users.me", lambda c, w, t: c.get("/users/me"), full(200, 200, 200)),
    Case("users.list", lambda c, w, t: c.get("/users"), admin_only(200)),
    Case("users.create", lambda c, w, t: c.post("/users", json={"name": f"u{next(w.counter)}"}), admin_only(201)),
    Case("users.patch", lambda c, w, t: c.patch(f"/users/{w.spare}", json={"tool_grants": ["x"]}), admin_only(200)),
    Case("users.token", lambda c, w, t: c.post(f"/users/{w.spare}/tokens"), admin_only(201)),
    Case("users.password", lambda c, w, t: c.put(f"/users/{w.spare}/password", json={"password": "spare passphrase"}), admin_only(200)),
    Case("auth.login", lambda c, w, t: c.post("/auth/login", json={"name": f"nobody{next(w.counter)}", "password": "x"}), {p: 401 for p in PRINCIPALS}),
    Case("users.project.add", lambda c, w, t: c.post(f"/users/{w.spare}/projects", json={"project_id": w.project_b}), admin_only(200)),
    Case(
        "users.project.remove",
        lambda c, w, t: (w.admin.post(f"/users/{w.spare}/projects", json={"project_id": w.project_a}), c.delete(f"/users/{w.spare}/projects/{w.project_a}"))[1],
        admin_only(200),
    ),
    Case("projects.list", lambda c, w, t: c.get("/projects"), full(200, 200, 200)),
    Case("projects.create", lambda c, w, t: _create_project(c, w), admin_only(201)),
    Case("projects.get", lambda c, w, t: c.get(f"/projects/{w.project_a}"), full(200, 200, 404)),
    Case("tasks.list", lambda c, w, t: c.get("/tasks"), full(200, 200, 200)),
    Case("tasks.create", lambda c, w, t: c.post("/tasks", json={"title": "new", "project_id": w.project_a}), full(201, 201, 404)),
    Case("tasks.get", lambda c, w, t: c.get(f"/tasks/{t}"), task_case(200, own=200)),
    Case("tasks.patch", lambda c, w, t: c.patch(f"/tasks/{t}", json={"title": "renamed"}), acting_case(200)),
    Case("tasks.delete", lambda c, w, t: c.delete(f"/tasks/{t}"), acting_case(200)),
    Case("tasks.close", lambda c, w, t: c.post(f"/tasks/{t}/close", json={"summary": "done"}), acting_case(200, own=200)),
    Case("tasks.cancel", lambda c, w, t: c.post(f"/tasks/{t}/cancel"), acting_case(200)),
    Case("tasks.progress", lambda c, w, t: c.post(f"/tasks/{t}/progress", json={"text": "50%"}), acting_case(201, own=201)),
    Case("plugins.list", lambda c, w, t: c.get("/plugins"), full(200, 200, 200)),
    Case("plugins.get", lambda c, w, t: c.get("/plugins/codex"), full(200, 200, 200)),
    Case("plugins.disable", lambda c, w, t: c.post("/plugins/codex/disable"), admin_only(200)),
    Case("plugins.enable", lambda c, w, t: c.post("/plugins/codex/enable"), admin_only(200)),
    Case("plugins.config", lambda c, w, t: c.patch("/plugins/codex/config", json={"values": {}}), admin_only(200)),
    Case("plugins.grant", lambda c, w, t: c.post("/plugins/codex/grant", json={"capability": _plugin_capability(w)}), admin_only(200)),
    Case("plugins.rescan", lambda c, w, t: c.post("/plugins/rescan"), admin_only(200)),
    Case("audit", lambda c, w, t: c.get("/audit"), admin_only(200)),
    Case("events", _events, full(200, 200, 200)),
]


def _client(w: World, principal: str, task_id: int) -> httpx.Client:
    tokens: dict[str, Callable[[], str | None]] = {
        "admin": lambda: w.d.admin_token,
        "member_in": lambda: w.member_in[1],
        "member_out": lambda: w.member_out[1],
        "agent_own": lambda: agent_token(w.d.home, task_id),
        "agent_other": lambda: agent_token(w.d.home, w.task("A")),
        "none": lambda: None,
    }
    return w.d.client(tokens[principal]())


@pytest.mark.parametrize("principal", PRINCIPALS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rbac_matrix(world: World, case: Case, principal: str) -> None:
    task_id = world.task("A")
    with _client(world, principal, task_id) as client:
        response = case.call(client, world, task_id)
    expected = case.expect[principal]
    assert response.status_code == expected, (case.name, principal, response.status_code, response.text)
    if response.status_code >= 400:
        assert_error_shape(response)
    if principal != "admin" and case.name != "events":
        assert SECRET not in response.text


def test_member_lists_show_only_their_projects(world: World) -> None:
    hidden = world.task("B")
    visible = world.task("A")
    with world.d.client(world.member_in[1]) as c:
        tasks = c.get("/tasks", params={"limit": 500}).json()["items"]
        assert visible in {t["id"] for t in tasks}
        assert {t["project_id"] for t in tasks} == {world.project_a}
        assert [p["id"] for p in c.get("/projects").json()["items"]] == [world.project_a]
        assert c.get(f"/tasks/{hidden}").status_code == 404
        assert c.get("/tasks", params={"project": world.project_b}).json()["items"] == []
        r = c.post("/tasks", json={"title": "x", "project_id": world.project_a, "deps": [hidden]})
        assert_error_shape(r, 404)
        assert SECRET not in r.text
    with world.d.client(world.member_out[1]) as c:
        assert c.get("/tasks").json() == {"items": [], "next_cursor": None}
        assert c.get("/projects").json() == {"items": [], "next_cursor": None}


def test_revoked_agent_token_is_refused(world: World) -> None:
    from elowen.core.store import Store
    from elowen.daemon.auth import revoke_task_tokens

    task_id = world.task("A")
    token = agent_token(world.d.home, task_id)
    with world.d.client(token) as c:
        assert c.get(f"/tasks/{task_id}").status_code == 200
        store = Store(world.d.home / "elowen.db")
        try:
            assert revoke_task_tokens(store, task_id) == 1
        finally:
            store.close()
        assert_error_shape(c.get(f"/tasks/{task_id}"), 401)


def test_member_exec_allow_list(world: World) -> None:
    admin = world.admin
    uid, token = make_user(admin, f"limited{next(world.counter)}", allowed_execs=["opencode:*"])
    admin.post(f"/users/{uid}/projects", json={"project_id": world.project_a})
    with world.d.client(token) as c:
        ok = c.post("/tasks", json={"title": "x", "project_id": world.project_a, "exec": "anthropic/claude-x"})
        assert ok.status_code == 201, ok.text
        assert ok.json()["exec_resolved"] == {"provider": "opencode", "model": "anthropic/claude-x"}
        denied = c.post("/tasks", json={"title": "x", "project_id": world.project_a, "exec": "opus"})
        err = assert_error_shape(denied, 403)
        assert err["code"] == "exec_not_allowed" and "opus" in err["message"]
        # no exec: the fallback (sonnet) is what would run, and it is not in the member's list
        assert_error_shape(c.post("/tasks", json={"title": "x", "project_id": world.project_a}), 403)
    # an admin is limited only by the daemon's list
    assert admin.post("/tasks", json={"title": "x", "project_id": world.project_a, "exec": "opus"}).status_code == 201

"""Bad and out-of-range ids on the overseer routes, against the real daemon over HTTP (a
member of one project, as the review found): every one answers a 4xx with the error shape
``{"error": {"code", "message"}}``, never a 500 (SQLite cannot bind integers above
2**63-1; binding one used to raise ``OverflowError``). Also, on the same daemon: ``GET
/providers`` and ``elowen provider list`` show the embedded ``local`` provider."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest
import tomli_w

from elowen_builtins.overseer.ids import MAX_ID, parse_id
from elowen_sdk.pagination import decode_cursor, encode_cursor
from tests.daemon.conftest import DaemonProc, start_daemon

BAD = ["abc", "-1", "0", "99999999999999999999999", str(2**63), "%C2%B2", "1.5"]
BAD_BODY: list[object] = ["abc", -1, 0, 99999999999999999999999, 2**63, 1.5, True, None, "7"]


def test_parse_id_bounds() -> None:
    assert parse_id("1") == 1
    assert parse_id(str(MAX_ID)) == MAX_ID
    assert parse_id(MAX_ID) == MAX_ID
    for value in [*BAD, "²", " 1", "+1", "", *BAD_BODY]:
        if value != "7":
            assert parse_id(value) is None, value


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, httpx.Client, int]]:
    root = tmp_path_factory.mktemp("overseer-ids")
    project = root / "proj"
    project.mkdir()
    home = root / "home"
    home.mkdir()
    sock = f"elowen-test-{uuid.uuid4().hex[:8]}"
    (home / "config.toml").write_text(tomli_w.dumps({"plugins": {"tmux": {"config": {"socket": sock}}}}))
    daemon = start_daemon(home)
    try:
        with daemon.admin() as admin:
            pid = admin.post("/projects", json={"name": "proj", "path": str(project)}).json()["id"]
            user = admin.post("/users", json={"name": "mia", "role": "member"}).json()
            admin.post(f"/users/{user['user']['id']}/projects", json={"project_id": pid}).raise_for_status()
        with daemon.client(user["token"]) as client:
            mission = client.post("/missions", json={"name": "m", "level": "L1", "project_id": pid})
            assert mission.status_code == 201, mission.text
            yield daemon, client, mission.json()["id"]
    finally:
        daemon.stop()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def _check(resp: httpx.Response, expected: int) -> None:
    assert resp.status_code == expected, (resp.request.method, resp.request.url, resp.status_code, resp.text)
    error = resp.json()["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]


@pytest.mark.slow
def test_bad_path_ids_are_404(member: tuple[DaemonProc, httpx.Client, int]) -> None:
    daemon, client, mid = member
    for bad in BAD:
        calls = [
            ("GET", f"/asks/{bad}", None),
            ("GET", f"/missions/{bad}", None),
            ("PATCH", f"/missions/{bad}", {"name": "x"}),
            ("POST", f"/missions/{bad}/engage", {}),
            ("POST", f"/missions/{bad}/pause", {}),
            ("POST", f"/missions/{bad}/tasks", {"task_ids": [1]}),
            ("DELETE", f"/missions/{mid}/tasks/{bad}", None),
            ("DELETE", f"/missions/{bad}/tasks/1", None),
            ("POST", f"/escalations/{bad}", {"action": "approve"}),
        ]
        for method, path, body in calls:
            _check(client.request(method, path, json=body), 404)
    assert "OverflowError" not in daemon.log_path.read_text()


@pytest.mark.slow
def test_bad_body_ids_are_422(member: tuple[DaemonProc, httpx.Client, int]) -> None:
    daemon, client, mid = member
    for bad in BAD_BODY:
        if bad is None:
            continue
        _check(client.post(f"/missions/{mid}/tasks", json={"task_ids": [bad]}), 422)
        _check(client.post("/missions", json={"name": "n", "task_ids": [bad], "project_id": 1}), 422)
        _check(client.post("/missions", json={"name": "n", "project_id": bad}), 422)
        _check(client.post("/asks", json={"question": "q?", "task_id": bad}), 422)
    _check(client.patch(f"/missions/{mid}", json={"max_sessions": 99999999999999999999999}), 422)
    _check(client.post("/missions", json={"name": "n", "project_id": 1, "max_sessions": 2**70}), 422)
    with daemon.admin() as admin:
        for bad in ("abc", "-1", "0", "99999999999999999999999"):
            resp = admin.get("/overseer/poll", params={"mission": bad, "wait": "0"})
            assert resp.status_code in (409, 422), resp.text
        _check(admin.post("/overseer/decide", json={"mission": 1, "id": 99999999999999999999999, "action": "approve"}), 422)
    assert "OverflowError" not in daemon.log_path.read_text()


@pytest.mark.slow
def test_good_ids_still_work(member: tuple[DaemonProc, httpx.Client, int]) -> None:
    _, client, mid = member
    assert client.get(f"/missions/{mid}").json()["id"] == mid
    _check(client.get(f"/missions/{mid + 1000}"), 404)
    _check(client.get(f"/asks/{MAX_ID}"), 404)
    _check(client.post(f"/escalations/{MAX_ID}", json={"action": "approve"}), 404)


@pytest.mark.slow
def test_provider_list_shows_the_builtin_local(member: tuple[DaemonProc, httpx.Client, int]) -> None:
    daemon, _, _ = member
    with daemon.admin() as admin:
        items = admin.get("/providers").json()["items"]
    assert [(p["name"], p["kind"], p["source"]) for p in items] == [("local", "local", "builtin")]
    env = {**os.environ, "ELOWEN_URL": daemon.url, "ELOWEN_TOKEN": daemon.admin_token, "ELOWEN_HOME": str(daemon.home)}
    out = subprocess.run(
        [sys.executable, "-c", "from elowen.cli.main import main; main()", "provider", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    assert "(no providers)" not in out.stdout
    row = out.stdout.splitlines()[1].split()
    assert row[:3] == ["local", "local", "built-in"], out.stdout


def test_escalations_while_the_agents_plugin_is_disabled(member: tuple[DaemonProc, httpx.Client, int]) -> None:
    """Decisions come from the agents plugin: with it off, the inbox is empty (not a 500) and
    answering is refused with a clear 503."""
    daemon, client, _ = member
    with daemon.admin() as admin:
        disabled = admin.post("/plugins/agents/disable", json={"cascade": True})  # the deriver requires agents
        assert disabled.status_code == 200, disabled.text
        try:
            listed = client.get("/escalations")
            assert listed.status_code == 200 and listed.json()["items"] == []
            answered = client.post("/escalations/1", json={"action": "approve"})
            assert answered.status_code == 503, answered.text
            assert "elowen plugin enable agents" in answered.json()["error"]["message"]
        finally:
            assert admin.post("/plugins/agents/enable").json()["state"] == "enabled"
            for name in reversed(disabled.json()["cascaded"]):
                assert admin.post(f"/plugins/{name}/enable").json()["state"] == "enabled"


@pytest.mark.slow
def test_plugin_lists_share_the_daemons_cursor(member: tuple[DaemonProc, httpx.Client, int]) -> None:
    """``/missions`` pages with the SDK's cursor (``elowen_sdk.pagination``), the same format as
    ``/tasks``; the old per-plugin formats and garbage are 400 ``bad_cursor`` on every plugin list."""
    daemon, client, mid = member
    pid = client.get(f"/missions/{mid}").json()["project_id"]
    made = [client.post("/missions", json={"name": f"page-{i}", "level": "L1", "project_id": pid}).json()["id"] for i in range(2)]
    seen, cursor = [], None
    while True:
        body = client.get("/missions", params={"limit": 1, **({"cursor": cursor} if cursor else {})}).json()
        seen += [m["id"] for m in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
        assert decode_cursor(cursor) == seen[-1]
    assert seen == sorted(seen) and {mid, *made} <= set(seen)
    for path in ("/missions", "/escalations", "/decisions"):
        for bad in ("garbage!", "bzU", "ZDEy", "YzoxMg", "djE6LTE"):  # o5, d12, c:12, v1:-1
            resp = client.get(path, params={"cursor": bad})
            _check(resp, 400)
            assert resp.json()["error"]["code"] == "bad_cursor"
        assert client.get(path, params={"cursor": encode_cursor(10**6)}).json()["items"] == []
    assert "Traceback" not in daemon.log_path.read_text()

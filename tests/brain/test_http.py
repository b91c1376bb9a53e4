"""The brain over HTTP against the real daemon process (plugin routes, NDJSON and SSE streaming,
approvals, ownership), and the ``elowen chat`` CLI against it. The scripted model server
plays the model (OpenAI Chat Completions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, start_daemon
from tests.support.model_server import ModelServer, ParsedRequest, Reply

from .conftest import call

pytestmark = pytest.mark.slow

SPEC = "fake/test-model"


class Script:
    """Replies by the last user prompt's keyword."""

    def __call__(self, r: ParsedRequest) -> Reply:
        if not r.has_tools:
            return Reply(text="summary")
        if "explode" in r.prompt:
            return Reply(status=500, error_message="scripted model failure")
        if "edit" in r.prompt and not r.tool_results:
            return Reply(tool_calls=[call("files.edit", path="hello.txt", old="world", new="HTTP")])
        if "run" in r.prompt and not r.tool_results:
            return Reply(tool_calls=[call("terminal.run", command="echo ran > ran.txt")])
        if "goal" in r.prompt.lower() or "Continue" in r.prompt:
            return Reply(text="PROGRESS: step")
        return Reply(text=f"reply to: {r.prompt}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, ModelServer, Path]]:
    root = tmp_path_factory.mktemp("brainhttp")
    project = root / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("Hello, world\n")
    with ModelServer(Script()) as server:
        home = root / "home"
        home.mkdir()
        config = {
            "plugins": {name: {"enabled": False} for name in ("agents", "claude-code", "opencode", "codex", "kilo", "tmux")}
            | {"brain": {"config": {"default_model": SPEC, "goal_turn_budget": 2}}},
            "inference": {"providers": {"fake": {"kind": "openai", "base_url": server.url + "/v1", "max_retries": 0}}},
        }
        (home / "config.toml").write_text(tomli_w.dumps(config))
        daemon = start_daemon(home)
        try:
            with daemon.admin() as admin:
                pid = admin.post("/projects", json={"name": "proj", "path": str(project)}).json()["id"]
                user = admin.post("/users", json={"name": "mia", "role": "member", "tool_grants": ["*"]}).json()
                admin.post(f"/users/{user['user']['id']}/projects", json={"project_id": pid}).raise_for_status()
            daemon.extra["member_token"] = user["token"]
            yield daemon, server, project
        finally:
            daemon.stop()


def ndjson(client: httpx.Client, path: str, text: str, **extra: object) -> list[dict]:
    with client.stream("POST", path, json={"text": text, **extra}, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) for line in resp.iter_lines() if line.strip()]


def test_streamed_turn_edits_a_file_and_sse_carries_the_events(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, project = stack
    with daemon.admin() as admin:
        conv = admin.post("/brain/conversations", json={})
        assert conv.status_code == 201
        cid = conv.json()["id"]
        events = ndjson(admin, f"/brain/conversations/{cid}/turn", "please edit hello")
        assert events[-1]["type"] == "brain.done"
        assert (project / "hello.txt").read_text() == "Hello, HTTP\n"
        assert any(e["type"] == "brain.tool" and e["tool"] == "files.edit" and e.get("ok") for e in events)
        # the same events are on the durable bus, for SSE
        seen: list[tuple[str, dict]] = []
        with admin.stream("GET", "/events", params={"types": "brain.*", "last_event_id": "0"}, timeout=10) as resp:
            kind = ""
            for line in resp.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if data.get("conversation_id") == cid:
                        seen.append((kind, data))
                        if kind == "brain.done":
                            break
        kinds = [k for k, _ in seen]
        assert kinds[0] == "brain.message" and "brain.tool" in kinds and "brain.delta" in kinds
        seen = [d for _, d in seen]
        assert all(s["user_id"] == 1 for s in seen)
        # and the conversation view has the stored exchange
        view = admin.get(f"/brain/conversations/{cid}").json()
        assert [m["role"] for m in view["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_sse_format_ownership_and_validation(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, _ = stack
    with daemon.admin() as admin, daemon.client(str(daemon.extra["member_token"])) as member:
        cid = admin.post("/brain/conversations", json={}).json()["id"]
        assert member.get(f"/brain/conversations/{cid}").status_code == 404
        assert member.post(f"/brain/conversations/{cid}/turn", json={"text": "hi"}).status_code == 404
        assert admin.post(f"/brain/conversations/{cid}/turn", json={"text": ""}).status_code == 422
        assert admin.post(f"/brain/conversations/{cid}/turn", json={"text": "x", "max_turns": 0}).status_code == 422
        assert admin.get("/brain/conversations/99999999").json()["error"]["code"] == "not_found"
        with admin.stream("POST", f"/brain/conversations/{cid}/turn", params={"format": "sse"}, json={"text": "hello"}) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            body = resp.read().decode()
        assert "event: brain.delta" in body and "event: brain.done" in body
        # the member has no active conversation yet: a GET does not create one, a turn does
        for _ in range(2):
            none = member.get("/brain/active")
            assert none.status_code == 404 and none.json()["error"]["code"] == "no_active_conversation"
        before = len(member.get("/brain/conversations").json()["items"])
        assert member.post("/brain/turn", params={"stream": "false"}, json={"text": "hello"}).status_code == 200
        mine = member.get("/brain/active").json()["conversation"]
        assert mine["user_id"] != 1 and mine["active"]
        assert len(member.get("/brain/conversations").json()["items"]) == before + 1


def test_approval_round_trip_over_http(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, project = stack
    with daemon.admin() as admin:
        cid = admin.post("/brain/conversations", json={}).json()["id"]
        result: list[list[dict]] = []
        thread = threading.Thread(target=lambda: result.append(ndjson(daemon.admin(), f"/brain/conversations/{cid}/turn", "run it")))
        thread.start()
        deadline = time.monotonic() + 15
        while not (items := admin.get("/brain/approvals").json()["items"]):
            assert time.monotonic() < deadline, "no approval appeared"
            time.sleep(0.05)
        assert items[0]["tool"] == "terminal.run"
        assert admin.post(f"/brain/approvals/{items[0]['id']}", json={"decision": "maybe"}).status_code == 422
        assert admin.post(f"/brain/approvals/{items[0]['id']}", json={"decision": "allow"}).json()["state"] == "allowed"
        thread.join(15)
        assert (project / "ran.txt").read_text() == "ran\n"
        assert any(e["type"] == "brain.approval" for e in result[0])
        assert admin.post(f"/brain/approvals/{items[0]['id']}", json={"decision": "allow"}).status_code == 409


def _chat(daemon: DaemonProc, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    code = "from elowen.cli.main import main; main()"
    env = {**os.environ, "ELOWEN_URL": daemon.url, "ELOWEN_TOKEN": token or daemon.admin_token, "ELOWEN_HOME": str(daemon.home)}
    return subprocess.run([sys.executable, "-c", code, "chat", *args], capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def test_cli_one_shot_list_and_headless_goal(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, _ = stack
    out = _chat(daemon, "--new", "-m", "hello there")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "reply to: hello there"
    listed = _chat(daemon, "--list", "--json")
    assert listed.returncode == 0 and isinstance(json.loads(listed.stdout), list)
    goal = _chat(daemon, "--goal", "count things", "--max-turns", "2")
    assert goal.returncode == 1 and "budget_reached" in goal.stderr, goal.stderr
    # two CLIs bound to their own conversations do not touch the member's pointer or each other
    a = _chat(daemon, "--new", "-m", "from A", token=str(daemon.extra["member_token"]))
    b = _chat(daemon, "--new", "-m", "from B", token=str(daemon.extra["member_token"]))
    assert a.stdout.strip() == "reply to: from A" and b.stdout.strip() == "reply to: from B"


BAD_IDS = ["abc", "-1", "0", "99999999999999999999999", str(2**63), "%C2%B2"]


def _error(resp: httpx.Response, status: int, code: str | None = None) -> None:
    assert resp.status_code == status, (resp.request.method, resp.request.url, resp.text)
    error = resp.json()["error"]
    assert isinstance(error["message"], str) and error["message"] and isinstance(error["code"], str)
    if code is not None:
        assert error["code"] == code


def test_bad_ids_are_4xx_never_500(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, _ = stack
    with daemon.client(str(daemon.extra["member_token"])) as member:
        for bad in BAD_IDS:
            _error(member.get(f"/brain/conversations/{bad}"), 404, "not_found")
            _error(member.patch(f"/brain/conversations/{bad}", json={"title": "x"}), 404, "not_found")
            _error(member.post(f"/brain/conversations/{bad}/open"), 404, "not_found")
            _error(member.post(f"/brain/conversations/{bad}/turn", json={"text": "hi"}), 404, "not_found")
            _error(member.post(f"/brain/conversations/{bad}/abort"), 404, "not_found")
            _error(member.post(f"/brain/approvals/{bad}", json={"decision": "allow"}), 404, "not_found")
        for bad in (-1, 0, 99999999999999999999999):
            _error(member.post("/brain/conversations", json={"project_id": bad}), 422, "validation_error")
        _error(member.get("/brain/conversations", params={"limit": "²"}), 422)
        for bad in ("garbage!", "YzoxMg", "djE6LTE"):  # the old "c:12" format, "v1:-1": the SDK's cursor only
            _error(member.get("/brain/conversations", params={"cursor": bad}), 400, "bad_cursor")
        assert member.get("/brain/conversations", params={"cursor": "djE6MQ"}).json()["items"] == []  # v1:1 (newest first: nothing below id 1)
    assert "OverflowError" not in daemon.log_path.read_text()


def test_model_is_validated_when_set(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, _ = stack
    with daemon.client(str(daemon.extra["member_token"])) as member:
        resp = member.post("/brain/conversations", json={"model": "nomodel"})
        _error(resp, 422, "unknown_provider")
        assert "'nomodel'" in resp.json()["error"]["message"] and "fake, local" in resp.json()["error"]["message"]
        _error(member.post("/brain/conversations", json={"model": "fake"}), 422, "unknown_provider")  # no model named
        conv = member.post("/brain/conversations", json={"model": SPEC}).json()
        _error(member.patch(f"/brain/conversations/{conv['id']}", json={"model": "nomodel/x"}), 422, "unknown_provider")
        assert member.get(f"/brain/conversations/{conv['id']}").json()["conversation"]["model"] == SPEC
        assert member.patch(f"/brain/conversations/{conv['id']}", json={"model": "local/smollm2"}).json()["model"] == "local/smollm2"
        assert member.patch(f"/brain/conversations/{conv['id']}", json={"model": ""}).json()["model"] == ""
        # the /model slash command validates too, and /model default goes back to the default
        turn = member.post(f"/brain/conversations/{conv['id']}/turn", params={"stream": "false"}, json={"text": "/model nomodel"})
        assert turn.status_code == 200, turn.text
        assert member.get(f"/brain/conversations/{conv['id']}").json()["conversation"]["model"] == ""
        member.post(f"/brain/conversations/{conv['id']}/turn", params={"stream": "false"}, json={"text": f"/model {SPEC}"})
        assert member.get(f"/brain/conversations/{conv['id']}").json()["conversation"]["model"] == SPEC
        member.post(f"/brain/conversations/{conv['id']}/turn", params={"stream": "false"}, json={"text": "/model default"})
        assert member.get(f"/brain/conversations/{conv['id']}").json()["conversation"]["model"] == ""


def test_cli_bad_model_fails_and_changes_nothing(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, _ = stack
    with daemon.admin() as admin:
        admin.post("/brain/turn", params={"stream": "false"}, json={"text": "make sure there is an active one"})
        active = admin.get("/brain/active").json()["conversation"]
    bad = _chat(daemon, "-m", "hi", "--model", "nomodel")
    assert bad.returncode == 1, (bad.stdout, bad.stderr)
    assert "unknown provider 'nomodel'" in bad.stderr and "fake, local" in bad.stderr
    with daemon.admin() as admin:
        assert admin.get("/brain/active").json()["conversation"]["model"] == active["model"]
    assert _chat(daemon, "--new", "-m", "hi", "--model", "nomodel").returncode == 1
    ok = _chat(daemon, "-m", "still works")
    assert ok.returncode == 0 and ok.stdout.strip() == "reply to: still works", ok.stderr
    # --model on an existing conversation changes it (validated), 'default' clears it
    assert _chat(daemon, "-m", "switch", "--model", SPEC).returncode == 0
    with daemon.admin() as admin:
        assert admin.get("/brain/active").json()["conversation"]["model"] == SPEC
    assert _chat(daemon, "-m", "back", "--model", "default").returncode == 0
    with daemon.admin() as admin:
        assert admin.get("/brain/active").json()["conversation"]["model"] == ""


def test_cli_exits_1_when_the_turn_fails(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, _ = stack
    out = _chat(daemon, "--new", "-m", "explode now")
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert out.stderr.count("error:") == 1 and "scripted model failure" in out.stderr, out.stderr


def test_cli_new_binds_and_activate_moves_the_pointer(stack: tuple[DaemonProc, ModelServer, Path]) -> None:
    daemon, _, _ = stack
    with daemon.admin() as admin:
        admin.post("/brain/turn", params={"stream": "false"}, json={"text": "pointer"})
        pointer = admin.get("/brain/active").json()["conversation"]["id"]
        bound = _chat(daemon, "--new", "-m", "bound only")
        assert bound.returncode == 0 and "conversation " in bound.stderr
        new_id = int(bound.stderr.split("conversation ")[1].split()[0])
        assert new_id != pointer and admin.get("/brain/active").json()["conversation"]["id"] == pointer
        again = _chat(daemon, "--open", str(new_id), "-m", "continue it")
        assert again.returncode == 0 and admin.get("/brain/active").json()["conversation"]["id"] == pointer
        moved = _chat(daemon, "--new", "--activate", "-m", "take the pointer")
        moved_id = int(moved.stderr.split("conversation ")[1].split()[0])
        assert admin.get("/brain/active").json()["conversation"]["id"] == moved_id
        plain = _chat(daemon, "-m", "follows the pointer")
        assert int(plain.stderr.split("conversation ")[1].split()[0]) == moved_id

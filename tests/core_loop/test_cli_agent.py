"""The core loop with a real CLI agent: Claude Code (the version ``scripts/install-test-deps``
pins) in tmux against the scripted model server, driven by the real daemon process. A work
request typed into chat is planned (the planner is the same model server, through the inference
relay), approved, and each task is dispatched to Claude by the executor; Claude's permission
prompt is approved by a human over the API, the command it runs closes the task with its agent
token (``elowen close … --evidence …``), and the receipt holds that evidence."""

from __future__ import annotations

import functools
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.support.agent_env import MissingCliError, prepare_agent
from tests.support.daemon import launch_daemon
from tests.support.model_server import DefaultScript, ModelServer, ParsedRequest, Reply
from tests.support.waiting import free_port, wait

from .conftest import item, plan_json

pytestmark = pytest.mark.slow

STEP = 120.0  # seconds per waited-for step: the machine is shared


def close_command(marker: str) -> str:
    # the provider puts the description (with the acceptance criteria after it) on one line: the
    # trailing "#" makes the rest of the line a shell comment
    return f'RUN: echo {marker} > {marker}.txt && elowen close $ELOWEN_TASK --summary "wrote {marker}.txt" --evidence "{marker}.txt contains {marker}" #'


class Model:
    """The planner's requests (a JSON schema with ``tasks``) get ``plan``; Claude's requests the
    default script (it runs the ``RUN:`` command of its task prompt)."""

    def __init__(self, plan: str) -> None:
        self.plan = plan
        self.default = DefaultScript()

    def __call__(self, request: ParsedRequest) -> Reply:
        schema = request.json_schema or {}
        if "tasks" in (schema.get("properties") or {}) or "tasks" in str(schema)[:2000] and not request.has_tools:
            return Reply(text=self.plan)
        return self.default(request)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    first, second = f"one-{uuid.uuid4().hex[:6]}", f"two-{uuid.uuid4().hex[:6]}"
    plan = plan_json(
        {**item("Write the first proof", acceptance=(f"{first}.txt exists",)), "description": f"Write the first proof file. {close_command(first)}"},
        {
            **item("Write the second proof", deps=(1,), acceptance=(f"{second}.txt exists",)),
            "description": f"Write the second proof file. {close_command(second)}",
        },
    )
    with ModelServer(Model(plan)) as model:
        fake_home, repo, home = tmp_path / "agent-home", tmp_path / "repo", tmp_path / "elowen"
        for p in (fake_home, repo, home):
            p.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        try:
            launch = prepare_agent("claude", fake_home, repo, model.url, trust=True)
        except MissingCliError as exc:
            pytest.skip(f"Claude Code is not installed in the test cache (scripts/install-test-deps): {exc}")
        port = free_port()
        sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
        loop = {
            "intake_enabled": True,
            "executor_enabled": True,
            "executor_interval": 0.5,
            "planner_model": "fake/fake-model",
            "task_exec": "claude:fake-model",
        }
        settings = {
            "plugins": {
                "tmux": {"config": {"socket": sock}},
                "agents": {"config": {"url": f"http://127.0.0.1:{port}", "preseed_trust": True, "scheduler_interval": 1.0, "janitor_interval": 0.5}},
                "claude-code": {"config": {"binary": launch.argv[0], "env": launch.env}},
                "core-loop": {"enabled": True, "config": loop},
            },
            "inference": {"providers": {"fake": {"kind": "openai", "base_url": model.url + "/v1", "max_retries": 0}}},
        }
        (home / "config.toml").write_text(tomli_w.dumps(settings))
        proc, url = launch_daemon(home, port, tmp_path / "daemon-stderr.txt", timeout=90)
        token = (home / "admin.token").read_text().strip()
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)
        try:
            yield {"client": client, "repo": repo, "markers": (first, second), "home": home, "sock": sock}
        finally:
            client.close()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
            subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def test_plan_executed_by_claude_code(stack: dict[str, Any]) -> None:
    c: httpx.Client = stack["client"]
    repo: Path = stack["repo"]
    first, second = stack["markers"]

    def log() -> str:
        path = stack["home"] / "logs" / "daemon.log"
        tail = path.read_text(errors="replace")[-3000:] if path.exists() else ""
        sock = stack["sock"]
        names = subprocess.run(["tmux", "-L", sock, "list-sessions", "-F", "#{session_name}"], capture_output=True, text=True).stdout.split()
        screens = [subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", f"={n}:"], capture_output=True, text=True).stdout for n in names]
        return f"{c.get('/core-loop/projects/1').text}\n{c.get('/sessions').text[:3000]}\n" + "\n---\n".join(screens) + "\n--- log\n" + tail

    pid = c.post("/projects", json={"name": "repo", "path": str(repo)}).json()["id"]
    cid = c.post("/brain/conversations", json={"project_id": pid, "model": "fake/fake-model"}).json()["id"]
    reply = c.post(f"/brain/conversations/{cid}/turn", params={"stream": "false"}, json={"text": "Build me a small CLI that converts CSV to JSON, with tests."})
    assert reply.status_code == 200 and "core-loop project #1" in reply.text
    tree = wait(lambda: (t := c.get("/core-loop/projects/1").json())["tasks"] and t, "the plan", timeout=STEP, on_fail=log)
    ids = [t["id"] for t in tree["tasks"]]
    assert [t["exec"] for t in tree["tasks"]] == ["claude:fake-model"] * 2

    def pending(task_id: int) -> Any:
        items = c.get("/decisions", params={"task": task_id, "status": "pending"}).json()["items"]
        return items[0] if items else None

    for task_id in ids:  # Claude asks before running the command; a human approves
        decision = wait(
            functools.partial(pending, task_id),
            f"Claude's prompt on task {task_id}",
            timeout=STEP,
            on_fail=log,
        )
        assert decision["kind"] == "prompt"
        assert c.post(f"/decisions/{decision['id']}", json={"action": "approve"}).status_code < 300
        closed = functools.partial(lambda tid: c.get(f"/tasks/{tid}").json()["state"] == "closed", task_id)
        wait(closed, f"task {task_id} closed by Claude", timeout=STEP, on_fail=log)
    wait(lambda: c.get("/core-loop/projects/1").json()["project"]["state"] == "done", "the run complete", timeout=STEP, on_fail=log)
    receipt = c.get("/core-loop/projects/1/receipt").json()["receipt"]
    assert receipt["stop_reason"] == "complete"
    assert [line["evidence"] for line in receipt["tasks"]] == [[f"{first}.txt contains {first}"], [f"{second}.txt contains {second}"]]
    assert (repo / f"{first}.txt").read_text().strip() == first and (repo / f"{second}.txt").read_text().strip() == second

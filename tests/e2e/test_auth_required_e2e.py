"""End to end: the REAL Claude Code 2.1.197, not logged in, blocks its task with a note.

The daemon (a real subprocess) runs a task on the real CLI (installed by
``scripts/install-test-deps``) with a fresh HOME holding only the pre-seeded onboarding/trust
flags, and no credentials at all: no ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN`` or
``ANTHROPIC_BASE_URL``, no login. Claude Code answers the prompt with "Not logged in · Please
run /login" and shows "Not logged in · Run /login" in its footer; nothing reaches the network
(it refuses before any request). Elowen must publish an ``error`` signal (state
``auth_required``), never ``complete``, create no decision, end the session and block the task
with the log-in note.
"""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from elowen_builtins.claude_code.plugin import ClaudeProvider
from tests.support.agent_env import MissingCliError, cli_binary, prepare_agent
from tests.support.daemon import launch_daemon
from tests.support.waiting import free_port
from tests.support.waiting import wait as _wait

pytestmark = pytest.mark.slow

STEP = 90.0  # seconds per waited-for step (Claude Code starts in 2–8 s on a 2-core machine)
CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR")


def wait(predicate: Callable[[], Any], what: str, on_fail: Callable[[], str] | None = None) -> Any:
    return _wait(predicate, what, STEP, on_fail, interval=0.25)


def test_real_claude_not_logged_in_blocks_the_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        cli_binary("claude")
    except MissingCliError as exc:
        pytest.skip(f"Claude Code is not installed here ({exc}); this test needs the real CLI")
    for name in CREDENTIALS:  # the daemon (and so the tmux server) must not pass any on
        monkeypatch.delenv(name, raising=False)
    fake_home, repo, home = tmp_path / "agent-home", tmp_path / "repo", tmp_path / "elowen"
    for p in (fake_home, repo, home):
        p.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    launch = prepare_agent("claude", fake_home, repo, "http://127.0.0.1:9", trust=True)
    env = {k: v for k, v in launch.env.items() if k not in CREDENTIALS}
    assert not (fake_home / ".claude" / ".credentials.json").exists()
    port = free_port()
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    settings = {
        "plugins": {
            "tmux": {"config": {"socket": sock}},
            "agents": {
                "config": {
                    "url": f"http://127.0.0.1:{port}",
                    "preseed_trust": True,
                    "scheduler_interval": 1.0,
                    "sweep_interval": 1.0,
                    "liveness_interval": 0.5,
                    "stuck_interval": 0.5,
                    "janitor_interval": 0.5,
                }
            },
            "claude-code": {"config": {"binary": launch.argv[0], "env": env}},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp_path / "daemon-stderr.txt")
    token = (home / "admin.token").read_text().strip()
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=15.0)

    def get(path: str, **params: Any) -> Any:
        r = api.get(path, params=params)
        r.raise_for_status()
        return r.json()

    def post(path: str, body: Any) -> Any:
        r = api.post(path, json=body)
        assert r.status_code < 300, r.text
        return r.json()

    def screen() -> str:
        cap = subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", f"=elowen-t{task_id}-a1:"], capture_output=True, text=True).stdout
        log = home / "logs" / "daemon.log"
        return cap + "\n--- daemon log tail\n" + (log.read_text(errors="replace")[-4000:] if log.exists() else "")

    def events(type_: str) -> list[dict[str, Any]]:
        import apsw

        conn = apsw.Connection(str(home / "elowen.db"), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return [json.loads(r[0]) for r in conn.execute("SELECT data FROM events WHERE type = ? ORDER BY id", (type_,))]
        finally:
            conn.close()

    task_id = 0
    try:
        wait(lambda: get("/plugins/agents")["state"] == "enabled", "agents plugin enabled")
        project = post("/projects", {"name": f"p-{uuid.uuid4().hex[:6]}", "path": str(repo)})
        task_id = int(post("/tasks", {"title": "e2e auth", "project_id": project["id"], "exec": "claude", "description": "Say hello."})["id"])
        task = wait(lambda: (lambda t: t if t["state"] == "blocked" else None)(get(f"/tasks/{task_id}")), "the task blocked", on_fail=screen)
        assert task["resume_note"] == ClaudeProvider().auth_note()
        assert task["attempts"] == 1
        assert get("/decisions", task=task_id)["items"] == []
        signals = [e for e in events("signal") if e["task_id"] == task_id]
        assert any(e["signal"] == "error" and e["state"] == "auth_required" for e in signals), signals
        assert not any(e["signal"] in ("complete", "needs_input") for e in signals), signals
        sessions = get("/sessions", task=task_id)["items"]
        assert [s["state"] for s in sessions] == ["exited"], sessions
        assert subprocess.run(["tmux", "-L", sock, "has-session", "-t", f"=elowen-t{task_id}-a1"], capture_output=True).returncode != 0
    finally:
        api.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)

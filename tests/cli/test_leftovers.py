"""A stopped daemon leaves no tmux server behind unless agents still run in it: then the
server is kept (and the output says so), the agents are re-adopted at the next start, and
``elowen down --agents`` ends them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import tomli_w

from tests.cli.conftest import Home, wait_for
from tests.support.fake_cli import fake_claude


def _server_alive(socket: str) -> bool:
    return subprocess.run(["tmux", "-L", socket, "list-sessions"], capture_output=True).returncode == 0


def _sessions(home: Home) -> list[dict]:
    r = httpx.get(home.url + "/sessions", headers={"Authorization": f"Bearer {home.token()}"}, timeout=5)
    r.raise_for_status()
    body = r.json()
    return body["items"] if isinstance(body, dict) else body


def test_stop_without_agents_ends_the_tmux_server(home: Home) -> None:
    home.ok("daemon", "start")
    wait_for(lambda: _server_alive(home.tmux_socket))
    out = home.ok("daemon", "stop")
    assert "agents:" not in out
    assert not _server_alive(home.tmux_socket)


def test_stop_with_an_agent_keeps_it_then_readopts_then_down_agents_ends_it(home: Home, tmp_path: Path) -> None:
    log = tmp_path / "fake.log"
    config = {
        "plugins": {
            "tmux": {"config": {"socket": home.tmux_socket}},
            "claude-code": {
                "config": {"binary": str(fake_claude(tmp_path)), "env": {"FAKE_LOG": str(log)}, "sandbox": "none"}
            },  # the fake agent logs outside the project
        }
    }
    (home.path / "config.toml").write_text(tomli_w.dumps(config))
    home.ok("daemon", "start")
    folder = tmp_path / "project"
    folder.mkdir()
    project = home.json("project", "add", "demo", str(folder))
    task = home.json("task", "create", "wait at a prompt", "--project", str(project["id"]), "--exec", "claude")
    wait_for(lambda: log.exists() and '"prompt"' in log.read_text(), timeout=60)
    [session] = [s for s in _sessions(home) if s["task_id"] == task["id"]]

    out = home.ok("daemon", "stop")
    assert f"agents: 1 still running in tmux server -L {home.tmux_socket}" in out
    assert session["session"] in out and "elowen down --agents" in out
    assert _server_alive(home.tmux_socket)

    home.ok("daemon", "start")
    # re-adopted: the same session and program (no second spawn), supervised again
    wait_for(
        lambda: (
            "agent.adopted" in (home.path / "logs" / "daemon.log").read_text() or any(s.get("signal") for s in _sessions(home) if s["task_id"] == task["id"])
        ),
        timeout=30,
    )
    after = [s for s in _sessions(home) if s["task_id"] == task["id"]]
    assert [(s["session"], s["state"], s.get("pid")) for s in after] == [(session["session"], "running", session.get("pid"))]

    out = home.ok("down", "--agents")
    assert f"agents: ended 1 ({session['session']})" in out
    assert not _server_alive(home.tmux_socket)

"""The CLI's new-user fixes against real processes: id arguments are usage errors, revoking
and removing users and projects, the admin-token recovery, telling this home's daemon from
another home's or from a non-Elowen server, plugin hints, and the foreground supervisor
saying why it stops."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elowen.cli.client import ApiError, Client, describe_error, missing_route_hint, route_plugin

from .conftest import ELOWEN, Home, free_port, make_home, wait_for

# ---------------------------------------------------------------- ids are usage errors


@pytest.mark.parametrize(
    "args",
    [
        ("task", "show", "abc"),
        ("task", "show", "--", "-1"),
        ("task", "show", "0"),
        ("task", "close", "1.5", "-s", "x"),
        ("task", "cancel", "../1"),
        ("task", "create", "t", "--project", "1", "--dep", "x"),
        ("project", "remove", "abc"),
        ("user", "grant", "bob", "--project", "abc"),
        ("events", "--project", "x"),
    ],
)
def test_bad_ids_are_usage_errors(home: Home, args: tuple[str, ...]) -> None:
    # (`--project` of `task create|list` takes a name or an id, so only the daemon can refuse it:
    # an unknown project exits 2 listing the visible ones, tests/cli/test_newcomer.py)
    proc = home.run(*args, env={"ELOWEN_NO_AUTOSTART": "1"})
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert "is not an id" in proc.stderr and "no route" not in proc.stderr
    assert home.pid_info() is None  # nothing was started


def test_a_bad_elowen_task_env_is_a_usage_error(home: Home) -> None:
    proc = home.run("close", "-s", "done", env={"ELOWEN_TASK": "abc", "ELOWEN_NO_AUTOSTART": "1"})
    assert proc.returncode == 2 and "ELOWEN_TASK='abc' is not a task id" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- revoking and removing


def test_user_token_revoke_remove(daemon: Home, tmp_path: Path) -> None:
    daemon.ok("user", "add", "carol")
    token = daemon.ok("user", "token", "carol").split("token: ", 1)[1].strip()
    as_carol = {"ELOWEN_TOKEN": token}
    assert daemon.json("task", "list", env=as_carol) == []
    assert "carol: revoked 2 token(s)" in daemon.ok("user", "revoke", "carol")
    proc = daemon.run("task", "list", env=as_carol)
    assert proc.returncode == 1 and "hint: the token comes from ELOWEN_TOKEN" in proc.stderr
    proc = daemon.run("user", "revoke", "admin")
    assert proc.returncode == 1 and "refusing to revoke your own tokens" in proc.stderr
    assert "removed user carol" in daemon.ok("user", "remove", "carol")
    assert "carol" not in daemon.ok("user", "list")
    proc = daemon.run("user", "remove", "admin")
    assert proc.returncode == 1 and "refusing to delete yourself" in proc.stderr


def test_project_remove(daemon: Home, tmp_path: Path) -> None:
    folder = tmp_path / "removable"
    folder.mkdir()
    pid = daemon.json("project", "add", "removable", str(folder))["id"]
    daemon.ok("task", "create", "pending", "--project", str(pid))
    proc = daemon.run("project", "remove", str(pid))
    assert proc.returncode == 1 and "open, in-progress or blocked" in proc.stderr, proc.stderr
    assert f"removed project {pid} (1 task(s) deleted)" in daemon.ok("project", "remove", str(pid), "--force")
    assert folder.is_dir()
    assert pid not in {p["id"] for p in daemon.json("project", "list")}


def test_project_add_refuses_dangerous_paths_and_names(daemon: Home, tmp_path: Path) -> None:
    proc = daemon.run("project", "add", "../evil", str(tmp_path))
    assert proc.returncode == 1 and "project name" in proc.stderr, proc.stderr
    proc = daemon.run("project", "add", "root", "/")
    assert proc.returncode == 1 and "filesystem root" in proc.stderr, proc.stderr
    proc = daemon.run("project", "add", "home", str(daemon.path))
    assert proc.returncode == 1 and "Elowen's home" in proc.stderr, proc.stderr


def test_reset_admin_token(daemon: Home) -> None:
    old = daemon.token()
    (daemon.path / "admin.token").unlink()
    proc = daemon.run("user", "list")
    assert proc.returncode == 1
    out = daemon.ok("daemon", "reset-admin-token")
    assert "wrote a new token for admin 'admin'" in out and "revoked 1 older token(s)" in out
    assert daemon.token() != old and (daemon.path / "admin.token").stat().st_mode & 0o777 == 0o600
    assert "admin" in daemon.ok("user", "list")
    assert daemon.run("user", "list", env={"ELOWEN_TOKEN": old}).returncode == 1
    proc = daemon.run("daemon", "reset-admin-token", "--user", "nobody")
    assert proc.returncode == 1 and "no user named 'nobody'" in proc.stderr


def test_reset_admin_token_without_a_database(home: Home) -> None:
    proc = home.run("daemon", "reset-admin-token")
    assert proc.returncode == 1 and "no Elowen database" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- plugin hints and error summaries


def test_plugin_route_hint_from_a_real_404(daemon: Home) -> None:
    client = Client(daemon.url, daemon.token)
    with pytest.raises(ApiError) as info:
        client.get("/sessions")  # the agents plugin is disabled in these homes
    text = describe_error(info.value)
    assert text.startswith("no route GET /sessions")
    assert "served by the agents plugin" in text and "`elowen plugin enable agents`" in text
    with pytest.raises(ApiError) as info:
        client.get("/tasks/999999")
    assert missing_route_hint(info.value) is None


def test_route_plugin_mapping() -> None:
    assert route_plugin("/sessions/3/keys") == "agents" and route_plugin("/decisions") == "agents"
    assert route_plugin("/brain/conversations") == "brain"
    for path in ("/missions/1", "/escalations", "/asks/2"):
        assert route_plugin(path) == "overseer"
    assert route_plugin("/overseer/poll") == route_plugin("/overseer/agents") == "overseer-parked"
    assert route_plugin("/providers") == route_plugin("/providers/lab") == "inference"
    assert route_plugin("/plugins/weather/forecast") == "weather"
    assert route_plugin("/plugins/weather") is None and route_plugin("/tasks") is None
    assert route_plugin("/sessionsx") is None


def test_elowen_url_hint_only_when_it_is_set(home: Home) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    proc = home.run("task", "list", env={"ELOWEN_URL": url})
    assert proc.returncode == 3 and "check ELOWEN_URL" in proc.stderr, proc.stderr
    proc = home.run("task", "list", env={"ELOWEN_NO_AUTOSTART": "1"})
    assert proc.returncode == 3 and "ELOWEN_URL" not in proc.stderr and "elowen daemon start" in proc.stderr, proc.stderr


class _NotElowen(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = b"<!doctype html><html><body><h1>Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def foreign_server() -> Iterator[int]:
    """A real HTTP server that is not Elowen, on a free loopback port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotElowen)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_non_elowen_server_on_the_port(home: Home, foreign_server: int) -> None:
    env = {"ELOWEN_PORT": str(foreign_server)}
    for args in (("daemon", "start"), ("daemon", "status"), ("up",)):
        proc = home.run(*args, env=env)
        assert proc.returncode == 3, (args, proc.returncode, proc.stdout, proc.stderr)
        text = proc.stdout + proc.stderr
        assert f"port {foreign_server} is used by something that is not Elowen" in text, text
        assert "<" not in text and "running (pid" not in text
    assert home.pid_info() is None
    proc = home.run("task", "list", env=env)
    assert proc.returncode == 3, proc.stderr
    assert f"HTTP 404 from a non-Elowen server at http://127.0.0.1:{foreign_server}" in proc.stderr
    assert "doctype" not in proc.stderr.lower()


def test_another_homes_daemon_on_the_port(daemon: Home, tmp_path: Path) -> None:
    other = make_home(tmp_path)
    env = {**other.env, "ELOWEN_PORT": str(daemon.port)}
    for args in (("daemon", "start"), ("daemon", "status")):
        proc = subprocess.run([str(ELOWEN), *args], env=env, capture_output=True, text=True, timeout=60)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 3, (args, text)
        assert f"port {daemon.port} is used by another Elowen instance (home " in text and "running (pid" not in text
    assert other.pid_info() is None
    assert "running" in daemon.ok("daemon", "status")  # its own home still sees it as running


def test_a_port_taken_without_http_exits_3(home: Home) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", home.port))
        blocker.listen(1)
        proc = home.run("daemon", "start")
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert "already in use" in proc.stderr


# ---------------------------------------------------------------- the foreground supervisor


@pytest.mark.slow
def test_up_foreground_says_why_it_stops(home: Home) -> None:
    proc = home.popen("up", "--foreground")
    try:
        info = wait_for(home.pid_info, timeout=30)  # written once the daemon serves
        os.kill(info["pid"], signal.SIGKILL)
        proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 128 + signal.SIGKILL, (proc.returncode, stderr[-2000:])
    assert "the daemon exited (signal 9); stopping the web front end" in stderr

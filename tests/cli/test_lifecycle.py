"""Daemon lifecycle through the CLI: autostart on the first command, ``daemon status``,
``daemon stop``, ``daemon logs``, ``up``/``down``, and the exit status when nothing answers."""

from __future__ import annotations

import signal
import time

import pytest

from .conftest import Home, free_port, wait_for

pytestmark = pytest.mark.slow


def test_first_command_autostarts_the_daemon_then_stop_and_status(home: Home) -> None:
    assert home.run("daemon", "status").returncode == 3

    proc = home.run("task", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert "starting the daemon" in proc.stderr and "ready" in proc.stderr
    assert "Traceback" not in proc.stderr
    info = home.pid_info()
    assert info is not None and info["port"] == home.port
    assert (home.path / "admin.token").exists()
    assert home.token() not in proc.stdout + proc.stderr  # tokens are never printed

    status = home.json("daemon", "status")
    assert status["running"] is True and status["pid"] == info["pid"] and status["url"] == home.url
    assert f"pid {info['pid']}" in home.ok("daemon", "status")

    # a second command does not start another daemon
    again = home.run("task", "list")
    assert again.returncode == 0 and "starting" not in again.stderr and home.pid_info() == info

    out = home.ok("daemon", "stop")
    assert f"stopped (pid {info['pid']})" in out
    st = home.run("daemon", "status")
    assert st.returncode == 3 and "not running" in st.stdout
    assert "not running" in home.ok("daemon", "stop")  # idempotent

    logs = home.ok("daemon", "logs", "-n", "200")
    assert logs.strip(), "the detached daemon's output is in its log file"


def test_daemon_start_and_up_down(home: Home) -> None:
    out = home.ok("daemon", "start")
    assert "daemon: running (pid" in out
    assert "already" not in out
    pid = home.pid_info()["pid"]
    assert f"(pid {pid})" in home.ok("up")  # already running: nothing new started
    assert home.pid_info()["pid"] == pid
    assert f"daemon: stopped (pid {pid})" in home.ok("down")
    assert home.run("daemon", "status").returncode == 3


def test_unreachable_daemon_exits_3_with_a_hint(home: Home) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    proc = home.run("task", "list", env={"ELOWEN_URL": url})
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: cannot reach the Elowen daemon at " + url)
    assert "hint:" in proc.stderr and "Traceback" not in proc.stderr
    assert home.pid_info() is None, "an explicit ELOWEN_URL never autostarts"

    proc = home.run("project", "list", env={"ELOWEN_NO_AUTOSTART": "1"})
    assert proc.returncode == 3 and "elowen daemon start" in proc.stderr


def test_bad_configuration_is_a_usage_error(home: Home) -> None:
    proc = home.run("task", "list", env={"ELOWEN_PORT": "notaport"})
    assert proc.returncode == 2 and proc.stderr.startswith("error: ELOWEN_PORT")


def test_logs_without_a_log_file(home: Home) -> None:
    proc = home.run("daemon", "logs")
    assert proc.returncode == 1 and proc.stderr.startswith("error: no log file")


def test_foreground_daemon_stops_cleanly_on_ctrl_c(home: Home) -> None:
    proc = home.popen("daemon", "start", "--foreground")
    try:
        wait_for(lambda: home.run("daemon", "status").returncode == 0, timeout=30)
        pid = home.pid_info()["pid"]
        assert pid != proc.pid  # the daemon is a child of the CLI, in its own process group
        proc.send_signal(signal.SIGINT)  # what the terminal's Ctrl-C does to the CLI
        assert proc.wait(timeout=30) == 0
        _, stderr = proc.communicate()
        assert "SIGTERM received: shutting down gracefully" in stderr  # one signal, graceful
        assert "stopping now" not in stderr
        assert home.run("daemon", "status").returncode == 3
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_logs_follow_prints_new_lines(home: Home) -> None:
    home.ok("daemon", "start")
    follower = home.popen("daemon", "logs", "-f", "-n", "0")
    try:
        time.sleep(0.5)
        home.ok("daemon", "stop")
        lines: list[str] = []

        def stopped() -> bool:
            line = follower.stdout.readline()
            lines.append(line)
            return "Elowen daemon stopped" in line

        wait_for(stopped, timeout=20)
        assert any("SIGTERM received" in line for line in lines)
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=10) == 0
    finally:
        if follower.poll() is None:
            follower.kill()
        follower.communicate()


def test_autostart_failure_exits_3_with_the_daemons_output(home: Home) -> None:
    (home.path / "config.toml").write_text("this is not TOML [[[\n")
    proc = home.run("task", "list")
    assert proc.returncode == 3, proc.stderr
    assert "starting the daemon" in proc.stderr
    assert "error: the daemon exited with status 2 while starting; its output" in proc.stderr
    assert "config.toml" in proc.stderr  # the daemon's own message, from its output file
    assert "Traceback" not in proc.stderr

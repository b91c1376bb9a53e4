"""``elowen events``: follows the SSE stream, prints events caused by other processes, replays
from ``--last-event-id``, resumes across a daemon restart, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import json
import queue
import signal
import threading
import time
from typing import Any

import pytest

from .conftest import Home

pytestmark = pytest.mark.slow


class Follower:
    """An ``elowen events`` subprocess whose stdout lines are read by a thread."""

    def __init__(self, home: Home, *args: str) -> None:
        self.proc = home.popen("events", *args)
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, predicate: Any, timeout: float = 20.0) -> list[str]:
        """Lines read until one satisfies ``predicate`` (that one included)."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                assert self.proc.poll() is None, f"events exited: {self.proc.returncode} {self.proc.stderr.read() if self.proc.stderr else ''}"
                continue
            seen.append(line)
            if predicate(line):
                return seen
        raise AssertionError(f"no matching event within {timeout} s; saw {seen}")

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        return code, stderr

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _task_event(title: str) -> Any:
    def match(line: str) -> bool:
        event = json.loads(line)
        return event["type"].startswith("task.") and title in json.dumps(event["data"])

    return match


def test_events_print_a_task_created_by_another_process_and_stop_on_ctrl_c(daemon: Home, project: dict[str, Any]) -> None:
    follower = Follower(daemon, "--json", "--types", "task.*")
    try:
        time.sleep(1.0)  # let it subscribe; anything earlier is not expected
        created = daemon.json("task", "create", "seen by the follower", "--project", str(project["id"]))
        lines = follower.until(_task_event("seen by the follower"))
        event = json.loads(lines[-1])
        assert isinstance(event["id"], int) and event["type"] == "task.created"
        assert all(json.loads(line)["type"].startswith("task.") for line in lines)

        code, stderr = follower.interrupt()
        assert code == 0 and "Traceback" not in stderr
    finally:
        follower.close()

    # replay: everything after an earlier id is printed again, in order, as human lines
    replay = Follower(daemon, "--last-event-id", str(event["id"] - 1), "--types", "task.*")
    try:
        line = replay.until(lambda s: s.split()[0] == str(event["id"]))[-1]
        assert line.split()[1] == "task.created" and str(created["id"]) in line
    finally:
        replay.close()


def test_events_resume_after_the_daemon_restarts(home: Home, tmp_path: Any) -> None:
    home.ok("daemon", "start")
    folder = tmp_path / "proj"
    folder.mkdir()
    project = home.json("project", "add", "p", str(folder))
    # replay from the start, so events published before it subscribed are not missed
    follower = Follower(home, "--json", "--types", "task.*", "--last-event-id", "0")
    try:
        home.ok("task", "create", "before restart", "--project", str(project["id"]))
        follower.until(_task_event("before restart"))
        home.ok("daemon", "stop")
        home.ok("daemon", "start")
        # created right after the restart, quite possibly before the follower reconnects:
        # Last-Event-ID replay must deliver it anyway
        home.ok("task", "create", "after restart", "--project", str(project["id"]))
        follower.until(_task_event("after restart"), timeout=30)
        code, stderr = follower.interrupt()
        assert code == 0
        assert "reconnecting" in stderr and "Traceback" not in stderr
    finally:
        follower.close()


def test_events_refused_stream_is_an_error(daemon: Home) -> None:
    proc = daemon.run("events", env={"ELOWEN_TOKEN": "elw_wrong"}, timeout=20)
    assert proc.returncode == 1 and proc.stderr.startswith("error: ")

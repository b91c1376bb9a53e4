"""Open SSE streams do not outlive a revocation: real streams on a real daemon.

After the user's tokens are revoked, the user is deleted, or (for ``?project=N``) loses
project N, the stream ends within 1 s; after a demotion or losing a project, a plain
``/events`` stream passes nothing of what the user may no longer see.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .conftest import DaemonProc, start_daemon
from .helpers import make_project, make_user

END_WITHIN = 1.0


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    daemon = start_daemon(tmp_path_factory.mktemp("revoke") / "home", "--no-plugins")
    try:
        yield daemon
    finally:
        daemon.stop()


@dataclass
class Stream:
    """An SSE stream read by a thread: ``events`` (type, data) and ``ended`` (the time it
    ended, or None)."""

    events: queue.Queue[tuple[str, dict[str, object]]]
    ended: list[float]
    thread: threading.Thread
    client: httpx.Client

    def wait_end(self, timeout: float) -> float | None:
        self.thread.join(timeout)
        return self.ended[0] if self.ended else None

    def drain(self) -> list[tuple[str, dict[str, object]]]:
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        self.client.close()


def open_stream(d: DaemonProc, token: str, params: dict[str, str] | None = None) -> Stream:
    import json

    events: queue.Queue[tuple[str, dict[str, object]]] = queue.Queue()
    ended: list[float] = []
    ready = threading.Event()
    client = httpx.Client(base_url=d.url, headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(10, read=30))

    def run() -> None:
        try:
            with client.stream("GET", "/events", params=params) as r:
                assert r.status_code == 200, r.status_code
                kind = None
                for line in r.iter_lines():
                    if line.startswith(": connected"):
                        ready.set()
                    elif line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: ") and kind is not None:
                        events.put((kind, json.loads(line[6:])))
        except (httpx.HTTPError, RuntimeError):
            pass
        finally:
            ended.append(time.monotonic())
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    assert not ended, "the stream did not open"
    return Stream(events, ended, thread, client)


@dataclass
class People:
    admin: httpx.Client
    project: int
    other_project: int


@pytest.fixture(scope="module")
def people(d: DaemonProc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[People]:
    tmp = tmp_path_factory.mktemp("revoke-projects")
    admin = d.admin()
    yield People(admin, make_project(admin, tmp / "a", "A"), make_project(admin, tmp / "b", "B"))
    admin.close()


def member(people: People, name: str, *, role: str = "member", projects: tuple[int, ...] = ()) -> tuple[int, str]:
    uid, token = make_user(people.admin, name, role)
    for p in projects:
        assert people.admin.post(f"/users/{uid}/projects", json={"project_id": p}).status_code == 200
    return uid, token


def task_in(people: People, project: int, title: str) -> int:
    r = people.admin.post("/tasks", json={"title": title, "project_id": project})
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def seen_titles(stream: Stream, wait: float = 0.8) -> set[str]:
    time.sleep(wait)
    return {str(data.get("task", {}).get("title")) for kind, data in stream.drain() if kind == "task.created"}  # type: ignore[union-attr]


def assert_ends_fast(stream: Stream, changed_at: float) -> None:
    ended = stream.wait_end(5)
    assert ended is not None, "the stream still runs after the revocation"
    assert ended - changed_at <= END_WITHIN, f"the stream ended {ended - changed_at:.2f} s after the change"


@pytest.mark.parametrize("scoped", [False, True], ids=["events", "events-project"])
def test_revoking_the_tokens_ends_the_stream(d: DaemonProc, people: People, scoped: bool) -> None:
    uid, token = member(people, f"revoked-{scoped}", projects=(people.project,))
    stream = open_stream(d, token, {"project": str(people.project)} if scoped else None)
    try:
        task_in(people, people.project, "before revocation")
        assert "before revocation" in seen_titles(stream)
        changed = time.monotonic()
        assert people.admin.delete(f"/users/{uid}/tokens").status_code == 200
        assert_ends_fast(stream, changed)
    finally:
        stream.close()


@pytest.mark.parametrize("scoped", [False, True], ids=["events", "events-project"])
def test_deleting_the_user_ends_the_stream(d: DaemonProc, people: People, scoped: bool) -> None:
    uid, token = member(people, f"deleted-{scoped}", projects=(people.project,))
    stream = open_stream(d, token, {"project": str(people.project)} if scoped else None)
    try:
        changed = time.monotonic()
        assert people.admin.delete(f"/users/{uid}").status_code == 200
        assert_ends_fast(stream, changed)
    finally:
        stream.close()


def test_losing_the_project_ends_a_project_stream(d: DaemonProc, people: People) -> None:
    uid, token = member(people, "leaver-scoped", projects=(people.project,))
    stream = open_stream(d, token, {"project": str(people.project)})
    try:
        changed = time.monotonic()
        assert people.admin.delete(f"/users/{uid}/projects/{people.project}").status_code == 200
        assert_ends_fast(stream, changed)
    finally:
        stream.close()


def test_losing_the_project_refilters_a_plain_stream(d: DaemonProc, people: People) -> None:
    uid, token = member(people, "leaver", projects=(people.project, people.other_project))
    stream = open_stream(d, token)
    try:
        task_in(people, people.project, "visible while a member")
        assert "visible while a member" in seen_titles(stream)
        assert people.admin.delete(f"/users/{uid}/projects/{people.project}").status_code == 200
        time.sleep(END_WITHIN)
        task_in(people, people.project, "after leaving A")
        task_in(people, people.other_project, "still in B")
        titles = seen_titles(stream)
        assert "after leaving A" not in titles
        assert "still in B" in titles  # the stream itself stays (the user still has B)
        assert not stream.ended
    finally:
        stream.close()


def test_demoting_an_admin_refilters_its_stream(d: DaemonProc, people: People) -> None:
    uid, token = member(people, "demoted", role="admin")
    stream = open_stream(d, token)
    try:
        task_in(people, people.project, "seen as admin")
        assert "seen as admin" in seen_titles(stream)
        assert people.admin.patch(f"/users/{uid}", json={"role": "member"}).status_code == 200
        time.sleep(END_WITHIN)
        task_in(people, people.project, "hidden after demotion")
        assert "hidden after demotion" not in seen_titles(stream)
    finally:
        stream.close()


def test_a_member_never_gets_events_of_no_project(d: DaemonProc, people: People, tmp_path: Path) -> None:
    _, token = member(people, "no-globals", projects=(people.project,))
    stream = open_stream(d, token)
    try:
        # a project event carries its project; user.* events carry none: admins only
        make_user(people.admin, "someone-new")
        task_in(people, people.project, "project event")
        got = stream.drain() + [e for e in [None] if e]
        time.sleep(0.8)
        got += stream.drain()
        kinds = {kind for kind, _ in got}
        assert "task.created" in kinds
        assert not any(kind.startswith("user.") for kind in kinds), kinds
    finally:
        stream.close()


# ---------------------------------------------------------------- terminal WebSocket

FAKE_AGENT = Path(__file__).parents[1] / "agents" / "fake_agent.py"


@dataclass
class AgentWorld:
    url: str
    admin: httpx.Client
    project: int
    owner: tuple[int, str]
    session: str


@pytest.fixture(scope="module")
def agent_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentWorld]:
    """A daemon with agents + tmux and one running agent (the fake Claude Code CLI of
    tests/agents) on a task of ``owner``."""
    import signal
    import stat
    import subprocess
    import sys
    import uuid

    import tomli_w

    from tests.support.daemon import launch_daemon
    from tests.support.waiting import free_port, wait

    tmp = tmp_path_factory.mktemp("revoke-terminal")
    home = tmp / "elowen"
    home.mkdir()
    wrapper = tmp / "fake-claude"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    port = free_port()
    settings = {
        "plugins": {
            "tmux": {"config": {"socket": sock, "enter_delay": 0.05}},
            "agents": {"config": {"url": f"http://127.0.0.1:{port}", "scheduler_interval": 0.5}},
            "claude-code": {"config": {"binary": str(wrapper), "env": {"FAKE_LOG": str(tmp / "fake.log")}}},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp / "stderr.txt")
    admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {(home / 'admin.token').read_text().strip()}"}, timeout=10)
    try:
        wait(lambda: admin.get("/plugins/agents").json()["state"] == "enabled", "agents enabled")
        project = make_project(admin, tmp / "repo", "T")
        owner = make_user(admin, "term-owner")
        assert admin.post(f"/users/{owner[0]}/projects", json={"project_id": project}).status_code == 200
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {owner[1]}"}, timeout=10) as c:
            task = c.post("/tasks", json={"title": "t", "project_id": project, "exec": "claude:fake"}).json()
        name = f"elowen-t{task['id']}-a1"
        wait(lambda: admin.get(f"/sessions/{name}").json().get("state") == "running", "agent running", timeout=30)
        yield AgentWorld(url, admin, project, owner, name)
    finally:
        admin.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def _terminal_closes_after(w: AgentWorld, token: str, want_input: bool, change: object) -> tuple[float, int | None]:
    """Open the terminal with a fresh ticket of ``token``, check it streams, run ``change()``,
    then keep sending keystrokes until the socket closes; returns (seconds to close, code)."""
    import trio
    from trio_websocket import ConnectionClosed, open_websocket_url

    with httpx.Client(base_url=w.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as c:
        r = c.post(f"/sessions/{w.session}/ticket", json={"input": want_input})
        assert r.status_code == 201, r.text
        ticket = r.json()["ticket"]
    ws_url = w.url.replace("http://", "ws://") + f"/sessions/{w.session}/terminal?ticket={ticket}"
    result: dict[str, object] = {}

    async def main() -> None:
        async with open_websocket_url(ws_url) as ws:
            first = await ws.get_message()
            assert first, "no initial capture"
            await trio.to_thread.run_sync(change)  # type: ignore[arg-type]
            changed = trio.current_time()
            try:
                with trio.fail_after(5):
                    while True:
                        if want_input:
                            await ws.send_message(b"x")
                        with trio.move_on_after(0.05):
                            await ws.get_message()
            except ConnectionClosed as exc:
                result["after"] = trio.current_time() - changed
                result["code"] = exc.reason.code if exc.reason else None

    trio.run(main)
    return float(result["after"]), result.get("code")  # type: ignore[arg-type]


def test_terminal_closes_when_the_tokens_are_revoked(agent_world: AgentWorld) -> None:
    w = agent_world
    uid, token = make_user(w.admin, "term-revoked")
    assert w.admin.post(f"/users/{uid}/projects", json={"project_id": w.project}).status_code == 200
    after, code = _terminal_closes_after(w, token, False, lambda: w.admin.delete(f"/users/{uid}/tokens").raise_for_status())
    assert after <= END_WITHIN and code == 1008, (after, code)


def test_terminal_closes_when_the_user_leaves_the_project(agent_world: AgentWorld) -> None:
    w = agent_world
    uid, token = make_user(w.admin, "term-leaver")
    assert w.admin.post(f"/users/{uid}/projects", json={"project_id": w.project}).status_code == 200
    after, code = _terminal_closes_after(w, token, False, lambda: w.admin.delete(f"/users/{uid}/projects/{w.project}").raise_for_status())
    assert after <= END_WITHIN and code == 1008, (after, code)


def test_terminal_closes_when_the_user_is_deleted(agent_world: AgentWorld) -> None:
    w = agent_world
    uid, token = make_user(w.admin, "term-deleted")
    assert w.admin.post(f"/users/{uid}/projects", json={"project_id": w.project}).status_code == 200
    after, code = _terminal_closes_after(w, token, False, lambda: w.admin.delete(f"/users/{uid}").raise_for_status())
    assert after <= END_WITHIN and code == 1008, (after, code)


def test_typing_stops_when_an_admin_is_demoted(agent_world: AgentWorld) -> None:
    """An admin (not the task's owner) types; demoted to a member, it may no longer act."""
    w = agent_world
    uid, token = make_user(w.admin, "term-demoted", "admin")
    after, code = _terminal_closes_after(w, token, True, lambda: w.admin.patch(f"/users/{uid}", json={"role": "member"}).raise_for_status())
    assert after <= END_WITHIN and code == 1008, (after, code)


def test_the_owner_keeps_typing_when_nothing_changes(agent_world: AgentWorld) -> None:
    """The control case: the stream stays open (the watch does not close healthy sockets)."""
    import trio

    with pytest.raises(trio.TooSlowError):  # 5 s of keystrokes, no close: the helper's fail_after fires
        _terminal_closes_after(agent_world, agent_world.owner[1], True, lambda: time.sleep(0.01))

"""Typing into an agent's live terminal, end to end: xterm.js in the browser → the web front end's
``WS /terminal/<session>`` relay → the daemon's single-use ticket and ``WS
/sessions/<session>/terminal`` → the agent's real tmux pane.

The agent here is a small recorder (written below, started through the Claude Code provider
like ``tests/agents/fake_agent.py``): it draws a real captured Claude Code idle screen, puts its
tty in raw mode, turns bracketed paste on (as Claude Code does), appends every byte it reads to
a log file and echoes what it reads (on Enter: ``read: <line>``). So a test can check what
reached the pane byte for byte, and that the echo came back to the browser through tmux.

Already covered elsewhere (not repeated): input tickets refused to a non-owner member and a
read-only ticket being single-use (``tests/agents/test_agents_api.py``); the literal text path
of ``send_text`` (``tests/tmux/test_send.py``).
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import tomli_w
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from tests.daemon.helpers import make_user
from tests.support.waiting import wait

from .conftest import wait_js
from .stack import ROOT, Stack

TICKET_TTL = 1.0
"""Seconds a terminal ticket stays valid in this stack (the manifest's minimum)."""

IDLE_MARK = "? for shortcuts"
"""Text of the Claude Code idle screen the recorder draws (its footer)."""

RECORDER = r'''
"""Elowen test agent: a real Claude Code idle screen, then records and echoes raw tty input."""
import os, sys, time, tty
from pathlib import Path

screens = Path(sys.argv[1])
log = Path(sys.argv[2])


def screen(name):
    lines = (screens / name).read_text(encoding="utf-8").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return "\x1b[H\x1b[2J" + "\r\n".join(lines)


tty.setraw(0)
out = sys.stdout.buffer
out.write(b"\x1b[?2004h")  # bracketed paste on, as Claude Code does
out.write(screen("05_working.txt").encode()); out.flush()
time.sleep(0.3)
out.write(screen("07_idle_finished_after_approve.txt").encode() + b"\r\n"); out.flush()
line = b""
with open(log, "ab", buffering=0) as rec:
    while True:
        data = os.read(0, 4096)
        if not data:
            break
        rec.write(data)
        for b in data:
            if b == 13:
                out.write(b"\r\nread: " + line + b"\r\n")
                line = b""
            elif b >= 32 or b == 9:
                out.write(bytes([b]))
                line += bytes([b])
        out.flush()
'''


@dataclass
class RecorderStack(Stack):
    """The web test stack with the recorder as Claude Code and short-lived tickets."""

    @property
    def recorded(self) -> Path:
        return self.root / "recorded.bin"

    def write_config(self) -> None:
        super().write_config()
        script = self.root / "recorder.py"
        script.write_text(RECORDER)
        wrapper = self.root / "fake-claude"
        screens = ROOT / "tests" / "fixtures" / "screens" / "claude"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} {screens} {self.recorded}\n")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
        path = self.home / "config.toml"
        config = tomllib.loads(path.read_text())
        config["plugins"]["agents"]["config"]["ticket_ttl"] = TICKET_TTL
        path.write_text(tomli_w.dumps(config))

    def typed(self) -> bytes:
        """Every byte the agent has read from its terminal so far."""
        return self.recorded.read_bytes() if self.recorded.exists() else b""

    def pane(self, session: str) -> str:
        """The agent's screen as tmux has it (``capture-pane -p``, with the scrollback)."""
        out = subprocess.run(
            ["tmux", "-L", self.socket_name, "capture-pane", "-p", "-S", "-200", "-t", f"={session}:"], capture_output=True, text=True, check=True
        )
        return out.stdout


@dataclass(frozen=True)
class Agent:
    task_id: int
    session: str


@pytest.fixture(scope="module")
def rstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecorderStack]:
    s = RecorderStack(tmp_path_factory.mktemp("terminal-input"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def agent(rstack: RecorderStack) -> Agent:
    """A task of the admin's run by the recorder in real tmux, ready to read keys."""
    project = rstack.project()
    with rstack.admin() as c:
        task = c.post("/tasks", json={"title": "Terminal input", "project_id": project, "exec": "claude:fake"}).json()

        def running() -> str | None:
            items = c.get("/sessions", params={"task": task["id"], "state": "running"}).json()["items"]
            return items[0]["session"] if items else None

        session = wait(running, "the agent session", timeout=20)
    wait(lambda: rstack.recorded.exists() and IDLE_MARK in rstack.pane(session), "the recorder's idle screen", timeout=20)
    return Agent(int(task["id"]), session)


def _token(c: httpx.Client, name: str, project: int) -> str:
    """A member's token who may see ``project`` (but owns nothing in it)."""
    user_id, token = make_user(c, f"{name}-{uuid.uuid4().hex[:6]}")
    c.post(f"/users/{user_id}/projects", json={"project_id": project}).raise_for_status()
    return token


def _mark(stack: RecorderStack, session: str) -> str:
    """Make the agent print a fresh unique line (typed through the daemon's keys API) and wait
    until tmux shows it: the screen a new terminal connection must start with."""
    mark = f"mark-{uuid.uuid4().hex[:8]}"
    with stack.admin() as c:
        c.post(f"/sessions/{session}/keys", json={"text": mark, "submit": True}).raise_for_status()
    wait(lambda: f"read: {mark}" in stack.pane(session), "the mark on the agent's screen", timeout=10)
    return f"read: {mark}"


def _sentinel_after(stack: RecorderStack, session: str, before: int) -> bytes:
    """Type a unique sentinel through the daemon's keys API (an independent path) and return
    what the agent read after ``before`` up to and including it: anything typed earlier and
    still on its way (e.g. keys that should have been dropped) would show up in front."""
    mark = f"sentinel-{uuid.uuid4().hex[:8]}"
    with stack.admin() as c:
        c.post(f"/sessions/{session}/keys", json={"text": mark, "submit": True}).raise_for_status()
    return wait(lambda: (lambda got: got if got.endswith(f"{mark}\r".encode()) else None)(stack.typed()[before:]), "the sentinel")


# ------------------------------------------------------------------------------- daemon


async def _ticket(stack: RecorderStack, session: str, token: str, want_input: bool) -> str:
    async with httpx.AsyncClient(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as c:
        r = await c.post(f"/sessions/{session}/ticket", json={"input": want_input})
        assert r.status_code == 201, r.text
        assert r.json()["input"] is want_input and r.json()["expires_in"] == TICKET_TTL
        size = subprocess.run(
            ["tmux", "-L", stack.socket_name, "display-message", "-p", "-t", f"={session}:", "#{pane_width} #{pane_height}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert [r.json()["cols"], r.json()["rows"]] == [int(n) for n in size]  # the pane's own size
        return str(r.json()["ticket"])


def _ws_url(stack: RecorderStack, session: str, ticket: str) -> str:
    return f"{stack.daemon_url.replace('http://', 'ws://')}/sessions/{quote(session)}/terminal?ticket={quote(ticket)}"


async def _refused(url: str) -> bool:
    """Whether the daemon turns this terminal connection away (rejected or closed at once)."""
    try:
        async with open_websocket_url(url) as ws:
            with trio.fail_after(5):
                await ws.get_message()
    except (ConnectionRejected, ConnectionClosed):
        return True
    return False


async def _wait_typed(stack: RecorderStack, before: int, expected: bytes, timeout: float = 10.0) -> bytes:
    with trio.move_on_after(timeout):
        while stack.typed()[before:] != expected and len(stack.typed()) - before < len(expected) + 64:
            await trio.sleep(0.02)
    return stack.typed()[before:]


PAYLOADS: list[tuple[str, str | bytes]] = [
    ("semicolon", "a;"),
    ("lone-semicolon", ";"),
    ("dash-R", "-R"),
    ("flags", "-l -- -H 1b"),
    ("quotes", "'\"`$HOME \\ #{session_name}"),
    ("cjk", "日本語テキスト 한국어"),
    ("enter", "echo hi\r"),
    ("ctrl-c-and-arrows", "\x03\x1b[A\x1b[B\x7f"),
    ("multi-line-paste", "line one;\rline two -R\r'three'\r"),
    ("bracketed-paste", "\x1b[200~first\nsecond 日本\n\x1b[201~"),
    ("binary-frame", "bytes frame é".encode()),
    # larger than one send-keys chunk, with multi-byte characters across the chunk borders
    ("large-paste", "".join(f"{i:03d}: a; -R '\"' 日本語 \\ ;\r" for i in range(150))),
]


async def test_input_ticket_types_payloads_byte_for_byte(rstack: RecorderStack, agent: Agent) -> None:
    mark = await trio.to_thread.run_sync(_mark, rstack, agent.session)
    ticket = await _ticket(rstack, agent.session, rstack.admin_token, True)
    async with open_websocket_url(_ws_url(rstack, agent.session, ticket)) as ws:
        first = await ws.get_message()
        assert mark in (first if isinstance(first, str) else first.decode())  # the screen comes first
        for label, payload in PAYLOADS:
            expected = payload if isinstance(payload, bytes) else payload.encode()
            before = len(rstack.typed())
            await ws.send_message(payload)
            got = await _wait_typed(rstack, before, expected)
            assert got == expected, f"{label}: the agent read {got!r}, not {expected!r}"
    assert len(expected) > 2 * 256  # the last payload spans several send-keys commands


async def test_read_only_ticket_drops_input(rstack: RecorderStack, agent: Agent) -> None:
    with rstack.admin() as c:
        member = _token(c, "viewer", rstack.project())
    mark = await trio.to_thread.run_sync(_mark, rstack, agent.session)
    ticket = await _ticket(rstack, agent.session, member, False)
    before = len(rstack.typed())
    async with open_websocket_url(_ws_url(rstack, agent.session, ticket)) as ws:
        assert mark in str(await ws.get_message())
        await ws.send_message("ro-typed; -R\r")
        await ws.send_message(b"\x03")
        # the relay keeps going for a read-only client (its frames are read and dropped)
        await trio.sleep(0.3)
        with rstack.admin() as c:
            c.post(f"/sessions/{agent.session}/keys", json={"text": "still-live", "submit": True}).raise_for_status()
        seen = ""
        with trio.fail_after(5):
            while "still-live" not in seen:
                message = await ws.get_message()
                seen += message if isinstance(message, str) else message.decode("utf-8", "replace")
    got = await trio.to_thread.run_sync(_sentinel_after, rstack, agent.session, before)
    assert got.startswith(b"still-live\r") and b"ro-typed" not in got and b"\x03" not in got, got


async def test_ticket_is_single_use_bound_to_its_session_and_expires(rstack: RecorderStack, agent: Agent) -> None:
    token = rstack.admin_token
    # single use (an input ticket too): the second connection is refused
    ticket = await _ticket(rstack, agent.session, token, True)
    assert not await _refused(_ws_url(rstack, agent.session, ticket))
    assert await _refused(_ws_url(rstack, agent.session, ticket))
    # a ticket tried on another session's terminal is refused there and spent
    ticket = await _ticket(rstack, agent.session, token, True)
    assert await _refused(_ws_url(rstack, "elowen-t999999-a1", ticket))
    assert await _refused(_ws_url(rstack, agent.session, ticket))
    # expiry: unused past its TTL it is refused
    ticket = await _ticket(rstack, agent.session, token, True)
    await trio.sleep(TICKET_TTL + 0.3)
    assert await _refused(_ws_url(rstack, agent.session, ticket))
    # a garbage ticket
    assert await _refused(_ws_url(rstack, agent.session, "not-a-ticket"))


# ------------------------------------------------------------------------------- browser


def _page(browser: Any, stack: RecorderStack, token: str) -> Any:
    """A new browser context logged in with ``token``, on the dashboard."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"{stack.web_url}/login")
    page.fill("#token", token)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(f"{stack.web_url}/")
    return page


def _xterm_has(page: Any, text: str, timeout: float = 10000) -> None:
    wait_js(page, "t => (document.querySelector('#terminal .xterm-rows') || {}).textContent?.includes(t)", arg=text, timeout=timeout)


def _open_terminal(page: Any, stack: RecorderStack, agent: Agent) -> None:
    mark = _mark(stack, agent.session)
    page.goto(f"{stack.web_url}/tasks/{agent.task_id}")
    page.wait_for_selector("#terminal[data-connected='1']")
    _xterm_has(page, mark)  # the agent's current screen is shown


def _tab_to(page: Any, element_id: str, presses: int = 60) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == element_id:
            return
    raise AssertionError(f"#{element_id} is not reachable with Tab")


@pytest.mark.slow
def test_admin_types_into_the_agent_from_the_browser(browser: Any, rstack: RecorderStack, agent: Agent) -> None:
    page = _page(browser, rstack, rstack.admin_token)
    _open_terminal(page, rstack, agent)
    page.wait_for_selector("#terminal[data-input='0']")  # "Allow typing" starts off
    page.click("#term-input")
    page.wait_for_selector("#terminal[data-input='1'][data-connected='1']")
    assert page.inner_text("#term-mode") == "You may type into this agent."
    height = subprocess.run(
        ["tmux", "-L", rstack.socket_name, "display-message", "-p", "-t", f"={agent.session}:", "#{pane_height}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    wait_js(page, f"document.querySelectorAll('#terminal .xterm-rows > div').length === {int(height)}")  # drawn at the pane's size
    toggle = page.get_by_role("button", name="Allow typing")
    assert toggle.get_attribute("aria-pressed") == "true"

    # switch to read-only from the keyboard; keys typed then never reach the pane
    _tab_to(page, "term-input")
    page.keyboard.press("Space")
    page.wait_for_selector("#terminal[data-input='0'][data-connected='1']")
    assert toggle.get_attribute("aria-pressed") == "false"
    assert page.inner_text("#term-mode").startswith("Read-only")
    before = len(rstack.typed())
    page.click("#terminal")
    page.keyboard.type("ro-admin")
    page.keyboard.press("Enter")

    # and back to typing (Enter on the focused button this time)
    toggle.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#terminal[data-input='1'][data-connected='1']")
    assert toggle.get_attribute("aria-pressed") == "true"
    assert page.inner_text("#term-mode") == "You may type into this agent."
    assert page.evaluate("document.activeElement.classList.contains('xterm-helper-textarea')")  # focus moved to the terminal
    line = f"echo typed-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    page.keyboard.type(line)
    page.keyboard.press("Enter")
    got = wait(lambda: (lambda b: b if b.endswith(b"\r") else None)(rstack.typed()[before:]), "the typed line", timeout=10)
    assert got == f"{line}\r".encode(), got  # exactly the line and a real Enter; nothing from read-only
    wait(lambda: f"read: {line}" in rstack.pane(agent.session), "the line in the tmux pane", timeout=10)
    _xterm_has(page, f"read: {line}")  # the agent's echo came back through tmux to xterm.js
    print(f"keys typed → echo on the xterm screen: {(time.perf_counter() - t0) * 1000:.0f} ms")
    assert not page.errors
    page.context.close()


@pytest.mark.slow
def test_member_who_does_not_own_the_task_gets_a_read_only_terminal(browser: Any, rstack: RecorderStack, agent: Agent) -> None:
    with rstack.admin() as c:
        token = _token(c, "member", rstack.project())
    page = _page(browser, rstack, token)
    _open_terminal(page, rstack, agent)
    page.wait_for_selector("#terminal[data-input='0']")
    assert page.inner_text("#term-mode") == "Read-only: only an admin or the task's owner may type into this agent."
    assert page.query_selector("#term-input") is None  # no control to turn typing on
    before = len(rstack.typed())
    page.click("#terminal")
    page.keyboard.type("member-typed")
    page.keyboard.press("Enter")
    # asking the relay for input directly changes nothing: it falls back to read-only and drops frames
    reply = page.evaluate(
        """s => new Promise((done, fail) => {
        const ws = new WebSocket(`ws://${location.host}/terminal/${encodeURIComponent(s)}?input=1`);
        ws.onmessage = m => { ws.send('forced-input\\r'); ws.send('\\x03'); setTimeout(() => { ws.close(); done(m.data); }, 300); };
        ws.onerror = () => fail('websocket error');
    })""",
        agent.session,
    )
    assert json.loads(reply)["input"] is False
    got = _sentinel_after(rstack, agent.session, before)
    assert got.startswith(b"sentinel-"), got  # nothing the member typed came first
    pane = rstack.pane(agent.session)
    assert "member-typed" not in pane and "forced-input" not in pane
    assert not page.errors
    page.context.close()

"""Instance-wide MCP server changes (``POST``/``DELETE /mcp-servers``, admin) are applied
before the answer, under one lock, as ``PATCH /plugins/mcp-client/config`` (a restart of the
plugin). These tests try to break that against a real daemon: a caller that leaves mid-apply,
an apply that fails, the response timeout cutting one, many at once, a replace racing a
remove, the plugin disabled meanwhile, hand edits of ``config.toml``, a member, and tool
schemas that TOML cannot hold (``null``).

A *sticky* server (a wrapper that ignores SIGTERM and outlives its stdin, so ending it takes
the kernel's 2 s drain) makes each restart take about 2 s while it runs: a window wide enough
to leave, edit or disable in, deterministically.
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, start_daemon
from tests.support.waiting import wait

from .conftest import PROVIDERS, World

pytestmark = pytest.mark.slow

SERVER = Path(__file__).parent / "servers" / "calc_server.py"
STICKY = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the real server too
subprocess.Popen([sys.executable, sys.argv[1], "ok"]).wait()  # ends with stdin
time.sleep(3600)  # ...but this wrapper does not: the SDK waits, terminates (ignored), kills
"""
NULLS = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("nulls")

@server.tool()
def find(q: str, limit: int | None = None) -> str:
    \"\"\"An optional argument: its schema says "default": null.\"\"\"
    return q

@server.resource("nulls://plain", name="plain")
def plain() -> str:
    return "no mime type given"

server.run("stdio")
"""


def stdio(mode: str = "ok") -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER), mode], "needs_approval": False}


def stored(home: Path) -> dict[str, Any]:
    """The instance's servers as in ``config.toml`` now."""
    try:
        data = tomllib.loads((home / "config.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    return dict(data.get("plugins", {}).get("mcp-client", {}).get("config", {}).get("servers", {}))


def secrets(home: Path) -> dict[str, Any]:
    path = home / "plugins" / "mcp-client" / "secrets.json"
    return json.loads(path.read_text()) if path.exists() else {}


def listed(c: httpx.Client) -> dict[str, Any]:
    r = c.get("/mcp-servers")
    return {s["name"]: s for s in r.json()["items"]} if r.status_code == 200 else {}


def start_sticky(c: httpx.Client) -> None:
    """Start the sticky server's connection: the next restart of the plugin takes ~2 s."""
    r = c.get("/mcp-servers/sticky/tools", timeout=30)
    assert r.status_code == 200, r.text


def leave_during(d: DaemonProc, token: str, method: str, path: str, body: Any, until: Any, what: str) -> None:
    """Send a request on a raw socket, wait until ``until()`` (the change reached
    ``config.toml``: the plugin's restart is under way), then hang up before the answer."""
    data = json.dumps(body).encode() if body is not None else b""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    s = socket.create_connection(("127.0.0.1", d.port))
    try:
        s.sendall(head.encode() + data)
        wait(until, timeout=30, what=what, interval=0.01)
        s.setblocking(False)
        with pytest.raises(BlockingIOError):  # not answered yet: we leave mid-apply
            s.recv(1)
    finally:
        s.close()


@pytest.fixture(scope="module")
def sticky(world: World, tmp_path_factory: pytest.TempPathFactory) -> World:
    script = tmp_path_factory.mktemp("sticky") / "sticky.py"
    script.write_text(STICKY)
    with world.rest("admin") as c:
        r = c.post("/mcp-servers", json={"name": "sticky", "command": sys.executable, "args": [str(script), str(SERVER)], "needs_approval": False}, timeout=60)
        assert r.status_code == 201, r.text
        start_sticky(c)
        t0 = time.monotonic()
        assert c.post("/mcp-servers", json={"name": "probe", **stdio()}, timeout=60).status_code == 201
        start_sticky(c)
        t0 = time.monotonic()
        assert c.delete("/mcp-servers/probe", timeout=60).status_code == 200
        assert time.monotonic() - t0 > 1.5, "the sticky server should slow the restart down"
    return world


def test_leaving_mid_remove_forgets_the_secrets_too(sticky: World) -> None:
    """The caller hangs up after the server left config.toml, while the plugin restarts: the
    request is cancelled, but the change is whole (no secrets of a removed server left behind,
    and the apply lock is free)."""
    home = sticky.d.home
    with sticky.rest("admin") as c:
        r = c.post("/mcp-servers", json={"name": "gone", **stdio(), "secret_env": {"GONE_TOKEN": "gone-secret-1"}}, timeout=60)
        assert r.status_code == 201, r.text
        assert "gone" in secrets(home)
        start_sticky(c)
        leave_during(sticky.d, str(sticky.tokens["admin"]), "DELETE", "/mcp-servers/gone", None, lambda: "gone" not in stored(home), "gone left config.toml")
        wait(lambda: "gone" not in listed(c), timeout=30, what="the plugin restarted without gone")
        time.sleep(1.0)
        assert "gone" not in secrets(home), "a removed server's secrets stayed behind"
        t0 = time.monotonic()  # the lock was released
        r = c.post("/mcp-servers", json={"name": "after", **stdio()}, timeout=60)
        assert r.status_code == 201 and time.monotonic() - t0 < 30, r.text
        assert c.delete("/mcp-servers/after", timeout=60).status_code == 200


def test_secrets_a_crash_left_behind_go_with_the_next_change(sticky: World) -> None:
    """kill -9 between storing an add's secrets and its PATCH (or between a remove's PATCH and
    its secrets) leaves secrets of a server that is not stored. The state such a crash leaves is
    written here by hand (a real kill at that instant cannot be timed); the next change drops
    them, and keeps the stored servers' secrets."""
    home = sticky.d.home
    path = home / "plugins" / "mcp-client" / "secrets.json"
    with sticky.rest("admin") as c:
        r = c.post("/mcp-servers", json={"name": "kept", **stdio(), "secret_env": {"KEPT_TOKEN": "kept-secret"}}, timeout=60)
        assert r.status_code == 201, r.text
        path.write_text(json.dumps(secrets(home) | {"orphan": {"ORPHAN_TOKEN": "orphan-secret"}}))
        r = c.post("/mcp-servers", json={"name": "next", **stdio()}, timeout=60)
        assert r.status_code == 201, r.text
        left = secrets(home)
        assert "orphan" not in left and left.get("kept") == {"KEPT_TOKEN": "kept-secret"}, left
        assert path.stat().st_mode & 0o777 == 0o600
        for name in ("kept", "next"):
            assert c.delete(f"/mcp-servers/{name}", timeout=60).status_code == 200
        assert "kept" not in secrets(home)


def test_leaving_mid_replace_keeps_definition_and_secrets_together(sticky: World) -> None:
    home = sticky.d.home
    with sticky.rest("admin") as c:
        r = c.post("/mcp-servers", json={"name": "rep", **stdio(), "secret_env": {"REP_TOKEN": "old-secret"}}, timeout=60)
        assert r.status_code == 201, r.text
        start_sticky(c)
        body = {"name": "rep", **stdio(), "env": {"V": "2"}, "secret_env": {"REP_TOKEN": "new-secret"}, "replace": True}
        leave_during(
            sticky.d, str(sticky.tokens["admin"]), "POST", "/mcp-servers", body, lambda: stored(home).get("rep", {}).get("env") == {"V": "2"}, "rep replaced"
        )
        time.sleep(3.0)
        assert stored(home)["rep"]["env"] == {"V": "2"} and secrets(home)["rep"] == {"REP_TOKEN": "new-secret"}
        assert c.delete("/mcp-servers/rep", timeout=60).status_code == 200
        assert "rep" not in secrets(home) and "rep" not in stored(home)


def test_an_apply_that_fails_is_a_clear_502_and_changes_nothing(sticky: World) -> None:
    """The daemon cannot be reached (daemon.pid names a dead port): 502 ``apply_failed``
    naming the cause; the stored definition and the old secrets are as they were, a new
    name's secrets are not kept."""
    home = sticky.d.home
    pid = home / "daemon.pid"
    with sticky.rest("admin") as c:
        r = c.post("/mcp-servers", json={"name": "keep", **stdio(), "secret_env": {"KEEP_TOKEN": "keep-1"}}, timeout=60)
        assert r.status_code == 201, r.text
        before = stored(home)["keep"]
        original = pid.read_text()
        dead = socket.socket()
        dead.bind(("127.0.0.1", 0))
        port = dead.getsockname()[1]
        dead.close()
        pid.write_text(json.dumps(json.loads(original) | {"port": port}))
        try:
            r = c.post("/mcp-servers", json={"name": "keep", **stdio(), "env": {"X": "1"}, "secret_env": {"KEEP_TOKEN": "keep-2"}, "replace": True}, timeout=60)
            assert r.status_code == 502 and r.json()["error"]["code"] == "apply_failed", r.text
            assert "applying the MCP servers failed" in r.json()["error"]["message"] and "keep-2" not in r.text
            r = c.post("/mcp-servers", json={"name": "fresh", **stdio(), "secret_env": {"FRESH_TOKEN": "fresh-1"}}, timeout=60)
            assert r.status_code == 502, r.text
            r = c.delete("/mcp-servers/keep", timeout=60)
            assert r.status_code == 502, r.text
        finally:
            pid.write_text(original)
        assert stored(home)["keep"] == before and secrets(home)["keep"] == {"KEEP_TOKEN": "keep-1"}
        assert "fresh" not in stored(home) and "fresh" not in secrets(home)
        assert c.delete("/mcp-servers/keep", timeout=60).status_code == 200
        assert "keep" not in secrets(home)


def test_a_tool_schema_with_null_can_be_added_instance_wide(sticky: World, tmp_path: Path) -> None:
    """The Python SDK writes ``"default": null`` for an optional argument, and a resource may
    have no MIME type: TOML has no null, so the snapshot must not carry one into config.toml."""
    script = tmp_path / "nulls.py"
    script.write_text(NULLS)
    with sticky.rest("admin") as c:
        r = c.post("/mcp-servers", json={"name": "nulls", "command": sys.executable, "args": [str(script)], "needs_approval": False}, timeout=60)
        assert r.status_code == 201, r.text
        assert "nulls.find" in listed(c)["nulls"]["tools"]
        r = c.get("/mcp-servers/nulls/resources/read", params={"uri": "nulls://plain"}, timeout=30)
        assert r.status_code == 200 and "no mime type" in r.text, r.text
        assert c.delete("/mcp-servers/nulls", timeout=60).status_code == 200


def test_many_adds_and_removes_at_once_all_apply(sticky: World) -> None:
    home = sticky.d.home
    names = [f"many{i}" for i in range(8)]

    def add(n: str) -> httpx.Response:
        with sticky.rest("admin") as c:
            return c.post("/mcp-servers", json={"name": n, **stdio(), "secret_env": {"T": f"secret-{n}"}}, timeout=120)

    def remove(n: str) -> httpx.Response:
        with sticky.rest("admin") as c:
            return c.delete(f"/mcp-servers/{n}", timeout=120)

    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        answers = list(pool.map(add, names))
    assert [r.status_code for r in answers] == [201] * len(names), [r.text for r in answers]
    assert set(names) <= set(stored(home)) and all(secrets(home)[n] == {"T": f"secret-{n}"} for n in names)
    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        answers = list(pool.map(remove, names * 2))  # each twice: one 200, one 404
    codes = [r.status_code for r in answers]
    assert sorted(codes) == [200] * len(names) + [404] * len(names), [r.text for r in answers]
    assert not set(names) & set(stored(home)) and not set(names) & set(secrets(home))
    with sticky.rest("admin") as c:
        assert not set(names) & set(listed(c)) and "sticky" in listed(c)


def test_a_replace_racing_a_remove_ends_consistent(sticky: World) -> None:
    home = sticky.d.home
    with sticky.rest("admin") as c:
        assert c.post("/mcp-servers", json={"name": "race", **stdio(), "secret_env": {"R": "r-old"}}, timeout=60).status_code == 201

    def replace(_: int) -> httpx.Response:
        with sticky.rest("admin") as c:
            return c.post("/mcp-servers", json={"name": "race", **stdio(), "secret_env": {"R": "r-new"}, "replace": True}, timeout=120)

    def remove(_: int) -> httpx.Response:
        with sticky.rest("admin") as c:
            return c.delete("/mcp-servers/race", timeout=120)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(replace, 0), pool.submit(remove, 0)
        rep, rem = a.result(), b.result()
    assert rep.status_code == 201 and rem.status_code == 200, (rep.text, rem.text)
    if "race" in stored(home):  # the remove went first, the replace added it back
        assert secrets(home)["race"] == {"R": "r-new"}
    else:
        assert "race" not in secrets(home)
    with sticky.rest("admin") as c:
        if "race" in stored(home):
            assert c.delete("/mcp-servers/race", timeout=60).status_code == 200
    assert "race" not in secrets(home)


def test_the_plugin_disabled_while_an_add_waits_for_the_lock(sticky: World) -> None:
    """An add waiting behind a slow apply while an admin disables the plugin: it is stored
    (201), the plugin stays disabled, and it is there once the plugin is enabled again."""
    home = sticky.d.home
    with sticky.rest("admin") as c:
        assert c.post("/mcp-servers", json={"name": "slowdel", **stdio()}, timeout=60).status_code == 201
        start_sticky(c)

    def remove(_: int) -> httpx.Response:
        with sticky.rest("admin") as c:
            return c.delete("/mcp-servers/slowdel", timeout=120)

    def add(_: int) -> httpx.Response:
        with sticky.rest("admin") as c:
            return c.post("/mcp-servers", json={"name": "waiter", **stdio(), "secret_env": {"W": "w-1"}}, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(remove, 0)
        wait(lambda: "slowdel" not in stored(home), interval=0.01, timeout=30, what="the remove is applying")
        second = pool.submit(add, 0)
        with sticky.rest("admin") as c:
            r = c.post("/plugins/mcp-client/disable", json={}, timeout=60)
            assert r.status_code == 200, r.text
        assert first.result().status_code == 200, first.result().text
        added = second.result()
    assert added.status_code in (201, 404), added.text  # 404: the route was gone before the add came in
    with sticky.rest("admin") as c:
        assert c.get("/plugins/mcp-client").json()["state"] == "disabled"
        if added.status_code == 201:
            assert "waiter" in stored(home) and secrets(home)["waiter"] == {"W": "w-1"}
        assert c.post("/plugins/mcp-client/enable").status_code == 200
        wait(lambda: "sticky" in listed(c), timeout=30, what="re-enabled")
        if added.status_code == 201:
            assert "waiter" in listed(c)
            assert c.delete("/mcp-servers/waiter", timeout=60).status_code == 200
        assert "waiter" not in secrets(home)


def test_hand_edits_of_config_toml_are_kept(sticky: World) -> None:
    """A server written into config.toml by hand — before an add, and while a remove is
    restarting the plugin — survives the API's changes."""
    home = sticky.d.home
    path = home / "config.toml"

    def hand_add(name: str) -> None:
        data = tomllib.loads(path.read_text())
        servers = data["plugins"]["mcp-client"]["config"]["servers"]
        servers[name] = {"command": sys.executable, "args": [str(SERVER), "ok"], "needs_approval": False, "tools": [{"name": "add", "description": "Add"}]}
        path.write_text(tomli_w.dumps(data))

    with sticky.rest("admin") as c:
        hand_add("hand1")
        wait(lambda: "hand1" in listed(c), timeout=30, what="the hand edit applied")
        assert c.post("/mcp-servers", json={"name": "api1", **stdio()}, timeout=60).status_code == 201
        assert {"hand1", "api1"} <= set(stored(home))
        start_sticky(c)

        def remove(_: int) -> httpx.Response:
            with sticky.rest("admin") as c2:
                return c2.delete("/mcp-servers/api1", timeout=120)

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(remove, 0)
            wait(lambda: "api1" not in stored(home), interval=0.01, timeout=30, what="the remove is applying")
            hand_add("hand2")
            assert fut.result().status_code == 200
        wait(lambda: {"hand1", "hand2"} <= set(listed(c)), timeout=30, what="both hand edits applied")
        assert "api1" not in stored(home)
        for n in ("hand1", "hand2"):
            assert c.delete(f"/mcp-servers/{n}", timeout=60).status_code == 200


def test_a_member_cannot_change_the_instance_servers(sticky: World) -> None:
    home = sticky.d.home
    before = stored(home)
    with sticky.rest("mia") as c:
        r = c.post("/mcp-servers", json={"name": "sticky", "scope": "instance", "replace": True, **stdio()}, timeout=60)
        assert r.status_code == 403, r.text
        r = c.delete("/mcp-servers/sticky", params={"scope": "instance"})
        assert r.status_code == 403, r.text
        r = c.post("/mcp-servers", json={"name": "sticky", "scope": "user", **stdio()}, timeout=60)
        assert r.status_code == 409, r.text
    with sticky.d.client(sticky.tokens["agent"]) as c:
        assert c.post("/mcp-servers", json={"name": "x", **stdio()}).status_code == 403
        assert c.delete("/mcp-servers/sticky").status_code == 403
    assert stored(home) == before


# -- the response timeout cutting an apply -----------------------------------------------------


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, Path]]:
    """A daemon whose ELOWEN_RESPONSE_TIMEOUT (1 s) is shorter than a slowed restart, with the
    sticky server and ``cut`` (with a secret) in config.toml from the start."""
    root = tmp_path_factory.mktemp("short")
    script = root / "sticky.py"
    script.write_text(STICKY)
    home = root / "home"
    home.mkdir()
    tool = [{"name": "add", "description": "Add"}]
    servers = {
        "sticky": {"command": sys.executable, "args": [str(script), str(SERVER)], "needs_approval": False, "tools": tool},
        "cut": {"command": sys.executable, "args": [str(SERVER), "ok"], "needs_approval": False, "tools": tool, "secret_env": ["CUT_TOKEN"]},
    }
    config = {"plugins": {name: {"enabled": False} for name in PROVIDERS} | {"mcp-client": {"config": {"servers": servers}}}}
    (home / "config.toml").write_text(tomli_w.dumps(config))
    secrets_path = home / "plugins" / "mcp-client" / "secrets.json"
    secrets_path.parent.mkdir(parents=True)
    secrets_path.write_text(json.dumps({"cut": {"CUT_TOKEN": "cut-secret"}}))
    d = start_daemon(home, env={"ELOWEN_RESPONSE_TIMEOUT": "1"})
    try:
        yield d, home
    finally:
        d.stop()


def test_a_remove_cut_by_the_response_timeout_is_whole(short: tuple[DaemonProc, Path]) -> None:
    d, home = short
    with d.admin() as c:
        c.get("/mcp-servers/sticky/tools", timeout=30)  # may be 504 (1 s): the server starts all the same
        wait(lambda: listed(c)["sticky"]["status"]["state"] == "ready", timeout=30, what="sticky running")
        r = c.delete("/mcp-servers/cut", timeout=60)
        # mostly 504 (the handler is cut at 1 s, the PATCH's wait for the restart too; 200 if
        # the cut found no checkpoint left): either way the change is stored, and whole
        assert r.status_code in (200, 504), r.text
        wait(lambda: "cut" not in listed(c) and "sticky" in listed(c), timeout=30, what="the plugin restarted without cut")
        time.sleep(1.0)
        assert "cut" not in stored(home) and "cut" not in secrets(home), (r.status_code, secrets(home))

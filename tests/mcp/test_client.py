"""``mcp-client``: external MCP servers as brain tools, against real servers the tests start.

The stdio server is ``servers/calc_server.py`` (the official SDK's ``MCPServer``); the
streamable HTTP server is Elowen's own ``/mcp`` (the ``mcp`` plugin) reached with a member's
token as a secret header. The brain's model is the scripted model server (``conftest``): it
calls the tool the prompt names and answers ``tool said: <result>``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import World

pytestmark = pytest.mark.slow

SERVER = Path(__file__).parent / "servers" / "calc_server.py"
SECRET = "s3cr3t-calc-token-value"


def add_server(world: World, name: str, **definition: Any) -> httpx.Response:
    with world.rest("admin") as c:
        return c.post("/mcp-servers", json={"name": name, "needs_approval": False, **definition}, timeout=60)


def stdio(mode: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER), mode], **extra}


def wait_for(check: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def servers(world: World) -> dict[str, dict[str, Any]]:
    with world.rest("admin") as c:
        return {s["name"]: s for s in c.get("/mcp-servers").json()["items"]}


def chat(world: World, who: str, text: str) -> str:
    """One brain turn of ``who``; the assistant's last message."""
    with world.rest(who) as c:
        r = c.post("/brain/turn", params={"stream": "false"}, json={"text": text}, timeout=120)
    assert r.status_code == 200, r.text
    replies = [m["content"] for m in r.json()["messages"] if m["role"] == "assistant" and m.get("content")]
    assert replies, r.text
    return str(replies[-1])


def applied(world: World, name: str, tools: set[str]) -> None:
    wait_for(lambda: name in servers(world) and set(servers(world)[name]["tools"]) == tools, what=f"{name} applied")


@pytest.fixture(scope="module")
def calc(world: World) -> World:
    r = add_server(world, "calc", **stdio("ok", env={"CALC_MODE": "plain"}), secret_env={"CALC_TOKEN": SECRET}, timeout=20)
    assert r.status_code == 201, r.text
    assert SECRET not in r.text
    applied(world, "calc", {"calc.add", "calc.env_names", "calc.secret_digest"})
    return world


def test_brain_calls_a_stdio_server_tool(calc: World) -> None:
    assert 'tool said: {"result": 5}' in chat(calc, "mia", 'call calc.add {"a": 2, "b": 3}')
    status = servers(calc)["calc"]["status"]
    assert status["state"] == "ready" and status["starts"] == 1 and status["calls"] >= 1


def test_secrets_reach_only_their_server_and_are_never_shown(calc: World) -> None:
    r = add_server(calc, "other", **stdio("ok"), secret_env={"OTHER_SECRET": "other-secret-value"})
    assert r.status_code == 201, r.text
    applied(calc, "other", {"other.add", "other.env_names", "other.secret_digest"})
    assert f"CALC_TOKEN has {len(SECRET)} characters" in chat(calc, "mia", "call calc.secret_digest {}")
    names = chat(calc, "mia", "call calc.env_names {}")
    assert "CALC_TOKEN" in names and "CALC_MODE" in names and "PATH" in names
    assert "OTHER_SECRET" not in names and "ELOWEN_" not in names  # nothing of the daemon's env or another server's
    listed = json.dumps(servers(calc))
    assert SECRET not in listed and "other-secret-value" not in listed and '"CALC_TOKEN"' in listed
    home = calc.d.home
    assert SECRET not in (home / "config.toml").read_text()
    secrets = home / "plugins" / "mcp-client" / "secrets.json"
    assert secrets.stat().st_mode & 0o777 == 0o600 and SECRET in secrets.read_text()
    logs = calc.d.output() + "".join(p.read_text(errors="replace") for p in (home / "logs").glob("*"))
    assert SECRET not in logs


def test_a_hanging_server_times_out_and_the_turn_goes_on(calc: World) -> None:
    assert add_server(calc, "stuck", **stdio("hang"), timeout=2).status_code == 201
    applied(calc, "stuck", {"stuck.wait"})
    t0 = time.monotonic()
    reply = chat(calc, "mia", "call stuck.wait {}")
    assert "did not answer within 2 s" in reply, reply
    assert time.monotonic() - t0 < 60
    # the brain still answers, and other servers still work
    assert 'tool said: {"result": 7}' in chat(calc, "mia", 'call calc.add {"a": 3, "b": 4}')
    wait_for(lambda: servers(calc)["stuck"]["status"]["starts"] >= 2, what="the hung server restarted")


def test_a_crashing_server_is_a_tool_error_and_is_restarted(calc: World) -> None:
    assert add_server(calc, "boom", **stdio("crash"), timeout=10).status_code == 201
    applied(calc, "boom", {"boom.boom"})
    reply = chat(calc, "mia", "call boom.boom {}")
    assert "tool said: error:" in reply and "boom" in reply, reply
    wait_for(lambda: servers(calc)["boom"]["status"]["starts"] >= 2 and servers(calc)["boom"]["status"]["state"] == "ready", what="restart")
    assert 'tool said: {"result": 9}' in chat(calc, "mia", 'call calc.add {"a": 4, "b": 5}')


def test_a_server_that_cannot_start_is_refused_when_added(calc: World) -> None:
    r = add_server(calc, "dead", **stdio("dead"), timeout=10)
    assert r.status_code == 422 and r.json()["error"]["code"] == "mcp_unavailable", r.text
    assert "dead" not in servers(calc)
    with calc.rest("mia") as c:  # members see the servers but may not add instance-wide ones
        r = c.post("/mcp-servers", json={"name": "x", "scope": "instance", **stdio("ok")})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
        assert c.delete("/mcp-servers/calc").status_code == 403
        assert c.get("/mcp-servers").status_code == 200
    with calc.d.client(calc.tokens["agent"]) as c:
        assert c.get("/mcp-servers").status_code == 403


def test_streamable_http_server_with_a_secret_header(calc: World) -> None:
    """Elowen's own /mcp as an external streamable HTTP server, with mia's token."""
    r = add_server(calc, "self", url=calc.d.url + "/mcp", secret_headers={"Authorization": f"Bearer {calc.tokens['mia']}"}, timeout=20)
    assert r.status_code == 201, r.text
    assert calc.tokens["mia"] not in r.text
    wait_for(lambda: "self.projects_list" in servers(calc).get("self", {}).get("tools", []), what="self applied")
    reply = chat(calc, "mia", "call self.projects_list {}")
    assert reply.startswith("tool said: ") and '"items"' in reply and f'"id": {calc.project}' in reply, reply


def test_disable_ends_the_server_processes_and_remove_forgets(calc: World) -> None:
    def running() -> list[int]:
        out = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if str(SERVER).encode() in cmd and str(calc.d.home).encode() not in cmd:
                    out.append(int(pid))
        return out

    chat(calc, "mia", 'call calc.add {"a": 1, "b": 1}')
    assert running()
    with calc.rest("admin") as c:
        assert c.post("/plugins/mcp-client/disable", json={}).status_code == 200
        wait_for(lambda: not running(), what="server processes ended")
        assert c.post("/plugins/mcp-client/enable").status_code == 200
    wait_for(lambda: "calc" in servers(calc), what="re-enabled")
    with calc.rest("admin") as c:
        r = c.delete("/mcp-servers/other")
        assert r.status_code == 200, (r.text, sorted(servers(calc)), (calc.d.home / "config.toml").read_text())
    wait_for(lambda: "other" not in servers(calc), what="removed")
    assert "other" not in (calc.d.home / "plugins" / "mcp-client" / "secrets.json").read_text()


def test_instance_servers_added_at_the_same_time_are_all_kept(calc: World) -> None:
    """Two admins adding at once keep both servers: each change is applied to the servers as
    stored then, one at a time (before, each add PATCHed a whole map computed from its own
    runtime's snapshot in the background; the first restart made the others fail with 500)."""
    import concurrent.futures

    names = ["par1", "par2", "par3"]
    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        answers = list(pool.map(lambda n: add_server(calc, n, **stdio("ok"), timeout=20), names))
    codes = [r.status_code for r in answers]
    assert codes == [201] * len(names), [r.text for r in answers]
    wait_for(lambda: set(names) <= set(servers(calc)), timeout=60, what=f"all of {names} applied: {sorted(servers(calc))}")
    # the same new name twice at once: one is added, the other told the name is taken
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        same = list(pool.map(lambda _: add_server(calc, "twin", **stdio("ok"), timeout=20), range(2)))
    assert sorted(r.status_code for r in same) == [201, 409], [r.text for r in same]
    names.append("twin")
    with calc.rest("admin") as c:
        for n in names:
            assert c.delete(f"/mcp-servers/{n}").status_code == 200
            wait_for(lambda n=n: n not in servers(calc), what=f"{n} removed")  # type: ignore[misc]
    assert "calc" in servers(calc)

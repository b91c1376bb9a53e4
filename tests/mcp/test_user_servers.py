"""A user's own MCP servers and ``elowen mcp …``: the real ``elowen`` console script against a
real daemon on 127.0.0.1, the real stdio test server (``servers/calc_server.py``) and the
scripted model server as the brain's model (``conftest``).

Roles: ``mia`` and ``bob`` are members granted every tool; ``eve`` is a member granted none;
``admin``; an agent token of mia's task. A member's own server is offered to their brain turns
only, invisible to (and not removable by) anybody else, admins included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from .conftest import World
from .test_client import SERVER, chat, wait_for

pytestmark = pytest.mark.slow

ELOWEN = Path(sys.executable).parent / "elowen"
NOTES_SECRET = "n0tes-secret-value-123"


def elowen(world: World, who: str, *args: str, env: dict[str, str] | None = None, url: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real console script as ``who`` (their token in ``ELOWEN_TOKEN``)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ELOWEN_", "PIP_"))}
    token = world.tokens[who]
    base |= {"ELOWEN_URL": url or world.d.url, "ELOWEN_TOKEN": token or "", "ELOWEN_HOME": str(world.d.home.parent / f"cli-{who}")}
    return subprocess.run([str(ELOWEN), *args], env=base | (env or {}), capture_output=True, text=True, timeout=150)


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def listed(world: World, who: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(s["scope"], s["name"]): s for s in ok_json(elowen(world, who, "mcp", "list", "--json"))}


def user_folder(world: World, who: str) -> Path:
    return world.d.home / "plugins" / "mcp-client" / "users" / str(world.ids[who])


@pytest.fixture(scope="module")
def notes(world: World) -> World:
    """mia's own ``notes`` server (text resources and a secret env), added with the CLI."""
    r = elowen(
        world, "mia", "mcp", "add", "notes", "--secret-env", "NOTES_TOKEN", "--no-approval", "--json", "--", sys.executable, str(SERVER), "notes",
        env={"NOTES_TOKEN": NOTES_SECRET},
    )  # fmt: skip
    server = ok_json(r)
    assert server["scope"] == "user" and server["secret_env"] == ["NOTES_TOKEN"], server
    assert set(server["tools"]) == {"notes.add", "notes.list_resources", "notes.read_resource"}
    assert server["resources"] == ["notes://readme", "notes://todo"]
    assert NOTES_SECRET not in r.stdout + r.stderr
    return world


def test_a_members_own_server_serves_only_their_brain(notes: World) -> None:
    assert 'tool said: {"result": 5}' in chat(notes, "mia", 'call notes.add {"a": 2, "b": 3}')
    # bob's turns are not offered mia's tool: the model's call of it is an unknown tool
    assert "unknown tool" in chat(notes, "bob", 'call notes.add {"a": 2, "b": 3}')
    assert ("user", "notes") in listed(notes, "mia")
    assert not any(name == "notes" for _, name in listed(notes, "bob"))
    assert not any(name == "notes" for _, name in listed(notes, "admin"))  # admins do not see it either


def test_resources_are_readable_by_the_brain_the_api_and_the_cli(notes: World) -> None:
    reply = chat(notes, "mia", 'call notes.read_resource {"uri": "notes://readme"}')
    assert "buy milk" in reply, reply
    assert "notes://todo" in chat(notes, "mia", "call notes.list_resources {}")
    items = ok_json(elowen(notes, "mia", "mcp", "resources", "notes", "--json"))
    assert [i["uri"] for i in items] == ["notes://readme", "notes://todo"] and items[0]["mime_type"] == "text/plain"
    r = elowen(notes, "mia", "mcp", "read", "notes", "notes://readme")
    assert r.returncode == 0 and r.stdout.strip() == "The notes of the test server: buy milk.", r.stderr
    missing = elowen(notes, "mia", "mcp", "read", "notes", "notes://nope")
    assert missing.returncode == 1 and "Unknown resource" in missing.stderr, missing.stderr
    # a server's error answer does not break its connection
    assert 'tool said: {"result": 3}' in chat(notes, "mia", 'call notes.add {"a": 1, "b": 2}')
    assert listed(notes, "mia")[("user", "notes")]["status"]["starts"] == 1


def test_another_member_can_neither_see_use_nor_remove_it(notes: World) -> None:
    for args in (("mcp", "rm", "notes"), ("mcp", "tools", "notes"), ("mcp", "resources", "notes"), ("mcp", "read", "notes", "notes://readme")):
        for who in ("bob", "admin"):
            r = elowen(notes, who, *args)
            assert r.returncode == 1 and "no MCP server 'notes'" in r.stderr, (who, args, r.stderr)
    with notes.d.client(notes.tokens["agent"]) as c:  # mia's own task's agent token: 403
        assert c.get("/mcp-servers").status_code == 403
        assert c.get("/mcp-servers/notes/tools").status_code == 403
        assert c.delete("/mcp-servers/notes").status_code == 403
        assert c.post("/mcp-servers", json={"name": "x", "url": "http://127.0.0.1:9/mcp"}).status_code == 403
    assert ("user", "notes") in listed(notes, "mia")


def test_two_members_may_each_have_a_server_of_the_same_name(notes: World) -> None:
    r = elowen(notes, "bob", "mcp", "add", "notes", "--no-approval", "--", sys.executable, str(SERVER), "ok")
    assert r.returncode == 0 and "added user MCP server notes: 3 tool(s)" in r.stdout, r.stderr
    assert "CALC_TOKEN has 0 characters" in chat(notes, "bob", "call notes.secret_digest {}")
    assert "unknown tool" in chat(notes, "mia", "call notes.secret_digest {}")
    names = chat(notes, "bob", "call notes.env_names {}")
    assert "NOTES_TOKEN" not in names  # mia's secret never reaches bob's process
    assert 'tool said: {"result": 7}' in chat(notes, "mia", 'call notes.add {"a": 3, "b": 4}')
    r = elowen(notes, "bob", "mcp", "rm", "notes", "--json")
    assert ok_json(r) == {"name": "notes", "scope": "user", "removed": True}
    assert "unknown tool" in chat(notes, "bob", 'call notes.add {"a": 1, "b": 1}')
    assert ("user", "notes") in listed(notes, "mia")


def test_secrets_are_0600_and_never_shown_back(notes: World) -> None:
    folder = user_folder(notes, "mia")
    secrets, servers = folder / "secrets.json", folder / "servers.json"
    assert secrets.stat().st_mode & 0o777 == 0o600 and servers.stat().st_mode & 0o777 == 0o600
    assert folder.stat().st_mode & 0o777 == 0o700
    assert NOTES_SECRET in secrets.read_text() and NOTES_SECRET not in servers.read_text()
    shown = elowen(notes, "mia", "mcp", "list", "--json").stdout + elowen(notes, "mia", "mcp", "list").stdout
    assert "NOTES_TOKEN" in shown and NOTES_SECRET not in shown
    home = notes.d.home
    assert NOTES_SECRET not in (home / "config.toml").read_text()
    logs = notes.d.output() + "".join(p.read_text(errors="replace") for p in (home / "logs").glob("*") if p.is_file())
    assert NOTES_SECRET not in logs


def test_what_a_member_may_not_add(notes: World) -> None:
    r = elowen(notes, "mia", "mcp", "add", "wide", "--scope", "instance", "--", sys.executable, str(SERVER), "ok")
    assert r.returncode == 1 and "only an admin may add an instance-wide" in r.stderr, r.stderr
    r = elowen(notes, "eve", "mcp", "add", "mine", "--", sys.executable, str(SERVER), "ok")  # eve is granted no terminal.run
    assert r.returncode == 1 and "terminal.run" in r.stderr, r.stderr
    r = elowen(notes, "mia", "mcp", "add", "notes", "--", sys.executable, str(SERVER), "ok")
    assert r.returncode == 1 and "send replace: true" in r.stderr, r.stderr
    r = elowen(notes, "mia", "mcp", "add", "files", "--", sys.executable, str(SERVER), "ok")  # the brain's files.* tools
    assert r.returncode == 1 and "namespace of the tools of plugin 'brain'" in r.stderr, r.stderr
    r = elowen(notes, "mia", "mcp", "add", "dead", "--", sys.executable, str(SERVER), "dead")
    assert r.returncode == 1 and "mcp_unavailable" not in r.stdout and "dead" in r.stderr, r.stderr
    assert not any(name == "dead" for _, name in listed(notes, "mia"))
    with notes.rest("mia") as c:  # NUL would reach the process' argv or environment: refused as bad input
        for body in (
            {"name": "nul", "command": sys.executable + "\x00", "args": [str(SERVER), "ok"]},
            {"name": "nul", "command": sys.executable, "args": [str(SERVER), "ok"], "secret_env": {"T": "a\x00b"}},
        ):
            r = c.post("/mcp-servers", json=body)
            assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error" and "NUL" in r.text, r.text


def test_cli_usage_errors_exit_2_and_an_unreachable_daemon_3(notes: World) -> None:
    for args in (
        ("mcp", "add", "x"),  # neither a command nor a URL
        ("mcp", "add", "x", "--url", "http://127.0.0.1:9/mcp", "--", "cmd"),  # both
        ("mcp", "add", "x", "--secret-env", "TOKEN=plain-value", "--", "cmd"),  # a secret typed on the command line
        ("mcp", "add", "x", "--secret-env", "UNSET_VAR_FOR_TEST", "--", "cmd"),
        ("mcp", "add", "x", "-e", "NOEQUALS", "--", "cmd"),
        ("mcp", "add", "x", "--url", "http://127.0.0.1:9/mcp", "--secret-header", "Authorization"),
        ("mcp", "rm", "x", "--scope", "everyone"),
        ("mcp", "tools"),
    ):
        r = elowen(notes, "mia", *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert "plain-value" not in elowen(notes, "mia", "mcp", "add", "x", "--secret-env", "TOKEN=plain-value", "--", "cmd").stderr
    r = elowen(notes, "mia", "mcp", "list", url="http://127.0.0.1:9")
    assert r.returncode == 3 and "cannot reach" in r.stderr, r.stderr


def test_admin_adds_and_removes_an_instance_wide_server_with_the_cli(notes: World, tmp_path: Path) -> None:
    token = tmp_path / "token.txt"
    token.write_text(f"Bearer {notes.tokens['mia']}\n")
    r = elowen(notes, "admin", "mcp", "add", "team", "--no-approval", "--json", "--", sys.executable, str(SERVER), "ok")
    server = ok_json(r)
    assert server["scope"] == "instance" and "team.add" in server["tools"]  # the CLI waited until it was applied
    for who in ("mia", "bob"):
        assert ("instance", "team") in listed(notes, who)
        assert 'tool said: {"result": 11}' in chat(notes, who, 'call team.add {"a": 5, "b": 6}')
    tools = ok_json(elowen(notes, "bob", "mcp", "tools", "team", "--json"))
    assert {t["name"] for t in tools} == {"add", "env_names", "secret_digest"}
    # a member cannot take an instance-wide name, nor remove the instance's server
    r = elowen(notes, "mia", "mcp", "add", "team", "--", sys.executable, str(SERVER), "ok")
    assert r.returncode == 1 and "instance-wide MCP server is named 'team'" in r.stderr, r.stderr
    r = elowen(notes, "mia", "mcp", "rm", "team")
    assert r.returncode == 1 and "only an admin" in r.stderr, r.stderr
    # streamable HTTP with a secret header read from a file (Elowen's own /mcp as mia)
    r = elowen(notes, "mia", "mcp", "add", "self", "--url", notes.d.url + "/mcp", "--secret-header", f"Authorization=@{token}", "--no-approval", "--json")
    assert "self.projects_list" in ok_json(r)["tools"] and notes.tokens["mia"] not in r.stdout
    assert f'"id": {notes.project}' in chat(notes, "mia", "call self.projects_list {}")
    assert ok_json(elowen(notes, "mia", "mcp", "rm", "self", "--json"))["removed"] is True
    r = elowen(notes, "admin", "mcp", "rm", "team")
    assert r.returncode == 0 and "removed instance MCP server team" in r.stdout, r.stderr
    assert ("instance", "team") not in listed(notes, "mia")
    assert "unknown tool" in chat(notes, "mia", 'call team.add {"a": 1, "b": 1}')


def test_removing_ones_server_ends_its_process(notes: World) -> None:
    def running() -> bool:
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if str(SERVER).encode() in cmd and cmd.endswith(b"notes\x00"):
                    return True
        return False

    chat(notes, "mia", 'call notes.add {"a": 1, "b": 1}')
    assert running()
    r = elowen(notes, "mia", "mcp", "rm", "notes")
    assert r.returncode == 0 and "removed user MCP server notes" in r.stdout, r.stderr
    wait_for(lambda: not running(), what="mia's server process ended")
    assert "unknown tool" in chat(notes, "mia", 'call notes.add {"a": 1, "b": 1}')
    assert "notes" not in json.loads((user_folder(notes, "mia") / "servers.json").read_text())
    assert "notes" not in (user_folder(notes, "mia") / "secrets.json").read_text()


def test_approvals_and_grants_apply_to_ones_own_tools(notes: World, tmp_path: Path) -> None:
    # needs_approval (the default): mia's call waits for mia's decision, like a builtin tool's
    r = elowen(notes, "mia", "mcp", "add", "asks", "--", sys.executable, str(SERVER), "ok")
    assert r.returncode == 0, r.stderr
    replies: list[str] = []
    thread = threading.Thread(target=lambda: replies.append(chat(notes, "mia", 'call asks.add {"a": 20, "b": 22}')))
    thread.start()
    with notes.rest("mia") as c:
        pending = wait_for(lambda: c.get("/brain/approvals").json()["items"], what="mia's approval")
        assert pending[0]["tool"] == "asks.add" and pending[0]["arguments"] == {"a": 20, "b": 22}, pending
        with notes.rest("bob") as b:
            assert b.get("/brain/approvals").json()["items"] == []
            assert b.post(f"/brain/approvals/{pending[0]['id']}", json={"decision": "allow"}).status_code == 404
        assert c.post(f"/brain/approvals/{pending[0]['id']}", json={"decision": "allow"}).json()["state"] == "allowed"
    thread.join(60)
    assert replies and 'tool said: {"result": 42}' in replies[0], replies
    assert elowen(notes, "mia", "mcp", "rm", "asks").returncode == 0
    # grants: eve (granted no tool) may add a URL server, but her turns are not offered its
    # tools until an admin grants them
    token = tmp_path / "eve-token"
    token.write_text(f"Bearer {notes.tokens['eve']}")
    r = elowen(notes, "eve", "mcp", "add", "evemcp", "--url", notes.d.url + "/mcp", "--secret-header", f"Authorization=@{token}", "--no-approval", "--json")
    assert "evemcp.projects_list" in ok_json(r)["tools"]
    with notes.rest("admin") as admin:
        eve_id = next(u["id"] for u in admin.get("/users").json()["items"] if u["name"] == "eve")
        denied = chat(notes, "eve", "call evemcp.projects_list {}")
        assert denied == "reply to: call evemcp.projects_list {}", denied  # offered no tool at all
        assert admin.patch(f"/users/{eve_id}", json={"tool_grants": ["evemcp.*"]}).status_code == 200
        reply = chat(notes, "eve", "call evemcp.projects_list {}")
        assert reply.startswith("tool said: ") and '"items": []' in reply, reply  # eve sees no project
        admin.patch(f"/users/{eve_id}", json={"tool_grants": []}).raise_for_status()


def test_revoking_terminal_run_hides_stdio_servers_and_a_removed_user_is_forgotten(notes: World) -> None:
    with notes.rest("admin") as admin:
        u = admin.post("/users", json={"name": "zed", "role": "member", "tool_grants": ["*"]})
        assert u.status_code == 201, u.text
        notes.tokens["zed"], notes.ids["zed"] = u.json()["token"], int(u.json()["user"]["id"])
        r = elowen(notes, "zed", "mcp", "add", "zcalc", "--no-approval", "--", sys.executable, str(SERVER), "ok")
        assert r.returncode == 0, r.stderr
        assert 'tool said: {"result": 2}' in chat(notes, "zed", 'call zcalc.add {"a": 1, "b": 1}')
        # the rule a member's stdio server was added under stops holding: its tools go
        admin.patch(f"/users/{notes.ids['zed']}", json={"tool_grants": ["zcalc.*", "files.read"]}).raise_for_status()
        assert "unknown tool" in chat(notes, "zed", 'call zcalc.add {"a": 1, "b": 1}')
        with notes.rest("zed") as zed:  # nor does REST start it
            for path in ("/mcp-servers/zcalc/tools", "/mcp-servers/zcalc/resources"):
                r = zed.get(path)
                assert r.status_code == 403 and "terminal.run" in r.text, (path, r.text)
        admin.patch(f"/users/{notes.ids['zed']}", json={"tool_grants": ["*"]}).raise_for_status()
        assert 'tool said: {"result": 4}' in chat(notes, "zed", 'call zcalc.add {"a": 2, "b": 2}')
        folder = user_folder(notes, "zed")
        assert (folder / "servers.json").exists()
        assert admin.delete(f"/users/{notes.ids['zed']}").status_code in (200, 204)
    wait_for(lambda: not folder.exists(), what="zed's servers forgotten")

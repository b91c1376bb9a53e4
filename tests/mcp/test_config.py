"""``mcp-client`` server definitions: clear errors naming the field, tool names, the secret
store's file mode. (No daemon: pure functions and one file.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen_builtins.mcp_client.config import McpConfigError, SecretStore, UserStore, parse_server, parse_servers, tool_name


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("Bad", {"command": "x"}, "a server name is"),
        ("s", {}, "exactly one of command"),
        ("s", {"command": "x", "url": "http://h"}, "exactly one of command"),
        ("s", {"url": "ftp://h"}, "servers.s.url"),
        ("s", {"command": "x", "timeout": 0}, "servers.s.timeout"),
        ("s", {"command": "x", "args": "a b"}, "servers.s.args"),
        ("s", {"command": "x", "env": {"A": 1}}, "servers.s.env"),
        ("s", {"command": "x", "needs_approval": "yes"}, "servers.s.needs_approval"),
        ("s", {"command": "x", "tools": [{"description": "no name"}]}, "servers.s.tools"),
        ("s", {"command": "x", "resources": [{"name": "no uri"}]}, "servers.s.resources"),
        ("s", {"command": "py\x00thon"}, "servers.s.command must be a string without NUL"),
        ("s", {"command": "x", "args": ["a\x00b"]}, "servers.s.args must not contain NUL"),
        ("s", {"command": "x", "env": {"A": "1\x002"}}, "servers.s.env must not contain NUL"),
        ("s", {"url": "http://h/\x00"}, "servers.s.url"),
        ("s", {"url": "http://h", "headers": {"X-A": "a\x00"}}, "servers.s.headers must not contain NUL"),
    ],
)
def test_bad_definitions_name_the_field(name: str, raw: dict, message: str) -> None:
    with pytest.raises(McpConfigError, match=message):
        parse_server(name, raw)


def test_valid_definitions_and_errors_side_by_side() -> None:
    servers, errors = parse_servers({"calc": {"command": "python", "args": ["s.py"], "secret_env": ["TOKEN"]}, "web": {"url": "https://x/mcp"}, "bad": {}})
    assert set(servers) == {"calc", "web"} and set(errors) == {"bad"}
    assert servers["calc"].transport == "stdio" and servers["web"].transport == "http"
    assert servers["calc"].public()["secret_env"] == ["TOKEN"] and "TOKEN" not in servers["calc"].public()["env"]


def test_tool_names_are_namespaced_and_safe() -> None:
    assert tool_name("gh", "create_issue") == "gh.create_issue"
    assert tool_name("gh", "Search Repos/v2") == "gh.search_repos_v2"
    assert tool_name("gh", "***") == "gh.tool"


def test_secret_store_is_0600_and_forgets(tmp_path: Path) -> None:
    store = SecretStore(tmp_path / "plugins" / "mcp-client" / "secrets.json")
    store.put("calc", {"TOKEN": "v"})
    assert store.path.stat().st_mode & 0o777 == 0o600 and store.get("calc") == {"TOKEN": "v"}
    store.put("calc", None)
    assert store.get("calc") == {} and "calc" not in store.path.read_text()
    store.put("a", {"T": "1"})
    store.put("b", {"T": "2"})
    store.keep({"b", "gone"})
    assert store.get("a") == {} and store.get("b") == {"T": "2"} and store.path.stat().st_mode & 0o777 == 0o600


def test_resources_add_the_two_resource_tools_unless_the_server_has_such_a_tool() -> None:
    plain = parse_server("n", {"command": "x", "tools": [{"name": "add"}]})
    assert plain.brain_tools() == ["n.add"] and plain.public()["resources"] is None
    docs = parse_server("n", {"command": "x", "tools": [{"name": "read_resource"}], "resources": [{"uri": "notes://a"}]}, "user")
    assert docs.brain_tools() == ["n.read_resource", "n.list_resources"]
    assert docs.public()["resources"] == ["notes://a"] and docs.public()["scope"] == "user"
    assert docs.stored()["resources"] == [{"uri": "notes://a"}] and "scope" not in docs.stored()


def test_user_store_keeps_each_users_servers_apart_0600(tmp_path: Path) -> None:
    store = UserStore(tmp_path / "users")
    store.secrets(7).put("calc", {"TOKEN": "seven"})
    store.put(7, "calc", {"command": "x"})
    store.put(8, "calc", {"url": "https://x/mcp"})
    assert store.raw(7) == {"calc": {"command": "x"}} and store.raw(8) == {"calc": {"url": "https://x/mcp"}}
    assert store.secrets(8).get("calc") == {}
    for path in (store.folder(7) / "servers.json", store.folder(7) / "secrets.json"):
        assert path.stat().st_mode & 0o777 == 0o600
    assert store.folder(7).stat().st_mode & 0o777 == 0o700
    store.put(7, "calc", None)  # forgetting a server forgets its secrets
    assert store.raw(7) == {} and store.secrets(7).get("calc") == {} and store.raw(8) != {}

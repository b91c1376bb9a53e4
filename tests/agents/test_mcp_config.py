"""OpenCode and Kilo get Elowen's MCP server through their inline config variable, the token
named as ``{env:ELOWEN_TOKEN}`` (the real CLIs are exercised in tests/e2e/test_mcp_config_e2e.py)."""

from __future__ import annotations

import json

import pytest

from elowen_builtins.claude_code.plugin import ClaudeProvider
from elowen_builtins.kilo.plugin import KiloProvider
from elowen_builtins.opencode.plugin import OpenCodeProvider
from elowen_sdk.providers import Channels

CHANNELS = Channels(permission_url="http://127.0.0.1:9/agent/permission", mcp_url="http://127.0.0.1:9/mcp")
PROVIDERS = [(OpenCodeProvider, "OPENCODE_CONFIG_CONTENT"), (KiloProvider, "KILO_CONFIG_CONTENT")]


@pytest.mark.parametrize(("cls", "var"), PROVIDERS)
def test_the_inline_config_names_the_server_and_the_token_by_name_only(cls: type, var: str) -> None:
    p = cls({})
    env = p.channel_env(p.wanted_channels(CHANNELS))
    assert list(env) == [var]
    server = json.loads(env[var])["mcp"]["elowen"]
    assert server == {
        "type": "remote",
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer {env:ELOWEN_TOKEN}"},
        "oauth": False,
        "enabled": True,
    }
    # nothing on the command line: the argv is the plain one
    assert p.build_command("do it", channels=CHANNELS) == [cls.default_binary, "--prompt=do it"]


@pytest.mark.parametrize(("cls", "var"), PROVIDERS)
def test_mcp_false_no_mcp_plugin_or_no_token_configure_nothing(cls: type, var: str) -> None:
    assert cls({"mcp": False}).channel_env(cls({"mcp": False}).wanted_channels(CHANNELS)) == {}
    p = cls({})
    assert p.channel_env(p.wanted_channels(Channels(permission_url=CHANNELS.permission_url))) == {}
    assert p.channel_env(p.wanted_channels(None)) == {}


@pytest.mark.parametrize(("cls", "var"), PROVIDERS)
def test_an_inline_config_in_the_env_setting_is_kept_and_extended(cls: type, var: str) -> None:
    own = {"model": "x/y", "mcp": {"mine": {"type": "local", "command": ["srv"]}}}
    p = cls({"env": {var: json.dumps(own)}})
    merged = json.loads(p.channel_env(p.wanted_channels(CHANNELS))[var])
    assert merged["model"] == "x/y" and set(merged["mcp"]) == {"mine", "elowen"}
    broken = cls({"env": {var: "{not json"}})
    assert broken.channel_env(broken.wanted_channels(CHANNELS)) == {}


def test_other_providers_take_no_channel_environment() -> None:
    p = ClaudeProvider({})
    assert p.channel_env(p.wanted_channels(CHANNELS)) == {}

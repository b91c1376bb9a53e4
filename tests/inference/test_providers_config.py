"""Provider add / list / remove on a real config.toml through the kernel's Settings."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest

from elowen.core.settings import Settings
from elowen_builtins.inference import ProviderConfigError, UnknownProvider, add_provider, list_providers, remove_provider
from elowen_builtins.inference.config import parse_provider


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[daemon]\nport = 4411\n\n[plugins.tmux]\nenabled = true\n")
    s = Settings(home)
    s.load()
    return s


def test_add_list_remove_round_trip(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    add_provider(settings, "ollama", "openai", "http://127.0.0.1:11434/v1/")
    add_provider(settings, "claude", "anthropic", "https://api.anthropic.com", api_key_env="ELOWEN_TEST_ANTHROPIC_KEY")
    add_provider(settings, "tiny", "local", None)
    raw = settings.path.read_text()
    doc = tomllib.loads(raw)
    assert doc["daemon"] == {"port": 4411} and doc["plugins"]["tmux"] == {"enabled": True}  # untouched
    assert doc["inference"]["providers"] == {
        "ollama": {"kind": "openai", "base_url": "http://127.0.0.1:11434/v1"},
        "claude": {"kind": "anthropic", "base_url": "https://api.anthropic.com", "api_key_env": "ELOWEN_TEST_ANTHROPIC_KEY"},
        "tiny": {"kind": "local"},
    }
    assert stat.S_IMODE(settings.path.stat().st_mode) == 0o600

    monkeypatch.setenv("ELOWEN_TEST_ANTHROPIC_KEY", "sk-ant-secret-value")
    rows = list_providers(settings)
    assert [(r["name"], r["kind"], r["key_present"], r["error"]) for r in rows] == [
        ("claude", "anthropic", True, None),
        ("ollama", "openai", False, None),
        ("tiny", "local", False, None),
    ]
    assert "sk-ant-secret-value" not in repr(rows) and "sk-ant-secret-value" not in settings.path.read_text()

    with_builtin = list_providers(settings, include_builtin=True)
    assert [(r["name"], r["source"]) for r in with_builtin] == [
        ("claude", "settings"),
        ("local", "builtin"),
        ("ollama", "settings"),
        ("tiny", "settings"),
    ]
    remove_provider(settings, "ollama")
    assert [r["name"] for r in list_providers(settings)] == ["claude", "tiny"]
    remove_provider(settings, "claude")
    remove_provider(settings, "tiny")
    assert "inference" not in tomllib.loads(settings.path.read_text())
    assert list_providers(settings) == [] and [r["name"] for r in list_providers(settings, include_builtin=True)] == ["local"]
    with pytest.raises(UnknownProvider):
        remove_provider(settings, "tiny")


@pytest.mark.parametrize(
    ("name", "kind", "url", "env", "message"),
    [
        ("Bad Name", "openai", "http://x", None, "bad provider name"),
        ("a/b", "openai", "http://x", None, "bad provider name"),
        ("ok", "gemini", "http://x", None, "kind must be one of"),
        ("ok", "openai", None, None, "base_url is required"),
        ("ok", "openai", "ftp://host/v1", None, "http:// or https://"),
        ("ok", "openai", "not a url", None, "http:// or https://"),
        ("ok", "openai", "https://user:pw@host/v1", None, "must not contain credentials"),
        ("ok", "openai", "https://host/v1?key=1", None, "query or fragment"),
        ("ok", "openai", "https://host/v1", "sk-proj-abc123", "NAME of an environment variable"),
    ],
)
def test_add_validates(settings: Settings, name: str, kind: str, url: str | None, env: str | None, message: str) -> None:
    before = settings.path.read_bytes()
    with pytest.raises(ProviderConfigError, match=message):
        add_provider(settings, name, kind, url, env)
    assert settings.path.read_bytes() == before


def test_add_refuses_duplicates_unless_replace(settings: Settings) -> None:
    add_provider(settings, "p", "openai", "http://127.0.0.1:8000/v1")
    with pytest.raises(ProviderConfigError, match="already exists"):
        add_provider(settings, "p", "openai", "http://127.0.0.1:9000/v1")
    add_provider(settings, "p", "openai", "http://127.0.0.1:9000/v1", replace=True)
    assert list_providers(settings)[0]["base_url"] == "http://127.0.0.1:9000/v1"


def test_hand_written_invalid_table_is_listed_with_its_error(settings: Settings) -> None:
    settings.path.write_text(
        '[inference.providers.bad]\nkind = "openai"\nbase_url = "http://h/v1"\nheaders = { Authorization = "Bearer sk-x" }\n'
        '[inference.providers.good]\nkind = "openai"\nbase_url = "http://h/v1"\n'
    )
    settings.load()
    rows = {r["name"]: r for r in list_providers(settings)}
    assert "carry credentials" in rows["bad"]["error"] and rows["good"]["error"] is None


def test_parse_provider_defaults_and_bounds() -> None:
    cfg = parse_provider("p", {"kind": "anthropic", "base_url": "https://api.anthropic.com/"})
    assert (cfg.base_url, cfg.timeout, cfg.max_retries, cfg.backoff, cfg.max_retry_time) == ("https://api.anthropic.com", 60.0, 2, 0.5, 60.0)
    for bad in ({"timeout": 0}, {"max_retries": -1}, {"max_retries": 1.5}, {"timeout": True}, {"surprise": 1}):
        with pytest.raises(ProviderConfigError):
            parse_provider("p", {"kind": "openai", "base_url": "http://h/v1", **bad})
    with pytest.raises(ProviderConfigError, match="not both"):
        parse_provider("p", {"kind": "openai", "base_url": "http://h/v1", "api_key_env": "K", "api_key_file": "/k"})

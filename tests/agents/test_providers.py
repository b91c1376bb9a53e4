"""The four provider plugins: command lines, settings, environment, trust pre-seeding into real
temp HOMEs, session-id capture and validation from real files and real SQLite databases."""

from __future__ import annotations

import json
import logging
import os
import re
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import apsw
import pytest

from elowen_builtins.claude_code import plugin as claude_plugin
from elowen_builtins.claude_code.plugin import SKIP_DIALOG_SETTINGS, ClaudeProvider
from elowen_builtins.codex import plugin as codex_plugin
from elowen_builtins.codex.plugin import CodexProvider
from elowen_builtins.kilo import plugin as kilo_plugin
from elowen_builtins.kilo.plugin import KiloProvider
from elowen_builtins.opencode import plugin as opencode_plugin
from elowen_builtins.opencode.plugin import OpenCodeProvider
from elowen_sdk import Executor, load_manifest
from elowen_sdk.providers import ProviderError, ProviderSettings

PLUGINS = Path(__file__).resolve().parents[2] / "builtin_plugins"
UUID = "d6fef6f0-a006-457c-bfa8-75f24ff54a0d"
CODEX_ID = "01a22c6c-6d42-7891-bfa0-932700d6bf83"
SES = "ses_dd3932592ffefZClfbD5qc0h4G"
GARBAGE = ["management", "found", "", "ses_", "../../etc/passwd", UUID.upper(), UUID + "x", "*"]


# --------------------------------------------------------------------------- command lines


def test_claude_command_lines() -> None:
    p = ClaudeProvider({})
    assert p.build_command("do it", model="sonnet", session_id=UUID) == ["claude", "--model", "sonnet", "--session-id", UUID, "--", "do it"]
    assert p.build_command("go on", model="opus", session_id=UUID, resume=True, skip_permissions=True, extra_args=["--verbose"]) == [
        "claude",
        "--model",
        "opus",
        "--resume",
        UUID,
        "--dangerously-skip-permissions",
        "--settings",
        SKIP_DIALOG_SETTINGS,
        "--verbose",
        "--",
        "go on",
    ]
    assert p.build_command("-R starts with a dash", model=None) == ["claude", "--", "-R starts with a dash"]
    assert p.build_command("", model=None, binary="/opt/claude") == ["/opt/claude"]


def test_codex_command_lines() -> None:
    p = CodexProvider({})
    assert p.build_command("task", model="gpt-5") == ["codex", "-m", "gpt-5", "-c", "allow_login_shell=false", "--", "task"]
    # resume is a subcommand and comes before every flag
    assert p.build_command("continue", model="gpt-5", session_id=CODEX_ID, resume=True, skip_permissions=True) == [
        "codex",
        "resume",
        CODEX_ID,
        "-m",
        "gpt-5",
        "--dangerously-bypass-approvals-and-sandbox",
        "-c",
        "allow_login_shell=false",
        "--",
        "continue",
    ]
    with pytest.raises(ProviderError):
        p.build_command("x", model=None, session_id=CODEX_ID)  # codex picks its own id


def test_opencode_and_kilo_command_lines() -> None:
    for cls, binary in ((OpenCodeProvider, "opencode"), (KiloProvider, "kilo")):
        p = cls({})
        assert p.build_command("hi", model="fake/fake-model") == [binary, "--model", "fake/fake-model", "--prompt=hi"]
        assert p.build_command("more", model=None, session_id=SES, resume=True) == [binary, "-s", SES, "--prompt=more"]
        # skip-permissions never changes the argv: OpenCode takes it from the environment, Kilo ignores it
        assert p.build_command("x", model=None, skip_permissions=True) == p.build_command("x", model=None, skip_permissions=False)


def test_settings_from_config_apply() -> None:
    cfg = {
        "binary": "/usr/local/bin/claude",
        "extra_args": ["--add-dir", "/data"],
        "skip_permissions": True,
        "resume_sessions": False,
        "default_model": "haiku",
    }
    p = ClaudeProvider(cfg)
    assert p.settings == ProviderSettings("/usr/local/bin/claude", ("--add-dir", "/data"), True, False, "haiku")
    assert p.build_command("t", extra_args=["--debug"]) == [
        "/usr/local/bin/claude",
        "--model",
        "haiku",
        "--dangerously-skip-permissions",
        "--settings",
        SKIP_DIALOG_SETTINGS,
        "--add-dir",
        "/data",
        "--debug",
        "--",
        "t",
    ]
    # explicit arguments win over the settings
    assert p.build_command("t", model="opus", skip_permissions=False, binary="claude")[:3] == ["claude", "--model", "opus"]
    assert "--dangerously-skip-permissions" not in p.build_command("t", skip_permissions=False)
    with pytest.raises(ProviderError):
        ClaudeProvider({"extra_args": "--oops"})


@pytest.mark.parametrize("provider", [ClaudeProvider({}), CodexProvider({}), OpenCodeProvider({}), KiloProvider({})], ids=lambda p: p.name)
def test_resume_needs_a_well_formed_id(provider) -> None:
    with pytest.raises(ProviderError):
        provider.build_command("x", model=None, resume=True)
    for bad in ("management", "found"):
        with pytest.raises(ProviderError):
            provider.build_command("x", model=None, session_id=bad, resume=True)


# --------------------------------------------------------------------------- environment


def test_env_for(caplog: pytest.LogCaptureFixture) -> None:
    claude = ClaudeProvider({}).env_for()
    assert claude["DISABLE_AUTOUPDATER"] == "1" and claude["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert claude["DISABLE_TELEMETRY"] == "1" and claude["DISABLE_ERROR_REPORTING"] == "1"
    oc = OpenCodeProvider({})
    assert oc.env_for()["OPENCODE_DISABLE_AUTOUPDATE"] == "1" and "OPENCODE_PERMISSION" not in oc.env_for()
    assert json.loads(oc.env_for(skip_permissions=True)["OPENCODE_PERMISSION"]) == {"*": "allow"}
    assert "OPENCODE_PERMISSION" in OpenCodeProvider({"skip_permissions": True}).env_for()
    kilo = KiloProvider({"skip_permissions": True})
    with caplog.at_level(logging.WARNING):
        env = kilo.env_for()
    assert env == KiloProvider({}).env_for()  # the no-op
    assert env["KILO_NO_DAEMON"] == "1" and env["KILO_TELEMETRY_LEVEL"] == "off"
    assert "skip_permissions is ignored" in caplog.text


# --------------------------------------------------------------------------- trust pre-seeding


def test_claude_trust_merges_into_existing_home_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work" / "repo"
    work.mkdir(parents=True)
    cfg = home / ".claude.json"
    cfg.write_text(
        json.dumps(
            {"numStartups": 7, "theme": "dark", "projects": {"/other": {"hasTrustDialogAccepted": False, "x": 1}, str(work): {"allowedTools": ["Bash"]}}}
        )
    )
    os.chmod(cfg, 0o640)
    written = ClaudeProvider({}).preseed_trust(work, env={"HOME": str(home)})
    assert written == cfg
    data = json.loads(cfg.read_text())
    assert data["numStartups"] == 7 and data["theme"] == "dark" and data["hasCompletedOnboarding"] is True
    assert data["projects"]["/other"] == {"hasTrustDialogAccepted": False, "x": 1}
    assert data["projects"][str(work)] == {"allowedTools": ["Bash"], "hasTrustDialogAccepted": True}
    assert cfg.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in home.iterdir() if p.name.startswith(".claude.json.")] in ([], [".claude.json.elowen-lock"])


def test_claude_trust_honours_config_dir_and_symlinks(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    confdir = tmp_path / "claude-config"
    written = ClaudeProvider({}).preseed_trust(link, env={"HOME": str(tmp_path / "unused"), "CLAUDE_CONFIG_DIR": str(confdir)})
    assert written == confdir / ".claude.json"
    projects = json.loads(written.read_text())["projects"]
    assert projects[str(link)]["hasTrustDialogAccepted"] and projects[str(real)]["hasTrustDialogAccepted"]
    assert not (tmp_path / "unused" / ".claude.json").exists()


def test_trust_refuses_to_clobber_unparseable_config(tmp_path: Path) -> None:
    cfg = tmp_path / ".claude.json"
    cfg.write_text("{not json")
    with pytest.raises(ProviderError):
        ClaudeProvider({}).preseed_trust(tmp_path, env={"HOME": str(tmp_path)})
    assert cfg.read_text() == "{not json"
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text("model = [unclosed")
    with pytest.raises(ProviderError):
        CodexProvider({}).preseed_trust(tmp_path, env={"CODEX_HOME": str(codex_home)})
    assert (codex_home / "config.toml").read_text() == "model = [unclosed"


def test_codex_trust_merges_into_codex_home_config(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    work = tmp_path / "repo"
    work.mkdir()
    (codex_home / "config.toml").write_text(
        'model_provider = "fake"\napproval_policy = "on-request"\n\n[model_providers.fake]\nbase_url = "http://127.0.0.1:9/v1"\nwire_api = "responses"\n\n'
        '[projects."/elsewhere"]\ntrust_level = "untrusted"\n\n[features]\ndaemon_auto_start = false\n'
    )
    written = CodexProvider({}).preseed_trust(work, env={"CODEX_HOME": str(codex_home)})
    data = tomllib.loads(written.read_text())
    assert data["model_provider"] == "fake" and data["model_providers"]["fake"]["wire_api"] == "responses"
    assert data["features"] == {"daemon_auto_start": False}
    assert data["projects"]["/elsewhere"] == {"trust_level": "untrusted"}
    assert data["projects"][str(work)] == {"trust_level": "trusted"}
    # without CODEX_HOME: $HOME/.codex/config.toml of the spawned process
    home = tmp_path / "home"
    default = CodexProvider({}).preseed_trust(work, env={"HOME": str(home), "CODEX_HOME": ""})
    assert default == home / ".codex" / "config.toml"
    assert tomllib.loads(default.read_text())["projects"][str(work)]["trust_level"] == "trusted"


def test_opencode_family_has_no_trust_file(tmp_path: Path) -> None:
    assert OpenCodeProvider({}).preseed_trust(tmp_path, env={"HOME": str(tmp_path)}) is None
    assert KiloProvider({}).preseed_trust(tmp_path, env={"HOME": str(tmp_path)}) is None
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- session ids


def test_claude_session_ids(tmp_path: Path) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work" / "my.repo"
    work.mkdir(parents=True)
    env = {"HOME": str(home)}
    p = ClaudeProvider({})
    sid = p.new_session_id()
    assert p.id_pattern.match(sid) and sid != p.new_session_id()
    assert not p.validate_session_id(sid, workdir=work, env=env)  # no transcript yet
    # current naming: every non-alphanumeric character of the real cwd becomes "-"
    folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(work.resolve()))
    folder.mkdir(parents=True)
    (folder / f"{sid}.jsonl").write_text('{"type":"user"}\n')
    assert p.validate_session_id(sid, workdir=work, env=env)
    for bad in GARBAGE:
        assert not p.validate_session_id(bad, workdir=work, env=env)
    assert not p.validate_session_id(None, workdir=work, env=env)
    assert p.find_session_id(work, env=env) == sid
    assert p.find_session_id(work, env=env, since=time.time() + 60) is None
    assert p.find_session_id(tmp_path, env=env) is None


def test_claude_transcript_older_folder_naming(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    env = {"HOME": str(tmp_path / "h"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    folder = tmp_path / "cfg" / "projects" / str(work.resolve()).replace("/", "-")
    folder.mkdir(parents=True)
    (folder / f"{UUID}.jsonl").write_text("{}\n")
    assert ClaudeProvider({}).validate_session_id(UUID, workdir=work, env=env)


def _rollout(codex_home: Path, sid: str, cwd: str, day: str = "2026/11/30") -> Path:
    folder = codex_home / "sessions" / day
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-11-30T12-27-00-{sid}.jsonl"
    path.write_text(json.dumps({"type": "session_meta", "payload": {"id": sid, "cwd": cwd}}) + "\n")
    return path


def test_codex_session_ids(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex"
    work = tmp_path / "repo"
    work.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    p = CodexProvider({})
    assert p.new_session_id() is None
    assert p.find_session_id(work, env=env) is None
    assert not p.validate_session_id(CODEX_ID, workdir=work, env=env)
    other = "01a22c6c-6d42-7891-bfa0-000000000001"
    _rollout(codex_home, other, "/some/other/repo")
    mine = _rollout(codex_home, CODEX_ID, str(work))
    os.utime(mine, (time.time() - 5, time.time() - 5))
    assert p.find_session_id(work, env=env) == CODEX_ID  # the newer rollout is another folder's
    assert p.validate_session_id(CODEX_ID, workdir=work, env=env)
    for bad in GARBAGE:
        assert not p.validate_session_id(bad, workdir=work, env=env)
    assert p.find_session_id(work, env=env, since=time.time()) is None


SESSION_SCHEMA = """
CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL);
CREATE TABLE session (
    id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES project(id), workspace_id TEXT,
    parent_id TEXT, slug TEXT NOT NULL, directory TEXT NOT NULL, path TEXT, title TEXT NOT NULL,
    version TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL
);
"""


def _session_db(path: Path, rows: list[tuple[str, str | None, str, int]]) -> None:
    """A database with OpenCode's ``session`` table (columns from its public
    ``session.sql.ts``). The real CLIs write theirs in the end-to-end tests; here the file is
    a real SQLite database written by apsw with the same schema."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(SESSION_SCHEMA)
    conn.execute("INSERT INTO project VALUES ('p1', '/')")
    for sid, parent, directory, updated in rows:
        conn.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated) VALUES (?, 'p1', ?, 's', ?, 't', '1.18.33', ?, ?)",
            (sid, parent, directory, updated, updated),
        )
    conn.close()


@pytest.mark.parametrize("cls", [OpenCodeProvider, KiloProvider], ids=lambda c: c.name)
def test_opencode_family_session_ids(tmp_path: Path, cls) -> None:
    p = cls({})
    work = tmp_path / "repo"
    work.mkdir()
    env = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")}
    assert p.database(env) == tmp_path / "data" / p.data_dir / f"{p.data_dir}.db"
    assert p.find_session_id(work, env=env) is None  # no database yet
    assert not p.validate_session_id(SES, workdir=work, env=env)
    older = "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa"
    child = "ses_cccccccccccccccccccccccccc"
    _session_db(
        p.database(env),
        [(older, None, str(work), 100), (SES, None, str(work), 200), (child, SES, str(work), 300), ("ses_bbbbbbbbbbbbbbbbbbbbbbbbbb", None, "/elsewhere", 400)],
    )
    assert p.find_session_id(work, env=env) == SES  # newest top-level session of this folder
    assert p.validate_session_id(SES, workdir=work, env=env)
    assert p.validate_session_id(older, workdir=work, env=env)
    assert not p.validate_session_id("ses_zzzzzzzzzzzzzzzzzzzzzzzzzz", workdir=work, env=env)  # right shape, no record
    for bad in GARBAGE + [UUID]:
        assert not p.validate_session_id(bad, workdir=work, env=env)
    assert p.find_session_id(work, env=env, since=time.time() + 60) is None
    # default location: $HOME/.local/share/<cli>/<cli>.db
    assert p.database({"HOME": "/h", "XDG_DATA_HOME": ""}) == Path("/h/.local/share") / p.data_dir / f"{p.data_dir}.db"


def test_unexpected_database_schema_is_tolerated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "data" / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    conn = apsw.Connection(str(db))
    conn.execute("CREATE TABLE sessions (sid TEXT)")
    conn.close()
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    with caplog.at_level(logging.WARNING):
        assert OpenCodeProvider({}).find_session_id(tmp_path, env=env) is None
        assert not OpenCodeProvider({}).validate_session_id(SES, workdir=tmp_path, env=env)
    assert "no session(id, directory) table" in caplog.text
    (tmp_path / "data" / "kilo").mkdir()
    (tmp_path / "data" / "kilo" / "kilo.db").write_bytes(b"this is not a database" * 10)
    assert KiloProvider({}).find_session_id(tmp_path, env=env) is None


# --------------------------------------------------------------------------- plugins


PLUGIN_CASES = [
    ("claude_code", "claude-code", "claude", claude_plugin, ClaudeProvider),
    ("codex", "codex", "codex", codex_plugin, CodexProvider),
    ("opencode", "opencode", "opencode", opencode_plugin, OpenCodeProvider),
    ("kilo", "kilo", "kilo", kilo_plugin, KiloProvider),
]


@pytest.mark.parametrize(("folder", "plugin_name", "executor", "module", "cls"), PLUGIN_CASES, ids=[c[1] for c in PLUGIN_CASES])
def test_plugin_manifest_and_registration(folder: str, plugin_name: str, executor: str, module, cls) -> None:
    manifest = load_manifest(PLUGINS / folder / "elowen-plugin.toml")
    assert manifest.name == plugin_name and manifest.entry == f"elowen_builtins.{folder}.plugin"
    assert list(manifest.contributes["executors"]) == [executor]
    # the CLIs with wired channels: Claude Code (MCP + permission hook), OpenCode and Kilo (MCP)
    channels = {"claude-code": {"mcp", "permission_channel"}, "opencode": {"mcp"}, "kilo": {"mcp"}}.get(plugin_name, set())
    assert set(manifest.config) == {
        "binary",
        "extra_args",
        "skip_permissions",
        "resume_sessions",
        "default_model",
        "env",
        "sandbox",
        "sandbox_network",
        *channels,
    }
    config = manifest.validate_config({"binary": f"/opt/{executor}", "extra_args": ["--x"], "default_model": "m/1"})
    # ctx is a plain record here: the kernel's PluginContext is tested in tests/kernel
    ctx = SimpleNamespace(config=config, name=plugin_name)
    registered: list[Executor] = []
    module.register_executors(ctx, registered.append)
    assert len(registered) == 1 and registered[0].name == executor
    provider = registered[0].provider
    assert isinstance(provider, cls) and provider.name == executor
    assert provider.settings.binary == f"/opt/{executor}" and provider.settings.extra_args == ("--x",)
    assert provider.build_command("t")[0] == f"/opt/{executor}"
    assert (PLUGINS / folder / "patterns.toml").is_file()
    assert provider.settings.sandbox == "auto" and provider.settings.sandbox_network is True  # sandboxed by default
    assert provider.state_paths(env={"HOME": "/h"})  # its read-write folders inside the sandbox


def test_kilo_skip_permissions_is_documented_as_noop() -> None:
    kilo = load_manifest(PLUGINS / "kilo" / "elowen-plugin.toml").config["skip_permissions"].description
    assert "no-op" in kilo.lower()
    assert "no-op" in (kilo_plugin.__doc__ or "").lower()


def test_provider_classify_uses_its_cli() -> None:
    screen = (Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "codex" / "04_permission_prompt.txt").read_text()
    assert CodexProvider({}).classify(screen).state == "permission_prompt"
    assert CodexProvider({}).classify(screen).cli == "codex"

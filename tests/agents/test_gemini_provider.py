"""The third-party Gemini CLI provider ``contrib/elowen-gemini``, fast and in-process: its screen
patterns against the real 200x50 captures of Gemini CLI 0.61.0 shipped with it, its command
lines, trust pre-seeding and session files (the shapes 0.61.0 writes), and the plugin loaded by a
real kernel from its manifest. The package is imported from its source folder; it imports
nothing of Elowen but ``elowen_sdk``. The real program runs in ``tests/e2e/test_gemini_e2e.py``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elowen_sdk.providers import PROVIDER_MEMBERS, Provider, ProviderError
from elowen_sdk.screen import ANSWERABLE_STATES

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "contrib" / "elowen-gemini"
SCREENS = DIST / "tests" / "fixtures" / "screens" / "gemini-0.61.0"
REPO = "/srv/demo/work/gemini"  # the capture's scratch folder, as rewritten in the fixtures


@pytest.fixture
def gemini(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The contrib package's plugin module, imported from its source folder."""
    monkeypatch.syspath_prepend(str(DIST))
    import elowen_gemini.plugin as plugin

    return plugin


@pytest.fixture
def provider(gemini: Any) -> Provider:
    return gemini.GeminiProvider({"binary": "/opt/gemini/bin/gemini"}, plugin="gemini")


def screen(name: str) -> tuple[str, str]:
    return (SCREENS / f"{name}.txt").read_text(), (SCREENS / f"{name}.ansi.txt").read_text()


# --------------------------------------------------------------------------- screens

EXPECTED = {
    "01_trust_prompt": "trust_prompt",
    "02_idle_start": "idle",
    "03_working_thinking": "working",
    "04_permission_prompt_shell_redirect": "permission_prompt",
    "05_working_after_approve": "working",
    "06_idle_finished": "idle",
    "07_exited": "exited",
    "08_working_shell_output": "working",
    "09_permission_prompt_shell": "permission_prompt",
    "10_idle_after_reject": "idle",
    "11_error_api_401": "error",
    "12_auth_required_api_key_dialog": "auth_required",
    "13_auth_required_choose_method": "auth_required",
    "14_permission_prompt_write_file": "permission_prompt",
    "15_trust_prompt_over_permission_prompt": "unknown_dialog",
    "16_exited_trust_escape": "exited",
}


def test_every_capture_is_a_fixture_with_an_expected_state() -> None:
    names = {p.name.removesuffix(".ansi.txt").removesuffix(".txt") for p in SCREENS.glob("*.txt")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize(("name", "state"), sorted(EXPECTED.items()))
def test_real_screens_classify(provider: Provider, name: str, state: str) -> None:
    plain, escapes = screen(name)
    assert provider.classify(plain).state == state
    assert provider.classify(escapes).state == state  # the -e capture, escapes stripped
    assert provider.classify(plain, version="0.61.0").state == state


def test_shell_permission_prompt_request_options_and_keys(provider: Provider) -> None:
    c = provider.classify(*screen("04_permission_prompt_shell_redirect")[:1])
    assert dict(c.request or {}) == {
        "tool": "Shell", "command": "echo hi > proof.txt", "file": None, "description": None,
        "question": "Allow execution of [Shell]?",
    }  # fmt: skip
    assert c.options == ("Allow once", "Allow for this session", "No, suggest changes (esc)")
    assert c.numbers == (1, 2, 3) and c.selected == 0
    assert c.approve_keys == ("1",) and c.reject_keys == ("Escape",) and c.choice_mode == "number"
    other = provider.classify(screen("09_permission_prompt_shell")[0])
    assert other.request is not None and other.request["command"] == "touch made.txt"
    assert other.fingerprint != c.fingerprint


def test_write_file_prompt_names_the_file(provider: Provider) -> None:
    c = provider.classify(screen("14_permission_prompt_write_file")[0])
    assert c.request is not None and (c.request["tool"], c.request["file"]) == ("WriteFile", "notes.txt")
    assert c.request["question"] == "Apply this change?"
    assert c.options[-2:] == ("Modify with external editor", "No, suggest changes (esc)")


def test_trust_prompt_is_answerable_only_alone(provider: Provider) -> None:
    c = provider.classify(screen("01_trust_prompt")[0])
    assert c.options == ("Trust folder (gemini)", "Trust parent folder (work)", "Don't trust")
    assert c.selected == 0 and c.request is not None and c.request["accept_index"] == 0
    assert c.approve_keys == ("Enter",) and c.move == ("Up", "Down")
    # 0.61.0 runs the initial prompt under the trust dialog: the tool confirmation above it holds
    # the keyboard, so Enter would approve the command. Nothing may be answered there.
    stacked = provider.classify(screen("15_trust_prompt_over_permission_prompt")[0])
    assert stacked.state not in ANSWERABLE_STATES and not stacked.approve_keys


def test_version_is_read_from_the_banner(provider: Provider) -> None:
    assert provider.detect_version(screen("02_idle_start")[0]) == "0.61.0"
    assert provider.pattern_set().tested_versions == ("0.61.0",)


def test_an_old_error_scrolled_up_is_not_the_state(provider: Provider) -> None:
    plain = screen("11_error_api_401")[0]
    lines = plain.rstrip("\n").split("\n")
    cut = next(i for i, ln in enumerate(lines) if "? for shortcuts" in ln)
    # more transcript between the error and the status line: the bottom no longer shows it
    later = [*lines[:cut], *[f"✦ FAKE: line {i}." for i in range(6)], *lines[cut:]]
    assert provider.classify("\n".join(later)).state == "idle"


# --------------------------------------------------------------------------- command line


def test_command_lines(gemini: Any, provider: Provider) -> None:
    sid = str(uuid.uuid4())
    assert provider.build_command("-x do it", session_id=sid) == [
        "/opt/gemini/bin/gemini", "--session-id", sid, "--prompt-interactive=-x do it",
    ]  # fmt: skip
    assert provider.build_command("go on", model="gemini-2.5-pro", session_id=sid, resume=True, extra_args=["--debug"]) == [
        "/opt/gemini/bin/gemini", "--model", "gemini-2.5-pro", "--resume", sid, "--debug", "--prompt-interactive=go on",
    ]  # fmt: skip
    skip = gemini.GeminiProvider({"skip_permissions": True, "extra_args": ["-e", "none"], "default_model": "gemini-2.5-flash"})
    assert skip.build_command("") == ["gemini", "--model", "gemini-2.5-flash", "--approval-mode=yolo", "-e", "none"]
    assert skip.build_command("", skip_permissions=False) == ["gemini", "--model", "gemini-2.5-flash", "-e", "none"]
    with pytest.raises(ProviderError):
        provider.build_command("x", session_id="management")
    with pytest.raises(ProviderError):
        provider.build_command("x", resume=True)
    assert provider.new_session_id() != provider.new_session_id()
    assert provider.chooses_session_id and not provider.types_prompt_on_resume


def test_env_merges_the_configured_variables(gemini: Any) -> None:
    p = gemini.GeminiProvider({"env": {"GEMINI_API_KEY": "k", "GEMINI_TELEMETRY_ENABLED": "true"}})
    assert p.env_for() == {"GEMINI_API_KEY": "k", "GEMINI_TELEMETRY_ENABLED": "true"}
    assert gemini.GeminiProvider().env_for() == {"GEMINI_TELEMETRY_ENABLED": "false"}
    assert "gemini plugin" in p.auth_note() and "GEMINI_API_KEY" in p.auth_note()


# --------------------------------------------------------------------------- trust


def test_preseed_trust_merges_into_trusted_folders(provider: Provider, tmp_path: Path) -> None:
    home = tmp_path / "home"
    work = tmp_path / "real-work"
    work.mkdir()
    link = tmp_path / "link-work"
    link.symlink_to(work)
    target = home / ".gemini" / "trustedFolders.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"/elsewhere": "DO_NOT_TRUST"}))
    target.chmod(0o640)
    written = provider.preseed_trust(link, env={"HOME": str(home)})
    assert written == target
    assert json.loads(target.read_text()) == {"/elsewhere": "DO_NOT_TRUST", str(link): "TRUST_FOLDER", str(work): "TRUST_FOLDER"}
    assert target.stat().st_mode & 0o777 == 0o640
    # GEMINI_CLI_HOME replaces the home; GEMINI_CLI_TRUSTED_FOLDERS_PATH names the file itself
    assert provider.preseed_trust(work, env={"HOME": str(home), "GEMINI_CLI_HOME": str(tmp_path / "g")}) == tmp_path / "g" / ".gemini" / "trustedFolders.json"
    custom = tmp_path / "trust.json"
    assert provider.preseed_trust(work, env={"GEMINI_CLI_TRUSTED_FOLDERS_PATH": str(custom)}) == custom
    assert json.loads(custom.read_text()) == {str(work): "TRUST_FOLDER"}


def test_preseed_trust_refuses_an_unparsable_file(provider: Provider, tmp_path: Path) -> None:
    target = tmp_path / ".gemini" / "trustedFolders.json"
    target.parent.mkdir()
    target.write_text("{not json")
    with pytest.raises(ProviderError, match="cannot parse"):
        provider.preseed_trust(tmp_path, env={"HOME": str(tmp_path)})
    assert target.read_text() == "{not json"


# --------------------------------------------------------------------------- sessions


def write_transcript(home: Path, project: str, workdir: Path, sid: str, stamp: str, mtime: float) -> Path:
    """A transcript as 0.61.0 writes it: first line ``sessionId`` + ``projectHash`` (sha256 of the
    folder's real path), then ``$set`` records."""
    path = home / ".gemini" / "tmp" / project / "chats" / f"session-{stamp}-{sid[:8]}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {
        "sessionId": sid,
        "projectHash": hashlib.sha256(os.path.realpath(workdir).encode()).hexdigest(),
        "startTime": "2026-12-01T21:34:31.499Z",
        "lastUpdated": "2026-12-01T21:34:31.499Z",
        "kind": "main",
    }
    path.write_text(json.dumps(head) + "\n" + json.dumps({"$set": {"lastUpdated": "2026-12-01T21:35:15.087Z"}}) + "\n")
    os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[tuple[Path, Path, Path, list[str]]]:
    home, work, other = tmp_path / "home", tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    ids = [str(uuid.uuid4()) for _ in range(3)]
    write_transcript(home, "work", work, ids[0], "2026-12-01T21-33", 1000.0)
    write_transcript(home, "work", work, ids[1], "2026-12-01T21-34", 2000.0)
    write_transcript(home, "other", other, ids[2], "2026-12-01T21-35", 3000.0)
    (home / ".gemini" / "tmp" / "work" / "chats" / "session-broken-00000000.jsonl").write_text("not json\n")
    yield home, work, other, ids


def test_session_exists_only_for_its_own_folder(provider: Provider, sessions: tuple[Path, Path, Path, list[str]]) -> None:
    home, work, other, ids = sessions
    env = {"HOME": str(home)}
    assert provider.validate_session_id(ids[0], workdir=work, env=env)
    assert provider.validate_session_id(ids[1], workdir=work, env=env)
    assert not provider.validate_session_id(ids[2], workdir=work, env=env)  # --resume would not find it
    assert provider.validate_session_id(ids[2], workdir=other, env=env)
    assert not provider.validate_session_id(str(uuid.uuid4()), workdir=work, env=env)
    assert not provider.validate_session_id("latest", workdir=work, env=env)
    assert not provider.validate_session_id(ids[0], workdir=work, env={"HOME": str(home / "nowhere")})


def test_find_session_id_takes_the_newest_of_the_folder(provider: Provider, sessions: tuple[Path, Path, Path, list[str]]) -> None:
    home, work, other, ids = sessions
    env = {"HOME": str(home)}
    assert provider.find_session_id(work, env=env) == ids[1]
    assert provider.find_session_id(work, env=env, since=1500.0) == ids[1]
    assert provider.find_session_id(work, env=env, since=2500.0) is None
    assert provider.find_session_id(other, env=env) == ids[2]
    assert provider.find_session_id(work, env={"HOME": str(home), "GEMINI_CLI_HOME": str(home / "x")}) is None


# --------------------------------------------------------------------------- the distribution


def test_distribution_declares_the_plugin_and_ships_its_data() -> None:
    pyproject = tomllib.loads((DIST / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["elowen.plugins"] == {"gemini": "elowen_gemini.plugin"}
    assert [d.split(">")[0].split("<")[0] for d in pyproject["project"]["dependencies"]] == ["elowen-sdk"]
    data = pyproject["tool"]["setuptools"]["package-data"]["elowen_gemini"]
    assert set(data) == {"elowen-plugin.toml", "patterns.toml"}
    assert all((DIST / "elowen_gemini" / name).is_file() for name in data)


def test_the_package_imports_only_the_sdk_and_the_standard_library() -> None:
    roots: set[str] = set()
    for path in (DIST / "elowen_gemini").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
    assert roots - {"__future__", "hashlib", "json", "os", "uuid", "collections", "pathlib", "typing"} == {"elowen_sdk"}


async def test_a_real_kernel_loads_it_from_its_manifest(gemini: Any, tmp_path: Path) -> None:
    from elowen_sdk.testing import plugin_kernel

    config = {"gemini": {"binary": "/opt/gemini", "default_model": "gemini-2.5-pro", "env": {"GEMINI_API_KEY": "k"}}}
    async with plugin_kernel(tmp_path, enable=["gemini"], modules=[gemini], config=config, entry_points=False) as kernel:
        executor = kernel.contributions.get("executor", "gemini").obj
        assert executor.name == "gemini"
        p = executor.provider
        assert isinstance(p, gemini.GeminiProvider) and p.plugin == "gemini" and p.display_name == "Gemini CLI"
        assert [m for m in PROVIDER_MEMBERS if not hasattr(p, m)] == []
        assert p.settings.binary == "/opt/gemini" and p.settings.env == {"GEMINI_API_KEY": "k"}
        assert p.build_command("hi")[:3] == ["/opt/gemini", "--model", "gemini-2.5-pro"]

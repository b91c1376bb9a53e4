"""The exact action of a permission prompt, read from real captures of the four CLIs.

Fixtures ``3N_permission_prompt_<kind>_<version>.txt`` were captured from the real CLIs
(Claude Code 2.1.197, Codex 0.171.0, OpenCode 1.18.33, Kilo 7.7.7) in 200x50 tmux panes, driven
by the scripted model server (tests/support/model_server) making the one tool call named in the
file. The working directory shown on each screen is the agent's cwd during the capture.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from elowen_builtins.agents.screen import classify
from elowen_sdk.screen import KINDS, REQUIRED, kind_of, normalize_request, resolve_path

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"

CLAUDE_CWD = "/tmp/cap-claude-wq7wa54k/work/repo"  # shown in 31_…write_outside's welcome box
CODEX_CWD = "/tmp/cap-codex-7okhvzim/work/repo"


def _read(cli: str, name: str, *, ansi: bool = False) -> str:
    return (SCREENS / cli / f"{name}{'.ansi' if ansi else ''}.txt").read_text()


def _request(cli: str, name: str, cwd: str | None, **kw: str) -> dict:
    c = classify(cli, _read(cli, name))
    assert c.state == "permission_prompt", (name, c.state)
    assert c.answerable and c.approve_keys
    return normalize_request(c.request, cwd=cwd, **kw)


# --------------------------------------------------------------------------- the reported failures


@pytest.mark.parametrize("ansi", [False, True])
def test_claude_webfetch_without_footer_is_a_prompt_with_its_url(ansi: bool) -> None:
    screen = _read("claude", "30_permission_prompt_webfetch_2.1.197", ansi=ansi)
    assert "Esc to cancel" not in screen  # the prompt really has no footer
    c = classify("claude", screen)
    assert c.state == "permission_prompt"
    assert c.options[-1] == "No, and tell Claude what to do differently (esc)"
    r = normalize_request(c.request, cwd=CLAUDE_CWD)
    assert r["kind"] == "fetch" and r["tool"] == "WebFetch"
    assert r["url"] == "https://example.com/page"
    assert r["complete"] is True and r["missing"] == []


def test_claude_write_outside_takes_the_header_path_not_the_basename() -> None:
    r = _request("claude", "31_permission_prompt_write_outside_2.1.197", CLAUDE_CWD)
    assert r["kind"] == "write"
    assert r["question"] == "Do you want to create e2e-outside-write.txt?"
    assert r["paths"] == ["/root/e2e-outside-write.txt"] and r["file"] == "/root/e2e-outside-write.txt"
    assert r["diff"] == "1 hello"
    assert r["complete"] is True


def test_claude_edit_reads_the_header_path_and_the_diff() -> None:
    cwd = "/tmp/cap-claude-8dopbqdx/work/repo"  # shown in 33_…edit's welcome box
    r = _request("claude", "33_permission_prompt_edit_2.1.197", cwd)
    assert r["kind"] == "edit" and r["tool"] == "Edit"
    assert r["paths"] == [f"{cwd}/README.md"]
    assert r["diff"] == "1 -demo\n1 +demo changed"
    assert r["complete"] is True


def test_claude_websearch_names_its_query() -> None:
    r = _request("claude", "34_permission_prompt_websearch_2.1.197", CLAUDE_CWD)
    assert r["kind"] == "fetch" and r["tool"] == "Web Search"
    assert r["url"] == "elowen agent news" and r["complete"] is True


def test_claude_tool_use_block_of_an_unknown_tool_is_incomplete() -> None:
    screen = _read("claude", "34_permission_prompt_websearch_2.1.197").replace('Web Search("elowen agent news")', "Frobnicate(x)")
    c = classify("claude", screen)
    assert c.state == "permission_prompt"
    r = normalize_request(c.request, cwd=CLAUDE_CWD)
    assert r["kind"] == "other" and r["complete"] is False and r["missing"] == ["kind"]


def test_claude_write_without_a_cwd_is_incomplete() -> None:
    r = _request("claude", "31_permission_prompt_write_outside_2.1.197", None)
    assert r["paths"] == [] and r["file"] is None
    assert r["complete"] is False and r["missing"] == ["paths"]


def test_claude_bash_warning_line_is_not_glued_onto_the_command() -> None:
    screen = _read("claude", "32_permission_prompt_bash_warning_2.1.197")
    assert "Contains simple_expansion" in screen
    r = _request("claude", "32_permission_prompt_bash_warning_2.1.197", CLAUDE_CWD)
    assert r["kind"] == "bash"
    assert r["command"] == "elowen close $ELOWEN_TASK --summary done"
    assert r["description"] == "Close the task"
    assert r["complete"] is True


def test_codex_apply_patch_reads_every_destination_and_the_diff() -> None:
    r = _request("codex", "30_permission_prompt_apply_patch_0.171.0", CODEX_CWD)
    assert r["kind"] == "patch" and r["tool"] == "apply_patch"
    assert r["paths"] == ["/root/.ssh/authorized_keys", f"{CODEX_CWD}/README.md"]
    assert r["file"] == "/root/.ssh/authorized_keys"
    assert "+ssh-ed25519 AAAAC3Nza fake@host" in r["diff"] and "-demo" in r["diff"]
    assert r["description"] == "Apply proposed file edits"
    assert r["complete"] is True


@pytest.mark.parametrize(
    ("cli", "name"), [("opencode", "30_permission_prompt_external_directory_1.18.33"), ("kilo", "30_permission_prompt_external_directory_7.7.7")]
)
def test_opencode_kilo_external_directory(cli: str, name: str) -> None:
    r = _request(cli, name, "/srv/elsewhere")
    assert r["kind"] == "directory" and r["tool"] == "external_directory"
    assert r["directory"] == "/root" and r["patterns"] == ["/root/*"]
    assert r["complete"] is True


@pytest.mark.parametrize(
    ("cli", "name", "cwd"),
    [
        ("opencode", "31_permission_prompt_edit_1.18.33", "/tmp/cap-opencode-xoq43ji6/work/repo"),  # cwd shown in its side panel
        ("kilo", "31_permission_prompt_edit_7.7.7", "/tmp/cap-kilo-7k3t37ku/work/repo"),
    ],
)
def test_opencode_kilo_edit_path_is_resolved_against_the_cwd(cli: str, name: str, cwd: str) -> None:
    r = _request(cli, name, cwd)
    assert r["kind"] == "edit" and r["tool"] == "Edit"
    assert r["paths"] == [f"{cwd}/README.md"] and r["patterns"] == []
    assert r["complete"] is True


# --------------------------------------------------------------------------- the older captures stay complete


@pytest.mark.parametrize(
    ("cli", "name", "command"),
    [
        ("claude", "06_permission_prompt", None),
        ("codex", "04_permission_prompt", "echo hello > codex_file.txt"),
        ("opencode", "03_permission_prompt", None),
        ("kilo", "03_permission_prompt", None),
    ],
)
def test_bash_prompts_are_complete(cli: str, name: str, command: str | None) -> None:
    r = _request(cli, name, "/srv/demo/work/x")
    assert r["kind"] == "bash" and r["command"]
    if command is not None:
        assert r["command"] == command
    assert r["complete"] is True and r["missing"] == []


# --------------------------------------------------------------------------- footer-less dialogs


def test_an_unknown_dialog_is_recognised_by_its_option_block() -> None:
    # the real WebFetch capture with its question reworded: no known prompt matches any more,
    # the shape (question, numbered options with a cursor, at the bottom of the frame) remains
    screen = _read("claude", "30_permission_prompt_webfetch_2.1.197")
    screen = screen.replace("Do you want to allow Claude to fetch this content?", "Shall we switch the output style?")
    screen = screen.replace("No, and tell Claude what to do differently (esc)", "Keep the current style")
    c = classify("claude", screen)
    assert c.state == "unknown_dialog" and not c.answerable and not c.approve_keys
    assert c.request is not None and c.request["question"] == "Shall we switch the output style?"
    assert c.options == ("Yes", "Yes, and don't ask again for example.com", "Keep the current style")
    # without a cursor it is not a live dialog (a numbered list the agent printed)
    assert classify("claude", screen.replace("❯ 1. Yes", "  1. Yes")).state == "starting"


def test_an_idle_screen_with_a_numbered_list_is_not_a_dialog() -> None:
    screen = (SCREENS / "lookalikes" / "claude__idle__numbered_list_prose.txt").read_text()
    assert classify("claude", screen).state == "idle"


# --------------------------------------------------------------------------- normalisation


def test_every_kind_names_its_required_parts() -> None:
    full = {
        "bash": {"tool": "Bash", "command": "ls"},
        "edit": {"tool": "Edit", "file": "/a/b"},
        "write": {"tool": "Write", "file": "/a/b"},
        "patch": {"tool": "apply_patch", "destination": "/a/b"},
        "fetch": {"tool": "WebFetch", "url": "https://x"},
        "directory": {"tool": "external_directory", "directory": "/root"},
        "mcp": {"tool": "mcp__files__read", "server": "files", "arguments": '(path: "a.txt")'},
        "network": {"kind": "network", "url": "example.com"},
    }
    assert set(full) | {"other"} == set(KINDS) == set(REQUIRED)
    for kind, raw in full.items():
        r = normalize_request(raw)
        assert r["kind"] == kind and r["complete"] is True and r["missing"] == [], kind
        empty = normalize_request({"tool": raw.get("tool"), "kind": raw.get("kind")})
        assert empty["complete"] is False and empty["missing"] == list(REQUIRED[kind]) or kind == "mcp", kind
    mcp = normalize_request({"tool": "mcp__files__read"})
    assert mcp["missing"] == ["server", "arguments"]  # an MCP call is understood with its arguments
    other = normalize_request({"tool": "Frobnicate", "command": "x"})
    assert other["kind"] == "other" and other["complete"] is False and other["missing"] == ["kind"]
    assert normalize_request(None)["missing"] == ["kind"]
    assert kind_of("MultiEdit") == "edit" and kind_of("NotebookEdit") == "edit" and kind_of("exec_command") == "bash"


def test_directory_with_patterns_shown_but_unread_is_incomplete() -> None:
    r = normalize_request({"tool": "external_directory", "directory": "/root", "patterns_shown": "Patterns"})
    assert r["missing"] == ["patterns"] and r["complete"] is False and "patterns_shown" not in r


def test_paths_resolve_through_symlinks_of_the_longest_existing_prefix(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    link = tmp_path / "checkout"
    link.symlink_to(real)
    out = tmp_path / "outside"
    out.mkdir()
    (real / "sub" / "esc").symlink_to(out)
    cwd = str(link)
    assert resolve_path("sub/new/file.txt", cwd) == f"{real}/sub/new/file.txt"
    assert resolve_path("sub/esc/x/y.txt", cwd) == f"{out}/x/y.txt"  # a symlink inside leads out
    assert resolve_path("../../etc/passwd", cwd) == os.path.realpath(f"{tmp_path}/../etc/passwd")
    assert resolve_path("~/.ssh/authorized_keys", cwd, home=str(tmp_path)) == f"{tmp_path}/.ssh/authorized_keys"
    assert resolve_path("~/.ssh/authorized_keys", cwd) is None  # no home known
    assert resolve_path("rel.txt", None) is None
    r = normalize_request({"tool": "Edit", "file": "sub/esc/k"}, cwd=cwd)
    assert r["paths"] == [f"{out}/k"] and r["complete"]


def test_one_unresolvable_path_of_a_patch_makes_it_incomplete() -> None:
    r = normalize_request({"tool": "apply_patch", "destination": "/abs/a", "files": "rel/b"})
    assert r["paths"] == ["/abs/a"] and r["missing"] == ["paths"] and r["complete"] is False


def test_classification_stays_cheap() -> None:
    screens = [
        (cli, _read(cli, n))
        for cli, n in [
            ("claude", "30_permission_prompt_webfetch_2.1.197"),
            ("claude", "31_permission_prompt_write_outside_2.1.197"),
            ("claude", "32_permission_prompt_bash_warning_2.1.197"),
            ("codex", "30_permission_prompt_apply_patch_0.171.0"),
            ("opencode", "30_permission_prompt_external_directory_1.18.33"),
        ]
    ]
    for cli, s in screens:
        classify(cli, s)  # warm the pattern cache
    start = time.perf_counter()
    for _ in range(50):
        for cli, s in screens:
            normalize_request(classify(cli, s).request, cwd="/srv/x")
    per_call = (time.perf_counter() - start) / (50 * len(screens))
    assert per_call < 0.002, f"{per_call * 1e6:.0f} µs per classify+normalize"

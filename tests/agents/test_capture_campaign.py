"""The rest of the capture campaign (issue 11 item 4): real captures of the pinned CLIs, numbers
30 and up in ``tests/fixtures/screens/<cli>/captured/`` (CAPTURED.md lists each), classified and
extracted as the deriver does (``classify`` with the ``-e`` escapes, then ``normalize_request``
with the session's cwd and HOME).

Made with ``python -m tests.support.capture <scene> --size 200x50 --size 80x24`` (Claude Code
2.1.197, Codex 0.171.0, OpenCode 1.18.33, Kilo 7.7.7; ``tests/support/capture_scenes.py``), each
scene in a fresh world ``/tmp/elowen-cap/<cli>-<world>/`` (``work/repo`` the cwd, ``home`` the
fake HOME), so the paths on screen are the capture's own.

Each row asserts what the old patterns got wrong or left unread, so each can fail: the Claude
MCP arguments were read in the wrong order (the tool came out empty), NotebookEdit had no
request at all, the OpenCode/Kilo webfetch had no URL, the Codex permission grant had no kind,
Claude's restored composer after an interrupt and its first-start theme picker were
``starting``, OpenCode/Kilo's "esc again to interrupt" was ``idle`` while the agent still
worked, and Codex's transcript browser (Enter there rewinds the conversation) was ``idle``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elowen_builtins.agents.screen import classify
from elowen_sdk.screen import normalize_request, strip_ansi

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"
SIZES = ("200x50", "80x24")


def _world(cli: str, world: str) -> tuple[str, str]:
    base = f"/tmp/elowen-cap/{cli}-{world}"
    return f"{base}/work/repo", f"{base}/home"


def _load(cli: str, stem: str) -> tuple[str, str]:
    """(plain screen, the ``-e`` capture of the same moment)."""
    folder = SCREENS / cli / "captured"
    return (folder / f"{stem}.txt").read_text(), (folder / f"{stem}.ansi.txt").read_text()


def _stems(cli: str, number: int, state: str, what: str) -> list[str]:
    """Both sizes of one scene: ``NN_<state>_200x50_<what>`` and ``NN+1_<state>_80x24_<what>``."""
    return [f"{number + i:02d}_{state}_{size}_{what}" for i, size in enumerate(SIZES)]


def _request(cli: str, stem: str, world: str) -> dict[str, Any]:
    plain, ansi = _load(cli, stem)
    c = classify(cli, strip_ansi(ansi), escapes=ansi)
    assert c.state == "permission_prompt" and c.answerable, (stem, c.state)
    assert classify(cli, plain).state == "permission_prompt", stem  # the plain capture agrees
    cwd, home = _world(cli, world)
    return normalize_request(c.request, cwd=cwd, home=home)


def both(cli: str, number: int, state: str, what: str) -> Any:
    return pytest.mark.parametrize("stem", _stems(cli, number, state, what))


# ---------------------------------------------------------------- permission prompts: the exact action


@both("claude", 30, "permission_prompt", "notebook_edit")
def test_claude_notebook_edit_names_the_notebook_and_the_cell_diff(stem: str) -> None:
    r = _request("claude", stem, "notebook")
    repo, _ = _world("claude", "notebook")
    assert r["kind"] == "edit" and r["tool"] == "NotebookEdit" and r["complete"]
    assert r["paths"] == [f"{repo}/demo.ipynb"] and r["description"] == "Replace cell contents for cell c1"
    assert "-print('one')" in r["diff"] and "+print('two')" in r["diff"] and "│" not in r["diff"]  # the box is gone


@both("claude", 32, "permission_prompt", "mcp_tool")
def test_claude_mcp_tool_names_server_tool_and_arguments(stem: str) -> None:
    # drawn `demo - echo(text: "hello from the model") (MCP)`: arguments BEFORE the (MCP) mark
    r = _request("claude", stem, "mcp")
    assert r["kind"] == "mcp" and r["server"] == "demo" and r["tool"] == "echo"
    assert r["arguments"] == '(text: "hello from the model")' and r["complete"]


def test_an_mcp_request_without_its_arguments_is_not_understood() -> None:
    plain, _ = _load("claude", "32_permission_prompt_200x50_mcp_tool")
    raw = dict(classify("claude", plain).request)
    raw.pop("arguments")
    r = normalize_request(raw, cwd=_world("claude", "mcp")[0])
    assert r["complete"] is False and r["missing"] == ["arguments"]


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
@pytest.mark.parametrize("size", [0, 1], ids=SIZES)
def test_opencode_family_write_names_the_resolved_file(cli: str, size: int) -> None:
    # a write of a new file is drawn "→ Edit notes/hello.txt" (relative to the cwd)
    r = _request(cli, _stems(cli, 30, "permission_prompt", "write")[size], "write")
    repo, _ = _world(cli, "write")
    assert r["kind"] == "edit" and r["paths"] == [f"{repo}/notes/hello.txt"] and r["complete"]


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
@pytest.mark.parametrize("size", [0, 1], ids=SIZES)
def test_opencode_family_webfetch_names_the_url(cli: str, size: int) -> None:
    r = _request(cli, _stems(cli, 32, "permission_prompt", "webfetch")[size], "webfetch")
    assert r["kind"] == "fetch" and r["tool"] == "WebFetch" and r["complete"]
    assert r["url"] == "https://example.com/some/long/path/page.html"


@both("codex", 30, "permission_prompt", "network_exec")
def test_codex_command_with_network_access_carries_the_rule(stem: str) -> None:
    r = _request("codex", stem, "network-exec")
    assert r["kind"] == "bash" and r["command"] == "curl -sS https://example.com/data.json" and r["complete"]
    assert r["permission_rule"] == "network" and r["description"] == "Fetch the data file"


@both("codex", 32, "permission_prompt", "request_permissions")
def test_codex_network_grant_names_no_host_so_goes_to_a_human(stem: str) -> None:
    # "Would you like to grant these permissions?" / "Permission rule: network": a standing grant
    r = _request("codex", stem, "permissions")
    assert r["kind"] == "network" and r["tool"] == "request_permissions" and r["permission_rule"] == "network"
    assert r["complete"] is False and r["missing"] == ["url"]


def test_codex_grant_options_are_four_and_approve_is_this_turn_only() -> None:
    plain, ansi = _load("codex", "32_permission_prompt_200x50_request_permissions")
    c = classify("codex", plain, escapes=ansi)
    assert c.options[0].startswith("Yes, grant these permissions for this turn") and len(c.options) == 4
    assert c.approve_keys == ("y",)  # never "a" (for the whole session)


# ---------------------------------------------------------------- interrupt states


@pytest.mark.parametrize(
    ("cli", "number", "state", "what"),
    [
        # Claude interrupts on the first Esc and puts the prompt back into the composer; only
        # "● high · /effort" or "Esc again to clear" is drawn below the last rule
        ("claude", 40, "idle", "esc_once"),
        ("claude", 42, "idle", "after_interrupt"),
        ("claude", 44, "idle", "esc_on_composer"),
        ("claude", 46, "idle", "esc_esc_on_composer"),
        ("codex", 40, "idle", "esc_once"),
        ("codex", 42, "idle", "after_interrupt"),
        ("codex", 44, "idle", "esc_on_composer"),  # "esc again to edit previous message"
        ("codex", 46, "unknown_dialog", "transcript_browser"),  # "… ↵ rewind · esc back"
        # OpenCode / Kilo need a second Esc: after the first they still work
        ("opencode", 40, "working", "esc_once"),
        ("opencode", 42, "idle", "after_interrupt"),
        ("opencode", 44, "idle", "esc_on_composer"),
        ("opencode", 46, "idle", "esc_esc_on_composer"),
        ("kilo", 40, "working", "esc_once"),
        ("kilo", 42, "idle", "after_interrupt"),
        ("kilo", 44, "idle", "esc_on_composer"),
        ("kilo", 46, "idle", "esc_esc_on_composer"),
    ],
)
@pytest.mark.parametrize("size", [0, 1], ids=SIZES)
def test_interrupt_states(cli: str, number: int, state: str, what: str, size: int) -> None:
    plain, ansi = _load(cli, _stems(cli, number, state, what)[size])
    for escapes in (None, ansi):
        c = classify(cli, plain, escapes=escapes)
        assert c.state == state and not c.answerable and c.approve_keys == ()


def test_opencode_family_first_esc_shows_the_second_esc_hint() -> None:
    for cli in ("opencode", "kilo"):
        plain, _ = _load(cli, "40_working_200x50_esc_once")
        assert "esc again to interrupt" in plain and "ctrl+p commands" in plain  # the idle footer is there too


# ---------------------------------------------------------------- onboarding, update, pickers: never answered


@pytest.mark.parametrize(
    ("cli", "number", "what", "marker"),
    [
        ("claude", 50, "theme_picker", "Choose the text style that looks best with your terminal"),
        ("claude", 52, "security_notes", "Security notes:"),
        ("claude", 56, "api_key_question", "Do you want to use this API key?"),
        ("codex", 50, "update_offer", "Update available · 0.171.0 → 0.999.0"),
        ("opencode", 50, "model_picker", "Select model"),
        ("kilo", 50, "model_picker", "Select model"),
        ("opencode", 52, "command_palette", "Commands"),
        ("kilo", 52, "command_palette", "Commands"),
    ],
)
@pytest.mark.parametrize("size", [0, 1], ids=SIZES)
def test_dialogs_are_unknown_and_never_answered(cli: str, number: int, what: str, marker: str, size: int) -> None:
    plain, ansi = _load(cli, _stems(cli, number, "unknown_dialog", what)[size])
    assert marker in plain
    for escapes in (None, ansi):
        c = classify(cli, plain, escapes=escapes)
        assert c.state == "unknown_dialog" and not c.answerable and c.approve_keys == (), (what, c.state)


def test_claude_api_key_question_has_no_preselected() -> None:
    # a blind Enter would answer "No (recommended)": the question goes to a human, never Enter
    plain, _ = _load("claude", "56_unknown_dialog_200x50_api_key_question")
    assert "❯ 2. No (recommended)" in plain


@pytest.mark.parametrize("size", [0, 1], ids=SIZES)
def test_claude_trust_prompt_after_the_onboarding_is_the_known_one(size: int) -> None:
    plain, ansi = _load("claude", _stems("claude", 54, "trust_prompt", "after_onboarding")[size])
    c = classify("claude", plain, escapes=ansi)
    assert c.state == "trust_prompt" and c.selected == 0 and c.approve_keys == ("Enter",)
    assert c.request["folder"] == _world("claude", "onboarding")[0]


# ---------------------------------------------------------------- long arguments in narrow panes

LONG_URL = "https://example.com/" + "/".join(f"segment-{i:02d}-of-a-very-long-path" for i in range(6)) + "/page.html?query=one&other=two"
LONG_COMMAND = (
    "mkdir -p build/first-part-of-a-long-directory-name && touch build/second-part-of-the-same-long-command.txt && rm -f build/third-part-that-comes-last.txt"
)


@pytest.mark.parametrize("cli", ["claude", "opencode", "kilo"])
@pytest.mark.parametrize("size", [0, 1], ids=SIZES)
def test_a_wrapped_url_is_read_whole(cli: str, size: int) -> None:
    # 235 characters, hard-wrapped at the pane's edge; the first line alone was taken before
    stem = _stems(cli, 60, "permission_prompt", "webfetch_long_url")[size]
    plain, _ = _load(cli, stem)
    assert LONG_URL not in plain  # it IS wrapped on screen
    r = _request(cli, stem, "webfetch-long")
    assert r["kind"] == "fetch" and r["url"] == LONG_URL and r["complete"]


def test_two_readings_of_a_url_that_disagree_are_not_understood() -> None:
    plain, _ = _load("opencode", "61_permission_prompt_80x24_webfetch_long_url")
    raw = dict(classify("opencode", plain).request)
    assert raw["url_shown"]  # the title line's reading
    raw["url"] = LONG_URL[:80]  # e.g. a URL: line cut where the pane ends
    r = normalize_request(raw)
    assert r["complete"] is False and r["missing"] == ["url"] and "url_shown" not in r


def test_a_url_of_another_host_than_the_prompt_names_is_not_understood() -> None:
    plain, _ = _load("claude", "60_permission_prompt_200x50_webfetch_long_url")
    raw = dict(classify("claude", plain).request)
    assert raw["host"] == "example.com"
    raw["url"] = "https://example.com.evil.test/page"
    assert normalize_request(raw)["missing"] == ["url"]


@pytest.mark.parametrize(
    ("cli", "command"),
    [
        ("claude", LONG_COMMAND),
        ("codex", LONG_COMMAND),
        ("opencode", LONG_COMMAND),
        ("kilo", LONG_COMMAND),
    ],
)
def test_a_wrapped_command_is_shown_whole_but_never_approved(cli: str, command: str) -> None:
    # Before: only the first line was the command ("… && touch", "… && echo"), complete, so the
    # rules judged a prefix of what would run. The screen does not tell a wrap at a space from
    # a real line break, so the command is shown joined and goes to a human.
    stem = "63_permission_prompt_80x24_bash_long_command"
    plain, ansi = _load(cli, stem)
    assert command not in plain
    c = classify(cli, strip_ansi(ansi), escapes=ansi)
    assert c.state == "permission_prompt" and c.answerable
    r = normalize_request(c.request, cwd=_world(cli, "bash-long")[0])
    assert r["kind"] == "bash" and r["wrapped"] is True
    if cli in ("claude", "codex"):  # wrapped at spaces: joined with spaces it is the command
        assert r["command"] == command
    else:  # OpenCode and Kilo break anywhere ("build/" | "second-…"): every character, in order
        assert r["command"].replace(" ", "") == command.replace(" ", "") and r["command"].startswith("mkdir -p build/first")
    assert r["complete"] is False and r["missing"] == ["command"]


def test_a_file_other_than_the_question_names_is_not_understood() -> None:
    # Claude's question names the file's basename; a path read from the header that ends in
    # another name (a cut or misread line) is not the file the prompt is about
    plain, _ = _load("claude", "31_permission_prompt_80x24_notebook_edit")
    raw = dict(classify("claude", plain).request)
    assert raw["basename"] == "demo.ipynb"
    raw["file"] = raw["file"][:-3]  # ".../demo.ip"
    r = normalize_request(raw, cwd=_world("claude", "notebook")[0])
    assert r["complete"] is False and r["missing"] == ["paths"]


def test_claude_runs_a_sub_agent_without_asking() -> None:
    # the Agent tool of 2.1.197 draws no permission prompt of its own (its sub-agent's tool calls
    # would ask as usual): the screen after it is the idle composer
    plain, ansi = _load("claude", "64_idle_200x50_agent_ran_without_asking")
    assert "● Agent(Look around)" in plain and "Done (0 tool uses" in plain and "Do you want" not in plain
    assert classify("claude", plain, escapes=ansi).state == "idle"


def test_codex_network_proxy_blocks_without_a_prompt() -> None:
    # the only screen the network proxy gave: the host blocked, no question, the composer idle
    plain, ansi = _load("codex", "34_idle_200x50_network_blocked_by_proxy")
    assert 'Network access to "example.com" was blocked' in plain
    assert classify("codex", plain, escapes=ansi).state == "idle"


LONG_PATH = "notes/" + "/".join(f"level-{i}-of-a-deep-folder" for i in range(4)) + "/hello.txt"


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
def test_a_wrapped_path_is_shown_whole_but_never_approved(cli: str) -> None:
    # "→ Edit notes/level-0-…/level-1-…/" then "level-2-…/hello.txt" on the next line: before,
    # the first line was the path (a folder inside the checkout) and the request complete
    plain, ansi = _load(cli, "67_permission_prompt_80x24_write_long_path")
    assert LONG_PATH not in plain
    c = classify(cli, strip_ansi(ansi), escapes=ansi)
    assert c.state == "permission_prompt"
    repo, _ = _world(cli, "write-long")
    r = normalize_request(c.request, cwd=repo)
    assert r["paths"] == [f"{repo}/{LONG_PATH}"] and r["complete"] is False and r["missing"] == ["paths"]
    assert "file_more" not in r

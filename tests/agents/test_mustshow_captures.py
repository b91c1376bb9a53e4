"""The capture campaign's screens (issue 11 item 4): real captures of the pinned CLIs in narrow
80x24 panes, their pickers and the OpenCode family's "Allow always" focus and confirm, classified
and extracted as the deriver does (``classify`` then ``normalize_request`` with the session's
cwd and HOME).

Made by driving each real CLI (Claude Code 2.1.197, Codex 0.171.0, OpenCode 1.18.33, Kilo
7.7.7) in its own tmux server against the scripted model server making one tool call; the
paths on screen are the capture's own: ``/tmp/elowen-cap/<cli>-<scene>/work/repo`` (the cwd) and
``/tmp/elowen-cap/<cli>-<scene>/home`` (the fake HOME). See tests/fixtures/screens/CAPTURED.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen_builtins.agents.screen import classify
from elowen_sdk.screen import normalize_request, strip_ansi

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"


def _world(cli: str, scene: str) -> tuple[str, str]:
    base = f"/tmp/elowen-cap/{cli}-{scene}"
    return f"{base}/work/repo", f"{base}/home"


def _screen(cli: str, name: str, ansi: bool) -> tuple[str, str | None]:
    text = (SCREENS / cli / "captured" / f"{name}{'.ansi' if ansi else ''}.txt").read_text()
    return (strip_ansi(text), text) if ansi else (text, None)


def _request(cli: str, name: str, scene: str, ansi: bool) -> dict:
    screen, escapes = _screen(cli, name, ansi)
    c = classify(cli, screen, escapes=escapes)
    assert c.state == "permission_prompt" and c.answerable, (name, c.state)
    cwd, home = _world(cli, scene)
    return normalize_request(c.request, cwd=cwd, home=home)


ANSI = pytest.mark.parametrize("ansi", [False, True], ids=["plain", "ansi"])


# ---------------------------------------------------------------- narrow panes: the same exact action


@ANSI
def test_claude_webfetch_80x24_names_the_whole_url(ansi: bool) -> None:
    r = _request("claude", "26_permission_prompt_webfetch_80x24", "webfetch", ansi)
    assert r["kind"] == "fetch" and r["url"] == "https://example.com/some/long/path/page.html" and r["complete"]


@ANSI
def test_claude_write_outside_80x24_resolves_the_header_path(ansi: bool) -> None:
    # the question says "e2e-outside-write.txt", the header "../../home/e2e-outside-write.txt"
    r = _request("claude", "27_permission_prompt_write_outside_80x24", "write", ansi)
    cwd, home = _world("claude", "write")
    assert r["kind"] == "write" and r["paths"] == [f"{home}/e2e-outside-write.txt"] and r["diff"] == "1 hello" and r["complete"]


@ANSI
def test_claude_bash_warning_80x24_keeps_the_command_exact(ansi: bool) -> None:
    r = _request("claude", "28_permission_prompt_bash_warning_80x24", "bash", ansi)
    assert r["command"] == "elowen close $ELOWEN_TASK --summary done" and r["description"] == "Close the task" and r["complete"]


@ANSI
def test_codex_apply_patch_80x24_names_the_destination(ansi: bool) -> None:
    r = _request("codex", "26_permission_prompt_apply_patch_80x24", "patch", ansi)
    _, home = _world("codex", "patch")
    assert r["kind"] == "patch" and r["paths"] == [f"{home}/.ssh/authorized_keys"] and r["complete"]
    assert "+ssh-ed25519 AAAAC3Nza fake@host" in (r["diff"] or "")


@ANSI
def test_kilo_external_directory_80x24_shown_as_tilde(ansi: bool) -> None:
    # a narrow Kilo pane abbreviates the agent's HOME to "~": resolved with the session's HOME
    screen, _ = _screen("kilo", "26_permission_prompt_external_directory_80x24", ansi)
    assert "Access external directory ~" in screen
    r = _request("kilo", "26_permission_prompt_external_directory_80x24", "dir", ansi)
    _, home = _world("kilo", "dir")
    assert r["kind"] == "directory" and r["directory"] == home and r["patterns"] == [f"{home}/*"] and r["complete"]


@ANSI
def test_opencode_external_directory_80x24(ansi: bool) -> None:
    r = _request("opencode", "28_permission_prompt_external_directory_80x24", "dir", ansi)
    _, home = _world("opencode", "dir")
    assert r["kind"] == "directory" and r["directory"] == home and r["patterns"] == [f"{home}/*"] and r["complete"]


def test_kilo_tilde_without_a_known_home_is_not_understood() -> None:
    c = classify("kilo", _screen("kilo", "26_permission_prompt_external_directory_80x24", False)[0])
    r = normalize_request(c.request, cwd=_world("kilo", "dir")[0], home=None)
    assert r["directory"] is None and r["complete"] is False and r["missing"] == ["directory"]


# ---------------------------------------------------------------- pickers are never answered


@pytest.mark.parametrize("cli,name", [("claude", "29_unknown_dialog_model_picker_200x50"), ("codex", "27_unknown_dialog_model_picker_200x50")])
@ANSI
def test_real_model_pickers_are_unknown_dialogs(cli: str, name: str, ansi: bool) -> None:
    screen, escapes = _screen(cli, name, ansi)
    c = classify(cli, screen, escapes=escapes)
    assert c.state == "unknown_dialog" and not c.answerable and c.approve_keys == ()


# ---------------------------------------------------------------- "Allow always" (OpenCode family)


@ANSI
def test_opencode_always_confirm_is_not_a_permission_prompt(ansi: bool) -> None:
    # "△ Always allow … This will allow the following patterns until OpenCode is restarted
    # - echo *  Confirm Cancel": a human's choice, never confirmed by the overseer
    screen, escapes = _screen("opencode", "27_unknown_dialog_allow_always_confirm_200x50", ansi)
    assert "This will allow the following patterns" in screen
    c = classify("opencode", screen, escapes=escapes)
    assert c.state == "unknown_dialog" and not c.answerable


@pytest.mark.parametrize(
    ("cli", "name", "lasts"),
    [
        ("opencode", "27_unknown_dialog_allow_always_confirm_200x50", "until OpenCode is restarted"),
        ("kilo", "29_unknown_dialog_allow_always_confirm_200x50", "permanently"),  # Kilo's is for good
    ],
)
@ANSI
def test_allow_always_confirms_are_never_answered(cli: str, name: str, lasts: str, ansi: bool) -> None:
    screen, escapes = _screen(cli, name, ansi)
    assert f"This will allow the following patterns {lasts}" in screen and "Confirm   Cancel" in screen
    c = classify(cli, screen, escapes=escapes)
    assert c.state == "unknown_dialog" and not c.answerable and c.approve_keys == ()


@pytest.mark.parametrize(
    "cli,name", [("opencode", "26_permission_prompt_allow_always_focused_200x50"), ("kilo", "28_permission_prompt_allow_always_focused_200x50")]
)
def test_focus_on_allow_always_is_seen_in_the_escapes(cli: str, name: str) -> None:
    # the plain text of a prompt with "Allow always" focused is the same as with "Allow once"
    # focused; only the escapes tell them apart, and approving with Enter would then allow always
    plain, _ = _screen(cli, name, False)
    assert classify(cli, plain).selected == 0 and classify(cli, plain).approve_keys == ("Enter",)
    screen, escapes = _screen(cli, name, True)
    c = classify(cli, screen, escapes=escapes)
    assert c.state == "permission_prompt" and c.options == ("Allow once", "Allow always", "Reject")
    assert c.selected == 1 and c.approve_keys == ("Left", "Enter")
    assert c.reject_keys == classify(cli, plain).reject_keys and c.reject_keys[0] == "Escape"  # not focus-dependent


def test_kilo_description_is_not_read_as_a_file() -> None:
    # Kilo draws a bash call's description as "# Write hi": that is prose, not a write of "hi"
    r = _request("kilo", "28_permission_prompt_allow_always_focused_200x50", "always", False)
    assert r["kind"] == "bash" and r["command"] == "echo hi > hi.txt" and r["description"] == "Write hi"
    assert r["paths"] == [] and r["file"] is None and r["complete"]


# ---------------------------------------------------------------- Kilo's blocking snapshot question


@ANSI
def test_kilo_slow_snapshot_question_goes_to_a_human(ansi: bool) -> None:
    # Kilo 7.7.7 asks this (blocking) before the first tool call when snapshotting the
    # repository is slow; the permission prompt waits behind it. Never answered automatically.
    screen, escapes = _screen("kilo", "27_unknown_dialog_snapshot_slow_200x50", ansi)
    assert "Do you want to disable Snapshots for this repository?" in screen
    c = classify("kilo", screen, escapes=escapes)
    assert c.state == "unknown_dialog" and not c.answerable and c.approve_keys == ()

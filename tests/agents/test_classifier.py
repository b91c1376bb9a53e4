"""Screen classifier: real captures of the four CLIs, hand-made look-alikes, engine rules.

Fixtures: ``tests/fixtures/screens/<cli>/NN_<state>[_<suffix>].txt`` (plain capture) and
``….ansi.txt`` (the same screen captured with ``-e``); every file there and under
``<cli>/captured/`` is classified and must give the state in its name. Look-alikes:
``tests/fixtures/screens/lookalikes/<cli>__<state>__<name>.txt``; none may be answerable.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from elowen_builtins.agents.screen import (
    ANSWERABLE_STATES,
    STATES,
    PatternError,
    PatternSet,
    classify,
    detect_version,
    known_clis,
    load_patterns,
    strip_ansi,
    struck_text,
)

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"
CLIS = ("claude", "codex", "opencode", "kilo")
# longest first, so "permission_prompt" is not read as a shorter state
_STATE_NAMES = sorted(STATES, key=len, reverse=True)


def _state_in_name(path: Path) -> str | None:
    stem = path.name.removesuffix(".txt").removesuffix(".ansi")
    rest = stem.split("_", 1)[1] if "_" in stem else ""
    for state in _STATE_NAMES:
        if rest == state or rest.startswith(state + "_"):
            return state
    return None


def _expected_state(path: Path) -> str:
    state = _state_in_name(path)
    assert state is not None, f"{path}: no state in the file name (want NN_<state>[_<suffix>].txt)"
    return state


def _fixture_files() -> list[Path]:
    """Every capture whose name encodes its state. Captures still being named (e.g.
    ``07_after_reject_raw.txt``) are left out until they follow ``NN_<state>[_<suffix>]``."""
    files: list[Path] = []
    for cli in CLIS:
        files += sorted((SCREENS / cli).glob("*.txt"))
        files += sorted((SCREENS / cli / "captured").glob("*.txt"))
    return [p for p in files if _state_in_name(p) is not None]


def _classify_file(path: Path, cli: str):
    text = path.read_text(encoding="utf-8")
    if path.name.endswith(".ansi.txt"):
        return classify(cli, strip_ansi(text), escapes=text)
    return classify(cli, text)


def _cli_of(path: Path) -> str:
    return path.parent.parent.name if path.parent.name == "captured" else path.parent.name


FIXTURES = _fixture_files()


def test_fixture_set_is_complete() -> None:
    # every shared capture is copied (plain and -e) for each CLI
    for cli in CLIS:
        plain = [p for p in (SCREENS / cli).glob("*.txt") if not p.name.endswith(".ansi.txt")]
        states = {_expected_state(p) for p in plain}
        assert {"idle", "working", "permission_prompt", "exited"} <= states, cli
        for p in plain:
            if "handmade" not in p.name:
                assert p.with_name(p.name.removesuffix(".txt") + ".ansi.txt").is_file(), p
    assert len(FIXTURES) >= 46


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{_cli_of(p)}/{p.name}")
def test_fixture_state(path: Path) -> None:
    result = _classify_file(path, _cli_of(path))
    assert result.state == _expected_state(path)
    assert result.answerable == (result.state in ANSWERABLE_STATES)
    if not result.answerable:
        assert result.approve_keys == () and result.reject_keys == () and result.options == ()


# --------------------------------------------------------------------------- parsed requests

CMD = "echo hello-from-fake > fake_created.txt && ls -la"


@pytest.mark.parametrize("variant", ["", ".ansi"])
def test_claude_permission_prompt_parsed(variant: str) -> None:
    result = _classify_file(SCREENS / "claude" / f"06_permission_prompt{variant}.txt", "claude")
    assert result.state == "permission_prompt"
    assert result.request is not None
    assert result.request["tool"] == "Bash"
    assert result.request["command"] == CMD
    assert result.request["description"] == "Run a shell command (fake model)"
    assert result.request["question"] == "Do you want to proceed?"
    assert list(result.options) == ["Yes", "Yes, and always allow access to claude/ from this project", "No"]
    assert result.selected == 0
    assert list(result.approve_keys) == ["1"]
    assert list(result.reject_keys) == ["Escape"]
    assert result.choice_keys(3) == ["3"]
    assert result.choice_keys(2) == ["2"]
    with pytest.raises(ValueError):
        result.choice_keys(4)
    d = result.to_dict()
    assert {"state", "request", "options", "approve_keys", "reject_keys"} <= set(d)
    assert d["request"]["command"] == CMD and d["approve_keys"] == ["1"]


@pytest.mark.parametrize("variant", ["", ".ansi"])
def test_claude_trust_prompt_parsed(variant: str) -> None:
    result = _classify_file(SCREENS / "claude" / f"03_trust_prompt{variant}.txt", "claude")
    assert result.state == "trust_prompt"
    assert list(result.options) == ["Yes, I trust this folder", "No, exit"]
    assert result.selected == 0 and result.request is not None
    assert result.request["accept_index"] == 0
    assert result.request["folder"] == "/srv/demo/work/claude"
    assert list(result.approve_keys) == ["Enter"]


def test_trust_prompt_with_no_preselected_offers_no_approve_key() -> None:
    result = _classify_file(SCREENS / "claude" / "22_trust_prompt_no_preselected_handmade.txt", "claude")
    assert result.state == "trust_prompt"
    assert result.selected == 1 and result.request is not None and result.request["accept_index"] == 0
    assert result.approve_keys == ()  # a blind Enter would pick "No, exit"
    assert result.move_keys(0) == ["Up"]
    moved = result.move_keys(0)
    assert moved and result.choice_keys(1) == ["Up", "Enter"]


@pytest.mark.parametrize("variant", ["", ".ansi"])
def test_codex_prompts_parsed(variant: str) -> None:
    perm = _classify_file(SCREENS / "codex" / f"04_permission_prompt{variant}.txt", "codex")
    assert perm.state == "permission_prompt" and perm.request is not None
    assert perm.request["tool"] == "exec_command"
    assert perm.request["command"] == "echo hello > codex_file.txt"
    assert perm.request["description"] == "Fake model wants to run: echo hello > codex_file.txt"
    assert perm.options[0] == "Yes, proceed (y)" and perm.options[2].startswith("No, and tell Codex")
    assert list(perm.approve_keys) == ["y"] and list(perm.reject_keys) == ["Escape"]
    trust = _classify_file(SCREENS / "codex" / f"01_trust_prompt{variant}.txt", "codex")
    assert trust.state == "trust_prompt"
    assert list(trust.options) == ["Trust and continue", "Back to Agent Command Center"]
    assert trust.selected == 0 and list(trust.approve_keys) == ["Enter"]


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
@pytest.mark.parametrize("variant", ["", ".ansi"])
def test_opencode_family_permission_parsed(cli: str, variant: str) -> None:
    result = _classify_file(SCREENS / cli / f"03_permission_prompt{variant}.txt", cli)
    assert result.state == "permission_prompt" and result.request is not None
    assert result.request["tool"] == "bash"
    assert result.request["command"] == CMD
    want = "Shell command" if cli == "opencode" else "Run a shell command (fake model)"
    assert result.request["description"] == want
    assert list(result.options) == ["Allow once", "Allow always", "Reject"]
    assert list(result.approve_keys) == ["Enter"]
    assert result.choice_keys(3) == ["Right", "Right", "Enter"]
    assert list(result.reject_keys) == (["Escape"] if cli == "opencode" else ["Escape", "Enter"])


def test_narrow_pane_wrapped_prompts_classify() -> None:
    claude = _classify_file(SCREENS / "claude" / "20_permission_prompt_narrow_handmade.txt", "claude")
    assert claude.state == "permission_prompt" and claude.request is not None
    assert claude.request["tool"] == "Bash"
    assert claude.request["command"].startswith("echo hello-from-fake > fake_created.txt && ls -la &&")
    assert list(claude.options) == ["Yes", "Yes, and always allow access to claude/ from this project", "No"]
    codex = _classify_file(SCREENS / "codex" / "20_permission_prompt_narrow_handmade.txt", "codex")
    assert codex.state == "permission_prompt" and codex.request is not None
    assert codex.request["command"] == "echo hello > codex_file.txt"
    assert codex.options[1] == "Yes, and don't ask again for commands that start with `echo hello > codex_file.txt` (p)"


def test_tall_prompt_with_option_one_scrolled_off() -> None:
    result = _classify_file(SCREENS / "claude" / "21_permission_prompt_tall_handmade.txt", "claude")
    assert result.state == "permission_prompt"
    assert list(result.numbers) == [2, 3]
    assert list(result.options) == ["Yes, and always allow access to claude/ from this project", "No"]
    assert list(result.approve_keys) == ["1"]  # Claude selects option 1 by number even when not shown
    assert result.choice_keys(3) == ["3"]


def test_strike_through_marks_rejected_command() -> None:
    text = (SCREENS / "opencode" / "20_idle_rejected_struck_handmade.ansi.txt").read_text()
    result = classify("opencode", strip_ansi(text), escapes=text)
    assert result.state == "idle"
    assert result.struck == ("$ " + CMD,)
    approved = (SCREENS / "opencode" / "04_idle_finished_after_approve.ansi.txt").read_text()
    assert classify("opencode", strip_ansi(approved), escapes=approved).struck == ()
    assert classify("opencode", strip_ansi(text)).struck == ()  # no escapes given


def test_struck_text_sgr_forms() -> None:
    assert struck_text("a \x1b[1;9mgone\x1b[0m b") == ("gone",)
    assert struck_text("\x1b[38;5;9mred not struck\x1b[0m") == ()
    assert struck_text("\x1b[9mone\nline two\x1b[29m after") == ("one", "line two")


def test_nbsp_after_prompt_marker_is_plain_space() -> None:
    idle = (SCREENS / "claude" / "04_idle.txt").read_text()
    assert "❯\xa0" in idle
    assert classify("claude", idle).state == "idle"


# --------------------------------------------------------------------------- look-alikes

LOOKALIKES = sorted((SCREENS / "lookalikes").glob("*.txt"))


def test_lookalike_set_covers_pitfalls() -> None:
    names = " ".join(p.name for p in LOOKALIKES)
    for needed in ("numbered_list", "would_you_like", "quoted_old_prompt", "model_picker", "update_dialog"):
        assert needed in names
    assert len(LOOKALIKES) >= 10


@pytest.mark.parametrize("path", LOOKALIKES, ids=lambda p: p.name)
def test_lookalike_is_never_answerable(path: Path) -> None:
    cli, state, _ = path.name.split("__", 2)
    result = classify(cli, path.read_text(encoding="utf-8"))
    assert not result.answerable
    assert result.state == state
    assert result.approve_keys == () and result.reject_keys == ()
    with pytest.raises(ValueError):
        result.choice_keys(1)


def test_zero_lookalikes_answerable_in_total() -> None:
    answerable = [p.name for p in LOOKALIKES if classify(p.name.split("__")[0], p.read_text()).answerable]
    assert answerable == []


# --------------------------------------------------------------------------- engine rules


def test_empty_screen_is_starting() -> None:
    for cli in known_clis():
        assert classify(cli, "").state == "starting"
        assert classify(cli, "\n\n   \n").state == "starting"


def test_unknown_cli_raises() -> None:
    with pytest.raises(KeyError):
        classify("nope", "x")


def test_fingerprint_is_content_not_cursor() -> None:
    text = (SCREENS / "claude" / "06_permission_prompt.txt").read_text()
    a = classify("claude", text)
    moved = text.replace(" ❯ 1. Yes", "   1. Yes").replace("   3. No", " ❯ 3. No")
    b = classify("claude", moved)
    assert b.state == "permission_prompt" and b.selected == 2
    assert a.fingerprint == b.fingerprint
    other = classify("claude", text.replace("ls -la", "ls -l"))
    assert other.fingerprint != a.fingerprint


def test_scrollback_prompt_above_current_frame_is_ignored() -> None:
    # a live permission prompt, then the agent moved on: the same text stays above the composer
    prompt = (SCREENS / "claude" / "06_permission_prompt.txt").read_text().rstrip("\n").split("\n")
    idle = (SCREENS / "claude" / "04_idle.txt").read_text().rstrip("\n").split("\n")
    screen = "\n".join(prompt[11:] + idle[-4:])
    assert classify("claude", screen).state == "idle"


def test_version_detection_and_override() -> None:
    for cli, name, version in [
        ("claude", "04_idle.txt", "2.1.197"),
        ("codex", "02_idle.txt", "0.171.0"),
        ("opencode", "02_working.txt", "1.18.33"),
        ("kilo", "02_working.txt", "7.7.7"),
    ]:
        assert detect_version(cli, (SCREENS / cli / name).read_text()) == version
        assert version in load_patterns(cli).tested_versions
    base = """
[meta]
cli = "demo"
[frame]
order = ["permission_prompt", "idle"]
[states.idle]
footer = ['READY']
[states.permission_prompt]
question = ['Proceed\\?']
footer = ['OK or CANCEL']
option = '^\\s*(?P<cursor>>)?\\s*(?P<num>\\d+)\\.\\s+(?P<label>.+)$'
approve_keys = ["1"]
[versions."2".states.permission_prompt]
question = ['Continue\\?']
[versions."2.5".states.permission_prompt]
approve_keys = ["y"]
"""
    screen = "Continue?\n> 1. Yes\n  2. No\nOK or CANCEL\n"
    # without the override the question is unknown: a live dialog by its shape, never answerable
    assert PatternSet.from_toml(base).classify(screen).state == "unknown_dialog"
    v2 = PatternSet.from_toml(base, version="2.1.0").classify(screen)
    assert v2.state == "permission_prompt" and list(v2.approve_keys) == ["1"]
    v25 = PatternSet.from_toml(base, version="2.5.3").classify(screen)
    assert list(v25.approve_keys) == ["y"]
    assert PatternSet.from_toml(base, version="3.0").classify(screen).state == "unknown_dialog"


@pytest.mark.parametrize(
    "bad",
    [
        '[meta]\ncli = "x"\n[states.idle]\nfooter = ["("]\n',
        '[meta]\ncli = "x"\n[states.sleeping]\nfooter = ["a"]\n',
        '[states.idle]\nfooter = ["a"]\n',
        '[meta]\ncli = "x"\n[states.permission_prompt]\nquestion = ["a"]\n',
        '[meta]\ncli = "x"\n[states.permission_prompt]\nquestion = ["a"]\nfooter = ["b"]\noption = "(?P<num>\\\\d)"\n',
        "not toml [",
    ],
)
def test_bad_patterns_raise(bad: str) -> None:
    with pytest.raises(PatternError):
        PatternSet.from_toml(bad)


def test_shipped_patterns_compile_for_every_cli() -> None:
    for cli in CLIS:
        ps = load_patterns(cli, "99.0")
        assert ps.cli == cli
        assert "permission_prompt" in ps.prompts and {"idle", "working", "exited"} <= set(ps.signals)


def test_classify_speed_200x50() -> None:
    """Reports µs per classify on the real 200x50 captures; target well under 1 ms."""
    screens = [(cli, p.read_text()) for cli in CLIS for p in sorted((SCREENS / cli).glob("0*.txt")) if ".ansi" not in p.name]
    for cli, text in screens:  # warm the pattern cache
        classify(cli, text)
    per_call: list[float] = []
    for _ in range(20):
        t0 = time.perf_counter()
        for cli, text in screens:
            classify(cli, text)
        per_call.append((time.perf_counter() - t0) / len(screens) * 1e6)
    median_us = statistics.median(per_call)
    print(f"\nclassify: median {median_us:.1f} µs per 200x50 screen over {len(screens)} captures")
    assert median_us < 1000


def test_claude_choice_prompt_parsed() -> None:
    # hand-made from the AskUserQuestion layout in public reports (no real capture yet)
    result = _classify_file(SCREENS / "claude" / "26_choice_prompt_ask_user_question_handmade.txt", "claude")
    assert result.state == "choice_prompt" and result.request is not None
    assert result.request["question"] == "Which database should the service use?"
    assert list(result.options) == ["PostgreSQL", "SQLite", "Type something."]
    assert result.selected == 0 and result.approve_keys == ()
    assert result.choice_keys(2) == ["2"] and list(result.reject_keys) == ["Escape"]

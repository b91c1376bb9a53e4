"""The deriver's pure state machines on real captured screens (``tests/fixtures/screens``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen_builtins.agents.activity import ActivityTracker
from elowen_builtins.agents.screen import classify
from elowen_builtins.deriver.tracking import Debouncer, PromptTracker, SignalTracker, screen_hash, signal_for

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"


def screen(cli: str, name: str) -> str:
    return (SCREENS / cli / name).read_text(encoding="utf-8")


class Replay:
    """Feeds screens through a tracker as the live deriver does; records decisions made."""

    def __init__(self, cli: str) -> None:
        self.cli = cli
        self.prompts = PromptTracker()
        self.signals = SignalTracker()
        self.decisions: list[int] = []
        self.signal_log: list[str] = []
        self.t = 0.0

    def frame(self, text: str) -> None:
        self.t += 0.05
        c = classify(self.cli, text)
        h = screen_hash(text)
        change = self.prompts.observe(c, h, self.t)
        if change.appeared is not None:
            self.decisions.append(change.appeared.seq)
        sig = self.signals.observe(c, self.prompts.current)
        if sig:
            self.signal_log.append(sig)

    def answer(self, text: str) -> None:
        """Keys are sent for the current instance while ``text`` is on screen."""
        assert self.prompts.current is not None
        self.prompts.mark_answered(self.prompts.current, screen_hash(text), self.t)


CLAUDE_PROMPT = screen("claude", "06_permission_prompt.txt")
CLAUDE_WORKING = screen("claude", "05_working.txt")
CLAUDE_IDLE = screen("claude", "07_idle_finished_after_approve.txt")


def test_one_prompt_across_many_frames_is_one_instance() -> None:
    r = Replay("claude")
    r.frame(CLAUDE_WORKING)
    for _ in range(20):
        r.frame(CLAUDE_PROMPT)
    assert r.decisions == [1]
    r.answer(CLAUDE_PROMPT)
    for _ in range(5):  # the CLI has not redrawn yet: still the answered instance
        r.frame(CLAUDE_PROMPT)
    assert r.decisions == [1]
    r.frame(CLAUDE_WORKING)
    r.frame(CLAUDE_IDLE)
    assert r.decisions == [1]
    assert r.signal_log == ["working", "needs_input", "working", "complete"]


def test_same_prompt_twice_in_a_row_is_two_instances() -> None:
    r = Replay("claude")
    r.frame(CLAUDE_PROMPT)
    r.answer(CLAUDE_PROMPT)
    r.frame(CLAUDE_WORKING)  # it vanished ...
    r.frame(CLAUDE_PROMPT)  # ... and the identical prompt came back
    assert r.decisions == [1, 2]
    assert r.signal_log == ["needs_input", "working", "needs_input"]


def test_identical_prompt_redrawn_after_answer_without_vanishing_is_new() -> None:
    """Answered, then the screen changed (a second identical prompt drawn over the first)."""
    r = Replay("claude")
    r.frame(CLAUDE_PROMPT)
    r.answer(CLAUDE_PROMPT)
    changed = CLAUDE_PROMPT.replace("Welcome back!", "Welcome back?")
    assert classify("claude", changed).fingerprint == classify("claude", CLAUDE_PROMPT).fingerprint
    r.t += r.prompts.reappear_grace
    r.frame(changed)
    assert r.decisions == [1, 2]


def test_redraw_right_after_the_answer_is_not_a_new_prompt() -> None:
    """The CLI redraws the prompt before it has processed our keys: not answered again."""
    r = Replay("claude")
    r.frame(CLAUDE_PROMPT)
    r.answer(CLAUDE_PROMPT)
    r.frame(CLAUDE_PROMPT.replace("Welcome back!", "Welcome back?"))  # 50 ms later
    assert r.decisions == [1]
    assert r.prompts.current is not None and r.prompts.current.answered


def test_unanswered_prompt_that_vanishes_and_returns_is_new() -> None:
    r = Replay("claude")
    r.frame(CLAUDE_PROMPT)
    r.frame(CLAUDE_IDLE)
    r.frame(CLAUDE_PROMPT)
    assert r.decisions == [1, 2]


@pytest.mark.parametrize(
    "cli, name",
    [
        ("codex", "04_permission_prompt.txt"),
        ("opencode", "03_permission_prompt.txt"),
        ("kilo", "03_permission_prompt.txt"),
    ],
)
def test_other_clis_one_instance_per_appearance(cli: str, name: str) -> None:
    prompt = screen(cli, name)
    r = Replay(cli)
    for _ in range(3):
        r.frame(prompt)
    r.answer(prompt)
    r.frame(prompt)
    assert r.decisions == [1]


LOOKALIKES = sorted((SCREENS / "lookalikes").glob("*.txt"))


@pytest.mark.parametrize("path", LOOKALIKES, ids=lambda p: p.name)
def test_lookalikes_never_produce_decisions(path: Path) -> None:
    cli = path.name.split("__")[0]
    r = Replay(cli)
    text = path.read_text(encoding="utf-8")
    for _ in range(3):
        r.frame(text)
    r.frame(CLAUDE_WORKING if cli == "claude" else text)
    r.frame(text)
    assert r.decisions == []
    assert r.prompts.current is None


def test_signal_mapping() -> None:
    assert signal_for("starting") is None
    assert signal_for("idle") == "complete"
    assert signal_for("unknown_dialog") == "needs_input"
    assert signal_for("exited") == "exited"


# ---------------------------------------------------------------- debounce


def test_debounce_quiet_after_last_output() -> None:
    d = Debouncer(quiet=0.04, max_delay=0.15)
    assert d.due() is None
    d.output(10.0)
    assert d.due() == pytest.approx(10.04)
    d.output(10.02)
    assert d.due() == pytest.approx(10.06)
    d.fired()
    assert d.due() is None and not d.pending


def test_debounce_capped_for_constant_output() -> None:
    d = Debouncer(quiet=0.04, max_delay=0.15)
    t = 0.0
    fired_at = []
    while t < 1.0:
        d.output(t)  # output every 10 ms, never quiet
        due = d.due()
        assert due is not None
        if t >= due:
            fired_at.append(t)
            d.fired()
        t = round(t + 0.01, 3)
    assert len(fired_at) >= 6  # at least every ~150 ms
    gaps = [b - a for a, b in zip(fired_at, fired_at[1:], strict=False)]
    assert max(gaps) <= 0.15 + 0.02  # cap + the 10 ms sampling step (and float rounding)


def test_debounce_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        Debouncer(quiet=0.2, max_delay=0.1)


# ---------------------------------------------------------------- activity


def test_activity_idle_stalled_and_one_check_per_episode() -> None:
    a = ActivityTracker(idle_after=10, stall_after=30, now=0)
    assert a.observe("h1", 100, 0)
    assert not a.observe("h1", 100, 5)
    assert a.state(5) == "active"
    assert a.state(15) == "idle"
    assert a.state(31) == "stalled"
    assert a.new_stall(31)
    assert not a.new_stall(40)  # same episode
    assert a.observe("h2", 100, 41)  # the screen changed: episode over
    assert a.state(42) == "active"
    assert not a.new_stall(50)
    assert a.new_stall(72)  # a second stall episode

"""The intake classifier against the labelled set ``intake_messages.tsv`` (half chat that
mentions code, half work requests in several phrasings), and each of its rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen_builtins.core_loop.classify import classify
from elowen_builtins.core_loop.settings import DEFAULT_CHAT_PHRASES, DEFAULT_WORK_PHRASES, Settings

TABLE = Path(__file__).with_name("intake_messages.tsv")
HOLDOUT = Path(__file__).with_name("intake_holdout.tsv")


def labelled(path: Path = TABLE) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            label, message = line.split("\t", 1)
            assert label in ("chat", "work"), line
            rows.append((label, message))
    return rows


def scores(path: Path = TABLE) -> dict[str, float]:
    """Confusion counts, precision and recall of "work" over a labelled set."""
    tp = fp = fn = tn = 0
    for label, message in labelled(path):
        work = classify(message, work_phrases=DEFAULT_WORK_PHRASES, chat_phrases=DEFAULT_CHAT_PHRASES).is_work
        if work and label == "work":
            tp += 1
        elif work:
            fp += 1
        elif label == "work":
            fn += 1
        else:
            tn += 1
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": tp / (tp + fp), "recall": tp / (tp + fn)}


def test_labelled_set_is_large_and_balanced() -> None:
    rows = labelled()
    chat = sum(1 for label, _ in rows if label == "chat")
    work = len(rows) - chat
    assert len(rows) >= 200 and chat >= 100 and work >= 100
    assert len({m for _, m in rows}) == len(rows), "duplicate messages"


@pytest.mark.parametrize("path", [TABLE, HOLDOUT], ids=["main", "holdout"])
def test_precision_of_work_is_at_least_098_and_recall_reported(path: Path) -> None:
    s = scores(path)
    print(f"\nintake {path.name}: tp={s['tp']} fp={s['fp']} fn={s['fn']} tn={s['tn']} precision={s['precision']:.3f} recall={s['recall']:.3f}")
    assert s["precision"] >= 0.98
    assert s["recall"] >= 0.9


@pytest.mark.parametrize(
    ("message", "kind", "rule"),
    [
        ("Build me a small CLI that converts CSV to JSON, with tests.", "work", "request"),
        ("Can you build me a small CLI that converts CSV to JSON?", "chat", "question"),
        ("Build a CLI", "chat", "short"),
        ("I built a small CLI yesterday and it works great.", "chat", "no_request"),
        ("Don't build a CLI that converts CSV to JSON yet.", "chat", "no_request"),
        ("Write me a haiku about APIs and the people who use them.", "chat", "no_request"),
        ("Write a blog post about how we built our API.", "chat", "no_request"),
        ("Write down that the server migration is on Monday.", "chat", "no_request"),
        ("Set up a meeting with the backend team for Thursday.", "chat", "no_request"),
        ("Start the dev server on port 8000 and watch it.", "chat", "no_request"),
        ("Create a CLI password manager that stores secrets encrypted.", "work", "request"),
        ("```\nbuild me a CLI that converts CSV to JSON with tests\n```", "chat", "empty"),
        ("> build me a CLI that converts CSV to JSON with tests\nlol look at this", "chat", "short"),
        ("Treat this as a project: rename my photos", "work", "work_phrase"),
        ("Just a question: treat this as a project? Build me a CLI that converts CSV.", "chat", "chat_phrase"),
        ("", "chat", "empty"),
    ],
)
def test_rules(message: str, kind: str, rule: str) -> None:
    verdict = classify(message, work_phrases=DEFAULT_WORK_PHRASES, chat_phrases=DEFAULT_CHAT_PHRASES)
    assert (verdict.kind, verdict.rule) == (kind, rule), verdict


def test_configured_phrases_replace_the_defaults() -> None:
    settings = Settings.from_config({"intake_work_phrases": ["MAKE IT SO"], "intake_chat_phrases": ["hold on"]})
    assert settings.intake_work_phrases == ("make it so",)
    kwargs = {"work_phrases": settings.intake_work_phrases, "chat_phrases": settings.intake_chat_phrases}
    assert classify("Make it so: a tiny thing", **kwargs).is_work
    assert not classify("treat this as a project: a tool that renames my files", **kwargs).is_work
    assert not classify("hold on, build me a CLI that converts CSV to JSON", **kwargs).is_work


def test_settings_defaults_are_off() -> None:
    s = Settings.from_config({})
    assert (s.intake_enabled, s.executor_enabled, s.plan_approval) == (False, False, False)
    assert (s.executor_max_iterations, s.executor_max_task_attempts, s.executor_stop_on_budget) == (20, 3, True)
    assert (s.pulse_enabled, s.pulse_every_n_tasks, s.receipt_enabled) == (True, 3, True)

"""Pure units: the level policy, the model-answer parser, levels."""

from __future__ import annotations

import pytest

from elowen_builtins.overseer.config import OverseerConfig, parse_level
from elowen_builtins.overseer.policy import Proposal, destructive_reasons, finalize
from elowen_builtins.overseer_relay.relay import no_model_proposal, parse_answer


@pytest.mark.parametrize(
    ("kind", "level", "proposal", "expected"),
    [
        ("prompt", 1, Proposal("approve", 0.9), "approve"),
        ("prompt", 1, Proposal("approve", 0.85), "approve"),
        ("prompt", 1, Proposal("approve", 0.84), "escalate"),
        ("prompt", 2, Proposal("approve", 0.7), "approve"),
        ("prompt", 3, Proposal("approve", 0.59), "escalate"),
        ("prompt", 0, Proposal("approve", 1.0), "escalate"),
        ("prompt", 3, Proposal("approve", None), "escalate"),
        ("prompt", 3, Proposal("reject", 0.99), "escalate"),
        ("prompt", 3, Proposal("escalate", 0.99), "escalate"),
        ("question", 2, Proposal("choice", 0.9, choice=2), "choice"),
        ("question", 2, Proposal("approve", 0.9), "escalate"),
        ("review", 2, Proposal("reject", 0.9, text="add tests"), "reject"),
        ("review", 2, Proposal("reject", 0.5), "escalate"),
        ("message", 1, Proposal("answer", 0.9, text="yes"), "answer"),
        ("message", 1, Proposal("answer", 0.9, text="  "), "escalate"),
        ("check", 3, Proposal("approve", 0.99), "approve"),
    ],
)
def test_finalize(kind: str, level: int, proposal: Proposal, expected: str) -> None:
    final = finalize(kind, level, proposal, OverseerConfig().threshold(level))
    assert final.action == expected
    assert final.confidence == proposal.confidence


def test_review_rejections_used_up_escalate() -> None:
    assert finalize("review", 2, Proposal("reject", 0.99), 0.6, reviews_left=False).action == "escalate"


def test_no_model_rule() -> None:
    assert no_model_proposal("prompt", 3).action == "approve"
    assert no_model_proposal("review", 3).action == "approve"
    assert no_model_proposal("question", 3).action == "escalate"
    assert no_model_proposal("prompt", 2).action == "escalate"


@pytest.mark.parametrize(
    ("text", "action", "confidence"),
    [
        ('{"approve": true, "confidence": 0.9, "rationale": "ok"}', "approve", 0.9),
        ("```json\n{'approve': False, 'confidence': 0.8, 'rationale': 'no', 'note': 'add tests',}\n```", "reject", 0.8),
        ('Sure! {"approve": true, "confidence": 1.7, "rationale": "x"}', "escalate", None),
        ('{"approve": "yes", "confidence": 0.9, "rationale": "x"}', "escalate", 0.9),
        ('{"approve": true, "confidence": 0.', "escalate", None),
        ('{"approve": true} {"approve": false}', "escalate", None),
    ],
)
def test_parse_answer(text: str, action: str, confidence: float | None) -> None:
    proposal = parse_answer("review", text, source="relay:x/y")
    assert (proposal.action, proposal.confidence) == (action, confidence)


def test_parse_question_and_message() -> None:
    assert parse_answer("question", '{"choice": 2, "confidence": 0.9, "rationale": ""}', source="s").choice == 2
    assert parse_answer("question", '{"choice": null, "confidence": 0.9, "rationale": ""}', source="s").action == "escalate"
    assert parse_answer("message", '{"answer": "42", "confidence": 0.9, "rationale": ""}', source="s").text == "42"


def test_destructive_reasons_read_the_structured_request_only(tmp_path: object) -> None:
    repo = "/srv/repo"
    assert destructive_reasons({"payload": {"request": {"command": "rm -rf /etc"}}}, checkout=repo, home="/home/u")
    assert destructive_reasons({"payload": {"request": {"file": "/home/u/.ssh/authorized_keys"}}}, checkout=repo, home="/home/u")
    assert not destructive_reasons({"payload": {"request": {"command": "rm -rf build", "description": "rm -rf / secret .env"}}}, checkout=repo, home="/home/u")
    assert not destructive_reasons({"payload": {"request": {"question": "drop table users?"}}}, checkout=repo)
    assert not destructive_reasons({"payload": {"request": None}}, checkout=repo)


@pytest.mark.parametrize(("value", "level"), [("L0", 0), ("l3", 3), ("2", 2), (1, 1)])
def test_parse_level(value: object, level: int) -> None:
    assert parse_level(value) == level


@pytest.mark.parametrize("value", ["L4", "x", -1, True, ""])
def test_parse_level_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        parse_level(value)

"""Model-output JSON: lenient where it is safe, ValueError (escalate) everywhere else."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elowen_builtins.overseer_relay.model_json import MAX_CHARS, parse_model_json

DECISION = {"approve": True, "confidence": 0.9, "rationale": "tests pass"}
KEYS = {"approve", "confidence", "rationale"}


@pytest.mark.parametrize(
    "text",
    [
        '{"approve": true, "confidence": 0.9, "rationale": "tests pass"}',
        '```json\n{"approve": true, "confidence": 0.9, "rationale": "tests pass"}\n```',
        '```\n{"approve": true, "confidence": 0.9, "rationale": "tests pass"}\n```',
        "{'approve': True, 'confidence': 0.9, 'rationale': 'tests pass'}",
        "{'approve': true, 'confidence': 0.9, 'rationale': 'tests pass',}",
        '{"approve": true, "confidence": 0.9, "rationale": "tests pass",}',
        'Here is my decision:\n{"approve": true, "confidence": 0.9, "rationale": "tests pass"}\nLet me know.',
        'I considered {things}. {"approve": true, "confidence": 0.9, "rationale": "tests pass"}',
        '{"approve": true, "confidence": 0.9, "rationale": "tests pass"} and again {"approve": true, "confidence": 0.9, "rationale": "tests pass"}',
        '{\\"approve\\": true, \\"confidence\\": 0.9, \\"rationale\\": \\"tests pass\\"}',
        '"{\\"approve\\": true, \\"confidence\\": 0.9, \\"rationale\\": \\"tests pass\\"}"',
        "{\n  'approve': True,\n  'confidence': 0.9,\n  'rationale': 'tests pass',\n}",
    ],
)
def test_repairs_safe_variants(text: str) -> None:
    assert parse_model_json(text, schema_keys=KEYS) == DECISION


def test_keeps_braces_and_quotes_inside_strings() -> None:
    text = 'ok: {"approve": false, "confidence": 0.2, "rationale": "it\'s {unclear}: \\"maybe\\""}'
    assert parse_model_json(text, schema_keys=KEYS)["rationale"] == 'it\'s {unclear}: "maybe"'


def test_negative_numbers_and_nesting() -> None:
    assert parse_model_json("{'a': -1.5, 'b': [1, {'c': None}], 'd': +2}", schema_keys=None) == {
        "a": -1.5,
        "b": [1, {"c": None}],
        "d": 2,
    }


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"approve": true, "confidence": 0.', "unterminated"),
        ('```json\n{"approve": true,\n', "unterminated"),
        ('{"approve": true} {"approve": false}', "several different"),
        ("no json here", "no JSON object"),
        ("", "no JSON object"),
        ("{approve: true}", "cannot be read safely"),
        ('{"approve": tru}', "cannot be read safely"),
        ('{"approve": true, "confidence": NaN, "rationale": ""}', "non-JSON number"),
        ('{"approve": true, "approve": false}', "repeats the key"),
        ("{'approve': True, 'approve': False}", "cannot be read safely"),
        ("[1, 2]", "not an object"),
        ('"just a string"', "no JSON object"),
        ("{'a': 1e999}", "cannot be read safely"),
        ("{'a': __import__('os').system('rm -rf /')}", "cannot be read safely"),
        ("{'a': (1, 2)}", "cannot be read safely"),
        ("{'a': {1, 2}}", "cannot be read safely"),
        ("{'a': 'x' 'y'}", "cannot be read safely"),
        ("{'a': 0x10}", "cannot be read safely"),
        ("{'a': 1j}", "cannot be read safely"),
        ("{'a': f'{x}'}", "cannot be read safely"),
        ('{"approve": true, "confidence": 0.9}', "lacks required keys: rationale"),
    ],
)
def test_fails_closed(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_model_json(text, schema_keys=KEYS)


def test_rejects_oversized_and_non_text() -> None:
    with pytest.raises(ValueError, match="longer than"):
        parse_model_json("{" + " " * MAX_CHARS + "}", schema_keys=None)
    with pytest.raises(ValueError, match="not text"):
        parse_model_json(b'{"a": 1}', schema_keys=None)  # type: ignore[arg-type]


def test_deep_nesting_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_model_json("{'a': " + "[" * 5000 + "]" * 5000 + "}", schema_keys=None)
    with pytest.raises(ValueError):
        parse_model_json('{"a": ' + "[" * 50000 + "]" * 50000 + "}", schema_keys=None)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=5)


@settings(max_examples=300, deadline=None)
@given(json_objects)
def test_round_trips_valid_json(obj: dict[str, Any]) -> None:
    assert parse_model_json(json.dumps(obj), schema_keys=set(obj)) == obj
    assert parse_model_json(json.dumps(obj, indent=2, ensure_ascii=False), schema_keys=None) == obj


@settings(max_examples=200, deadline=None)
@given(json_objects, st.sampled_from(["```json\n{}\n```", "Decision: {}", "{}\nThanks!", "Sure.\n```\n{}\n```\n"]))
def test_round_trips_wrapped_json(obj: dict[str, Any], wrapper: str) -> None:
    assert parse_model_json(wrapper.replace("{}", json.dumps(obj), 1), schema_keys=None) == obj


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=120))
def test_never_raises_anything_but_value_error(text: str) -> None:
    try:
        result = parse_model_json(text, schema_keys=None)
    except ValueError:
        return
    assert isinstance(result, dict)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}[]'\":,\\ \n-+.0123456789eEtrufalsnNoTFxj_#`")), max_size=60))
def test_never_raises_on_json_like_noise(text: str) -> None:
    try:
        result = parse_model_json(text, schema_keys=None)
    except ValueError:
        return
    assert isinstance(result, dict)
    json.dumps(result, allow_nan=False)  # only JSON values come back


python_literals = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=8), python_literals, min_size=1, max_size=4))
def test_a_repair_never_changes_content(obj: dict[str, Any]) -> None:
    """Python-literal answers go through json-repair; what comes back is the literal's exact value
    or a ValueError (json-repair 0.64 drops a trailing ``\\n`` escape, for one: that escalates)."""
    try:
        result = parse_model_json(repr(obj), schema_keys=None)
    except ValueError:
        return
    assert result == obj


def test_a_content_changing_repair_escalates() -> None:
    assert parse_model_json("{'rationale': 'ok\\nthen more'}", schema_keys=None) == {"rationale": "ok\nthen more"}
    try:
        result = parse_model_json("{'rationale': 'ok\\n'}", schema_keys=None)
    except ValueError as exc:
        assert "cannot be read safely" in str(exc)
    else:
        assert result == {"rationale": "ok\n"}

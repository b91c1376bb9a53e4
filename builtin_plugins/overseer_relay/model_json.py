"""Parse the overseer model's almost-JSON answers, or fail closed.

Models asked for ``{"approve": …, "confidence": …, "rationale": …}`` often answer with code
fences, prose around the object, single quotes, Python ``True/False/None`` or trailing commas
(PITFALLS 20). The repair is the ``json-repair`` package's (``json_repair.loads``). That library
is built never to fail — it completes truncated input (``{"confidence": 0.`` becomes ``0.0``),
reads ``tru`` as the string ``"tru"``, keeps the last of two objects or of two equal keys and
returns ``NaN`` — and an answer that had to be guessed at must escalate, not approve. So
:func:`parse_model_json` accepts a repair only when it changed the spelling of the answer, not
its content:

1. strict JSON (without ``NaN``/``Infinity`` or repeated keys) is taken as it is; an object
   serialised as a JSON string is decoded once more;
2. otherwise the top-level ``{…}`` spans of the text are found (quotes respected); an
   unterminated one, or several different objects, raise;
3. a span that is not strict JSON is repaired by ``json-repair``, and the repair is kept only if
   the span's tokens (read by Python's tokenizer: strings, JSON numbers, ``true/false/null`` and
   ``True/False/None``, ``{}[],:``) are exactly the repaired value's, trailing commas and a
   unary ``+`` aside. A bare word, an operator, a non-JSON number, adjacent strings, a set, a
   repeated key or a completed truncation all fail that comparison.

Everything that fails raises :class:`ValueError`, and the caller escalates the decision.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from typing import Any

import json_repair

__all__ = ["MAX_CHARS", "parse_model_json"]

MAX_CHARS = 200_000
"""Longest accepted model answer, in characters (longer input raises ``ValueError``)."""

_MAX_NESTING = 200  # Python's own parser refuses deeper literals; so do we
_JSON_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_SKIPPED = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)

Token = tuple[str, Any]  # ("op", "{"), ("str", "x"), ("num", 1.5), ("lit", True)


def parse_model_json(text: str, *, schema_keys: set[str] | None = None) -> dict[str, Any]:
    """Return the one JSON object in ``text``.

    Accepted: strict JSON; JSON inside ```` ```json ```` fences or prose (the balanced ``{…}``);
    single-quoted keys and strings; ``True``/``False``/``None``; trailing commas; an object
    serialised twice (``"{\\"approve\\": true}"``). ``schema_keys`` are keys the object must
    have (extra keys are kept).

    Raises ``ValueError`` (and nothing else) when there is no object, the object is truncated or
    unbalanced, several different objects appear, a fragment that looks like an object cannot be
    read safely, the top level is not an object, or a required key is missing.
    """
    try:
        obj = _parse(text)
    except ValueError:
        raise
    except (RecursionError, MemoryError, SyntaxError, TypeError, OverflowError, tokenize.TokenError) as exc:
        raise ValueError(f"model output cannot be read safely: {type(exc).__name__}") from exc
    missing = sorted((schema_keys or set()) - obj.keys())
    if missing:
        raise ValueError(f"model output lacks required keys: {', '.join(missing)}")
    return obj


def _parse(text: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise ValueError("model output is not text")
    if len(text) > MAX_CHARS:
        raise ValueError(f"model output longer than {MAX_CHARS} characters")
    stripped = text.strip()
    strict = _strict(stripped)
    if isinstance(strict, str) and strict.lstrip().startswith("{"):
        strict = _strict(strict.strip())  # an object serialised as a JSON string
    if isinstance(strict, dict):
        return strict
    if strict is not None and not isinstance(strict, str):
        raise ValueError("model output is JSON but not an object")
    candidates, truncated = _balanced_objects(text)
    if truncated:
        raise ValueError("model output has an unterminated '{' (truncated or unbalanced)")
    found: list[dict[str, Any]] = []
    for candidate in candidates:
        try:
            found.append(_parse_candidate(candidate))
        except ValueError:
            if ":" in candidate:
                raise ValueError(f"model output has an object that cannot be read safely: {candidate[:80]!r}") from None
    if not found:
        raise ValueError("model output contains no JSON object")
    first = found[0]
    if any(other != first for other in found[1:]):
        raise ValueError("model output contains several different objects")
    return first


def _strict(text: str) -> Any:
    """``json.loads`` without NaN/Infinity or duplicate keys; ``None`` when it is not JSON."""
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError:
        return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"model output uses the non-JSON number {name}")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"model output repeats the key {key!r}")
        out[key] = value
    return out


def _balanced_objects(text: str) -> tuple[list[str], bool]:
    """Top-level ``{…}`` spans (quotes respected) and whether a ``{`` never closes."""
    spans: list[str] = []
    i = 0
    while True:
        start = text.find("{", i)
        if start < 0:
            return spans, False
        depth, quote, j, end = 0, "", start, -1
        while j < len(text):
            ch = text[j]
            if quote:
                if ch == "\\":
                    j += 2
                    continue
                if ch == quote:
                    quote = ""
            elif ch == "\\":
                j += 2  # an escaped quote outside a string: {\"a\": 1}
                continue
            elif ch in "\"'":
                quote = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = j
                    break
            j += 1
        if end < 0:
            return spans, True
        spans.append(text[start : end + 1])
        i = end + 1


def _parse_candidate(candidate: str) -> dict[str, Any]:
    strict = _strict(candidate)
    if isinstance(strict, dict):
        return strict
    try:
        return _repaired(candidate)
    except ValueError:
        if '\\"' not in candidate:
            raise
    unescaped = _strict('"' + candidate + '"')  # {\"a\": 1} — quotes escaped once too often
    if not isinstance(unescaped, str):
        raise ValueError("model output has escaped quotes that do not decode")
    strict = _strict(unescaped)
    return strict if isinstance(strict, dict) else _repaired(unescaped)


def _repaired(candidate: str) -> dict[str, Any]:
    """``json-repair``'s reading of ``candidate``, if it only changed spelling (see the module doc)."""
    expected = _source_tokens(candidate)
    try:
        value = json_repair.loads(candidate)
    except Exception as exc:  # the library means never to raise; if it does, nothing was read
        raise ValueError(f"model output cannot be repaired: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise ValueError("model output is not an object")
    if _value_tokens(value) != expected:
        raise ValueError("model output needs a repair that would change its content")
    return value


def _source_tokens(candidate: str) -> list[Token]:
    """The JSON tokens of ``candidate`` as Python's tokenizer reads it; ``ValueError`` for any
    token that is not a JSON value or punctuation."""
    try:
        raw = list(tokenize.generate_tokens(io.StringIO(candidate).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ValueError(f"model output cannot be tokenised: {exc}") from None
    out: list[Token] = []
    sign = ""
    depth = 0
    previous = None
    for tok in raw:
        kind, text = tok.type, tok.string
        if kind in _SKIPPED:
            continue
        if sign and kind != tokenize.NUMBER:
            raise ValueError("model output has a sign before a non-number")
        if kind == tokenize.NAME:
            if text not in _NAMES:
                raise ValueError(f"model output has a bare word {text!r}")
            out.append(("lit", _NAMES[text]))
        elif kind == tokenize.NUMBER:
            if not _JSON_NUMBER.fullmatch(text):
                raise ValueError(f"model output has a non-JSON number {text!r}")
            number = float(text) if any(c in text for c in ".eE") else int(text)
            if isinstance(number, float) and number in (float("inf"), float("-inf")):
                raise ValueError(f"model output has a number out of range {text!r}")
            out.append(("num", -number if sign == "-" else number))
            sign = ""
        elif kind == tokenize.STRING:
            if text[0] not in "'\"" or text.startswith(("'''", '"""')):
                raise ValueError("model output has a prefixed or triple-quoted string")
            if previous == tokenize.STRING:
                raise ValueError("model output has adjacent strings")
            out.append(("str", ast.literal_eval(text)))
        elif kind == tokenize.OP and text in ("-", "+"):
            sign = text
        elif kind == tokenize.OP and text in "{}[],:":
            depth += 1 if text in "{[" else -1 if text in "}]" else 0
            if depth > _MAX_NESTING:
                raise ValueError(f"model output nests deeper than {_MAX_NESTING}")
            out.append(("op", text))
        elif kind == tokenize.ERRORTOKEN and text.isspace():
            continue
        else:
            raise ValueError(f"model output has the token {text!r}")
        previous = kind
    if sign:
        raise ValueError("model output ends with a sign")
    return [t for k, t in enumerate(out) if not (t == ("op", ",") and k + 1 < len(out) and out[k + 1] in (("op", "}"), ("op", "]")))]


def _value_tokens(value: Any) -> list[Token]:
    """The tokens of ``value`` written as JSON (the inverse of :func:`_source_tokens`)."""
    out: list[Token] = []

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            out.append(("op", "{"))
            for k, (key, inner) in enumerate(item.items()):
                if k:
                    out.append(("op", ","))
                out.extend((("str", key), ("op", ":")))
                walk(inner)
            out.append(("op", "}"))
        elif isinstance(item, list):
            out.append(("op", "["))
            for k, inner in enumerate(item):
                if k:
                    out.append(("op", ","))
                walk(inner)
            out.append(("op", "]"))
        elif item is None or isinstance(item, bool):
            out.append(("lit", item))
        elif isinstance(item, (int, float)):
            out.append(("num", item))
        else:
            out.append(("str", item))

    walk(value)
    return out

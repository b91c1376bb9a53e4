"""Parse the overseer model's almost-JSON answers, or fail closed.

Models asked for ``{"approve": …, "confidence": …, "rationale": …}`` often answer with code
fences, prose around the object, single quotes, Python ``True/False/None`` or trailing commas
(PITFALLS 20). :func:`parse_model_json` accepts those and nothing it would have to guess at:
a truncated object, two different objects, unquoted keys, ``NaN``, duplicate keys or missing
required keys raise :class:`ValueError`, and the caller escalates the decision to a human.

Why not the ``json-repair`` package: it is built never to fail — it completes truncated input
(``{"confidence": 0.`` becomes ``0.0``), turns ``tru`` into the string ``"tru"`` and keeps the
last of two objects — which would let a garbled answer approve an action. Here the lenient
path is Python's own literal grammar (``ast``) restricted to JSON types, so nothing is evaluated
and nothing is invented. Standard library only.
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
import tokenize
import warnings
from typing import Any

__all__ = ["MAX_CHARS", "parse_model_json"]

MAX_CHARS = 200_000
"""Longest accepted model answer, in characters (longer input raises ``ValueError``)."""

_JSON_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
_NAME_MAP = {"true": "True", "false": "False", "null": "None", "True": "True", "False": "False", "None": "None"}


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
        return _python_literal(candidate)
    except ValueError:
        if '\\"' not in candidate:
            raise
    unescaped = _strict('"' + candidate + '"')  # {\"a\": 1} — quotes escaped once too often
    if not isinstance(unescaped, str):
        raise ValueError("model output has escaped quotes that do not decode")
    strict = _strict(unescaped)
    return strict if isinstance(strict, dict) else _python_literal(unescaped)


def _python_literal(candidate: str) -> dict[str, Any]:
    """Read ``candidate`` with Python's literal grammar limited to JSON values."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(candidate).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ValueError(f"model output cannot be tokenised: {exc}") from None
    out: list[tuple[int, str]] = []
    previous = None
    for tok in tokens:
        kind, value = tok.type, tok.string
        if kind in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
                    tokenize.ENDMARKER):
            continue
        if kind == tokenize.NAME:
            if value not in _NAME_MAP:
                raise ValueError(f"model output has a bare word {value!r}")
            value = _NAME_MAP[value]
        elif kind == tokenize.NUMBER and not _JSON_NUMBER.fullmatch(value):
            raise ValueError(f"model output has a non-JSON number {value!r}")
        elif kind == tokenize.STRING:
            if value[0] not in "'\"" or value.startswith(("'''", '"""')):
                raise ValueError("model output has a prefixed or triple-quoted string")
            if previous == tokenize.STRING:
                raise ValueError("model output has adjacent strings")
        elif kind == tokenize.OP and value not in "{}[],:-+":
            raise ValueError(f"model output has the operator {value!r}")
        elif kind == tokenize.ERRORTOKEN and not value.isspace():
            raise ValueError(f"model output has an unreadable token {value!r}")
        out.append((kind, value))
        previous = kind
    source = " ".join(value for _, value in out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            raise ValueError(f"model output is not a literal: {exc.msg}") from None
    value = _convert(tree.body)
    if not isinstance(value, dict):
        raise ValueError("model output is not an object")
    return value


def _convert(node: ast.AST) -> Any:
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise ValueError("model output has a non-string key")
            if key.value in out:
                raise ValueError(f"model output repeats the key {key.value!r}")
            out[key.value] = _convert(value)
        return out
    if isinstance(node, ast.List):
        return [_convert(item) for item in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _convert(node.operand)
        if isinstance(inner, bool) or not isinstance(inner, (int, float)):
            raise ValueError("model output has a sign before a non-number")
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (bool, str, int)):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
    raise ValueError(f"model output has a non-JSON value ({type(node).__name__})")

"""Matching helpers of :class:`~elowen_sdk.screen.PatternSet`: signal rules, option lists and
the request fields a prompt shows."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

from ._model import _Extractor, _Frame, _PromptRule, _SignalRule


def _signal_matches(rule: _SignalRule, fr: _Frame) -> bool:
    hit = (
        any(p.search(fr.footer_text) for p in rule.footer)
        or any(p.search(fr.frame_text) for p in rule.frame)
        or any(p.search(fr.tail_text) for p in rule.tail)
        or any(p.search(fr.bottom_text) for p in rule.bottom)
        or (bool(rule.blank_frame_tail) and not fr.frame_text.strip() and any(p.search(fr.tail_text) for p in rule.blank_frame_tail))
    )
    if hit and rule.none:
        return not any(p.search(fr.frame_text) or p.search(fr.footer_text) for p in rule.none)
    return hit


def _parse_options(rule: _PromptRule, lines: Sequence[str]) -> tuple[list[str], list[int], int | None]:
    assert rule.option is not None
    options: list[str] = []
    numbers: list[int] = []
    selected: int | None = None
    indent = 0
    can_continue = False
    for line in lines:
        m = rule.option.match(line)
        if m:
            options.append(m.group("label").strip())
            numbers.append(int(m.group("num")))
            if m.groupdict().get("cursor"):
                selected = len(options) - 1
            indent = m.start("num")
            can_continue = True
            continue
        text = line.strip()
        if not text:
            can_continue = False
        elif can_continue and rule.continuation and len(line) - len(line.lstrip()) > indent:
            options[-1] = f"{options[-1]} {text}"
        else:
            can_continue = False
    # keep the last run of consecutive numbers (a menu), dropping stray numbered lines above it
    first = len(numbers) - 1
    while first > 0 and numbers[first - 1] == numbers[first] - 1:
        first -= 1
    if first > 0:
        options, numbers = options[first:], numbers[first:]
        selected = selected - first if selected is not None and selected >= first else None
    return options, numbers, selected


def _first_option_line(rule: _PromptRule, lines: Sequence[str]) -> int:
    if rule.option is None:
        return len(lines)
    return next((i for i, ln in enumerate(lines) if rule.option.match(ln)), len(lines))


def _extract_request(rule: _PromptRule, fr: _Frame, q_match: re.Match[str] | None, q_abs: int, lines_from: int) -> dict[str, Any]:
    """Fill the request: question groups, then ``line`` extractors on the lines from
    ``lines_from`` down (last match wins), ``header`` blocks on the lines above ``q_abs``."""
    if rule.name == "permission_prompt":
        request: dict[str, Any] = {"tool": None, "command": None, "file": None, "description": None, "question": None}
    else:
        request = {"question": None}
    if q_match is not None:
        request["question"] = q_match.group(0).strip()
        for key, val in q_match.groupdict().items():
            if val is not None and request.get(key) is None:
                request[key] = val.strip()
    below = "\n".join(fr.lines[lines_from:])
    whole: str | None = None
    for ex in rule.extractors:
        groups: dict[str, str] | None = None
        if ex.line is not None:
            if ex.whole_frame and whole is None:
                whole = "\n".join(fr.lines[fr.start :])
            matches = list(ex.line.finditer(whole if ex.whole_frame and whole is not None else below))
            if ex.many and matches:
                joined: dict[str, list[str]] = {}
                for m in matches:
                    for k, v in m.groupdict().items():
                        if v is not None and v.strip():
                            joined.setdefault(k, []).append(v.strip())
                groups = {k: "\n".join(vs) for k, vs in joined.items()}
            elif matches:  # the last match is the live one
                groups = {k: v for k, v in matches[-1].groupdict().items() if v is not None}
        elif ex.header is not None:
            groups = _extract_block(ex, fr.lines[fr.tail_start : q_abs])
        if groups is None:
            continue
        for key, val in {**ex.values, **groups}.items():
            if request.get(key) is None and val.strip():
                request[key] = val.strip()
    return request


def _extract_block(ex: _Extractor, lines: Sequence[str]) -> dict[str, str] | None:
    assert ex.header is not None
    head: re.Match[str] | None = None
    at = -1
    for i in range(len(lines) - 1, -1, -1):
        head = ex.header.match(lines[i])
        if head:
            at = i
            break
    if head is None:
        return None
    groups = {k: v for k, v in head.groupdict().items() if v is not None}
    kept = [ln for ln in lines[at + 1 :] if ln.strip()]
    if kept and kept[0].lstrip().startswith("╭"):
        kept = _unbox(kept)
    if ex.cut_header_indent:
        # lines at (or left of) the header's own indent are the CLI's warnings, not the block
        indent = len(lines[at]) - len(lines[at].lstrip())
        cut = next((i for i, ln in enumerate(kept) if len(ln) - len(ln.lstrip()) <= indent), len(kept))
        kept = kept[:cut]
    body = textwrap.dedent("\n".join(kept)).strip("\n")
    for pat in ex.block:
        m = pat.match(body)
        if m:
            groups.update({k: v for k, v in m.groupdict().items() if v is not None})
            break
    return groups


def _unbox(lines: Sequence[str]) -> list[str]:
    """The content of a block drawn in a ``╭…╮ │ … │ ╰…╯`` box: the top and bottom borders
    dropped, each ``│ text │`` line reduced to ``text`` (its left padding kept for dedent);
    lines after the box are kept as they are."""
    out: list[str] = []
    inside = False
    for ln in lines:
        s = ln.strip()
        if s.startswith("╭"):
            inside = True
            continue
        if inside and s.startswith("╰"):
            inside = False
            continue
        if inside and s.startswith("│"):
            body = s[1:]
            if body.rstrip().endswith("│"):
                body = body.rstrip()[:-1]
            out.append(body.rstrip())
        else:
            out.append(ln)
    return [ln for ln in out if ln.strip()]

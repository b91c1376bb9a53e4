"""Screen classifier: turns a captured coding-agent screen into a :class:`Classification`.

The engine is generic; everything CLI-specific (prompt wording, footers, cursor markers, keys)
is DATA in each provider package's ``patterns.toml`` (see ``docs/agents.md`` for the schema and
how to add patterns for a new CLI version). Rules it enforces (PITFALLS 1–7):

* Only the **current frame** is classified: the lines below the last separator line the CLI
  draws above its live UI (Claude's ``────`` rule), capped to the last ``frame.max_lines``
  lines. Scrollback above it never yields a prompt.
* A prompt is **answerable** (``trust_prompt``, ``permission_prompt``, ``choice_prompt``) only
  when its question is in the frame AND the live UI's footer marker is among the last
  ``frame.footer_lines`` non-blank lines of the screen (``Esc to cancel``, ``Press enter to
  confirm or esc to cancel``, OpenCode's button row with ``enter confirm``) AND at least
  ``min_options`` options parse. A prompt whose question scrolled off is still recognised when
  its footer is one of the state's ``headless_footer`` markers (specific to that prompt kind)
  and the visible options match ``headless_options``.
* Question and footer are matched on whitespace-collapsed text joined across lines, so a
  narrow pane that wraps them still classifies (a blank line joins as ``"\n"``).
* ``deny`` patterns (a ``/model`` picker, a CLI update dialog) veto every answerable state.

States: see :data:`STATES`. ``unknown_dialog`` (a live dialog that is none of the known
prompts) is never answerable: the caller must neither type into it nor answer it.

Typical cost: ~50–150 µs per call on a 200x50 screen (measured in the tests).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import re
import textwrap
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "ANSWERABLE_STATES",
    "CLI_PACKAGES",
    "STATES",
    "Classification",
    "PatternError",
    "PatternSet",
    "classify",
    "detect_version",
    "known_clis",
    "load_patterns",
    "strip_ansi",
    "struck_text",
]

log = logging.getLogger(__name__)

STATES: tuple[str, ...] = (
    "starting",
    "trust_prompt",
    "idle",
    "working",
    "permission_prompt",
    "choice_prompt",
    "error",
    "auth_required",
    "exited",
    "unknown_dialog",
)
"""Every state :func:`classify` can return. ``unknown_dialog`` is Elowen's addition: a live
dialog (selector, settings panel, update offer) that is not a known prompt. ``auth_required``:
the CLI cannot work because it is not logged in / has no credentials (Claude Code's footer
``Not logged in · Run /login``, Codex's sign-in screen); its signal is ``error`` and the task
must be blocked for a human, never answered or retried."""

ANSWERABLE_STATES: frozenset[str] = frozenset({"trust_prompt", "permission_prompt", "choice_prompt"})
"""States whose keys may be sent to the pane. Everything else must not be answered."""

CLI_PACKAGES: Mapping[str, str] = MappingProxyType(
    {
        "claude": "elowen_builtins.claude_code",
        "codex": "elowen_builtins.codex",
        "opencode": "elowen_builtins.opencode",
        "kilo": "elowen_builtins.kilo",
    }
)
"""CLI name → the package whose ``patterns.toml`` describes its screens."""

_SIGNAL_STATES = frozenset({"idle", "working", "error", "auth_required", "exited", "unknown_dialog"})
_DEFAULT_ORDER = ("trust_prompt", "permission_prompt", "choice_prompt", "auth_required", "working", "error", "idle", "exited", "unknown_dialog")
_CHOICE_MODES = frozenset({"number", "arrows"})

_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]")
_SGR_OR_ESC_RE = re.compile(r"\x1b\[([0-9;:]*)m|\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_WS_RE = re.compile(r"\s+")


class PatternError(ValueError):
    """A ``patterns.toml`` is malformed (bad regex, unknown state, wrong type). The message names
    the file and key."""


# --------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True)
class Classification:
    """The state of one captured screen.

    Attributes:
        state: one of :data:`STATES`.
        request: for ``permission_prompt``: ``{"tool", "command", "file", "description",
            "question"}`` (values ``None`` when not shown); for ``choice_prompt``:
            ``{"question"}``; for ``trust_prompt``: ``{"question", "accept_index"}``
            (``accept_index``: 0-based index of the "trust/yes" option or ``None``);
            ``None`` for the other states.
        options: option labels in screen order (only the visible ones).
        numbers: the number shown before each option (1-based; for un-numbered button rows the
            position). Parallel to ``options``.
        selected: 0-based index into ``options`` of the highlighted option, or ``None``.
        approve_keys / reject_keys: tmux key names that approve / reject (``()`` when the
            state is not answerable or, for a trust prompt, when the accept option is not the
            selected one: move the cursor with :meth:`move_keys`, re-classify, then approve).
        fingerprint: 16 hex chars hashing the prompt's content (state, request, options; not
            the cursor position). Identical consecutive prompts share it: de-duplicate by
            fingerprint AND appearance.
        cli / version: what was classified with (``version`` as given).
        struck: texts drawn with strike-through (``ESC[9m``) in the ``-e`` capture, e.g. an
            OpenCode/Kilo command the user rejected; empty when no ``escapes`` were given.
    """

    state: str
    request: Mapping[str, Any] | None = field(default=None, hash=False)
    options: tuple[str, ...] = ()
    numbers: tuple[int, ...] = ()
    selected: int | None = None
    approve_keys: tuple[str, ...] = ()
    reject_keys: tuple[str, ...] = ()
    fingerprint: str = ""
    cli: str = ""
    version: str | None = None
    struck: tuple[str, ...] = ()
    choice_mode: str = "number"
    move: tuple[str, str] = ("Up", "Down")

    @property
    def answerable(self) -> bool:
        """Whether keys may be sent to answer this screen."""
        return self.state in ANSWERABLE_STATES

    def move_keys(self, index: int) -> list[str]:
        """Keys moving the cursor from ``selected`` to the 0-based option ``index``.

        Raises:
            ValueError: not answerable, no known selection, or ``index`` out of range.
        """
        if not self.answerable or self.selected is None:
            raise ValueError(f"no selectable cursor in state {self.state!r}")
        if not 0 <= index < len(self.options):
            raise ValueError(f"option index {index} out of range 0..{len(self.options) - 1}")
        delta = index - self.selected
        return [self.move[1]] * delta if delta >= 0 else [self.move[0]] * (-delta)

    def choice_keys(self, n: int) -> list[str]:
        """Keys that pick option number ``n`` (the number shown on screen, 1-based; for button
        rows the 1-based position) and confirm it.

        Raises:
            ValueError: not answerable, or no visible option has that number.
        """
        if not self.answerable:
            raise ValueError(f"state {self.state!r} is not answerable")
        if n not in self.numbers:
            raise ValueError(f"no option number {n}; visible: {list(self.numbers)}")
        if self.choice_mode == "number" and n <= 9:
            return [str(n)]
        return [*self.move_keys(self.numbers.index(n)), "Enter"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form: ``state``, ``request``, ``options``, ``numbers``, ``selected``,
        ``approve_keys``, ``reject_keys``, ``answerable``, ``fingerprint``, ``struck``."""
        return {
            "state": self.state,
            "request": dict(self.request) if self.request is not None else None,
            "options": list(self.options),
            "numbers": list(self.numbers),
            "selected": self.selected,
            "approve_keys": list(self.approve_keys),
            "reject_keys": list(self.reject_keys),
            "answerable": self.answerable,
            "fingerprint": self.fingerprint,
            "struck": list(self.struck),
        }


# --------------------------------------------------------------------------- compiled rules


@dataclass(frozen=True, slots=True)
class _Extractor:
    line: re.Pattern[str] | None
    header: re.Pattern[str] | None
    block: tuple[re.Pattern[str], ...]
    values: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class _PromptRule:
    name: str
    question: tuple[re.Pattern[str], ...]
    footer: tuple[re.Pattern[str], ...]
    headless_footer: tuple[re.Pattern[str], ...]
    headless_options: re.Pattern[str] | None
    option: re.Pattern[str] | None
    options_fixed: tuple[str, ...]
    selected_default: int | None
    continuation: bool
    min_options: int
    extractors: tuple[_Extractor, ...]
    approve_keys: tuple[str, ...]
    reject_keys: tuple[str, ...]
    choice_mode: str
    accept_option: re.Pattern[str] | None
    deny: tuple[re.Pattern[str], ...]


@dataclass(frozen=True, slots=True)
class _SignalRule:
    name: str
    footer: tuple[re.Pattern[str], ...]
    frame: tuple[re.Pattern[str], ...]
    tail: tuple[re.Pattern[str], ...]
    bottom: tuple[re.Pattern[str], ...]
    none: tuple[re.Pattern[str], ...]
    blank_frame_tail: tuple[re.Pattern[str], ...] = ()


@dataclass(frozen=True, slots=True)
class _Frame:
    lines: list[str]
    start: int  # index in ``lines`` where the frame begins
    tail_start: int
    frame_text: str
    tail_text: str
    footer_text: str
    bottom_text: str
    flat: str
    offsets: list[int]


# --------------------------------------------------------------------------- pattern set


@dataclass(frozen=True, slots=True)
class PatternSet:
    """The compiled screen patterns of one CLI (and version). Build with :func:`load_patterns`
    or :meth:`from_toml`; classify with :meth:`classify`."""

    cli: str
    version: str | None
    tested_versions: tuple[str, ...]
    version_regex: re.Pattern[str] | None
    separator: re.Pattern[str] | None
    window: int
    max_lines: int
    tail_lines: int
    footer_lines: int
    bottom_lines: int
    deny_above: int
    order: tuple[str, ...]
    deny: tuple[re.Pattern[str], ...]
    move: tuple[str, str]
    prompts: Mapping[str, _PromptRule]
    signals: Mapping[str, _SignalRule]

    # ---- construction

    @classmethod
    def from_toml(cls, text: str, *, version: str | None = None, source: str = "<patterns>") -> PatternSet:
        """Parse and compile a ``patterns.toml`` text, applying the ``[versions."x.y"]``
        overrides whose key is a dotted prefix of ``version`` (least specific first).

        Raises:
            PatternError: invalid TOML, regex or schema.
        """
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PatternError(f"{source}: {exc}") from None
        return cls.from_mapping(raw, version=version, source=source)

    @classmethod
    def from_path(cls, path: str | Path, *, version: str | None = None) -> PatternSet:
        """:meth:`from_toml` on a file (for checking a user's patterns against a capture)."""
        p = Path(path)
        return cls.from_toml(p.read_text(encoding="utf-8"), version=version, source=str(p))

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], *, version: str | None = None, source: str = "<patterns>") -> PatternSet:
        """Compile an already-parsed patterns table (see :meth:`from_toml`)."""
        merged = _apply_versions(raw, version)
        return _compile(merged, version=version, source=source)

    # ---- classification

    def classify(self, screen: str, *, escapes: str | None = None) -> Classification:
        """Classify one captured screen (``capture-pane -p`` text; escape sequences, if any,
        are stripped). ``escapes`` is the same screen captured with ``-e``, used only for
        attributes (strike-through)."""
        struck = struck_text(escapes, self.window) if escapes else ()
        frame = self._frame(screen)
        if frame is None:
            return self._result("starting", struck=struck)
        for name in self.order:
            prompt = self.prompts.get(name)
            if prompt is not None:
                result = self._match_prompt(prompt, frame, struck)
                if result is not None:
                    return result
                continue
            signal = self.signals.get(name)
            if signal is not None and _signal_matches(signal, frame):
                return self._result(name, struck=struck, basis=frame.footer_text)
        return self._result("starting", struck=struck)

    def detect_version(self, screen: str) -> str | None:
        """The CLI version printed on the screen (``meta.version_regex``), or ``None``."""
        if self.version_regex is None:
            return None
        m = self.version_regex.search(strip_ansi(screen) if "\x1b" in screen else screen)
        return m.group(1) if m else None

    # ---- internals

    def _result(self, state: str, *, struck: tuple[str, ...], basis: str = "") -> Classification:
        return Classification(
            state=state,
            fingerprint=_fingerprint(state, basis),
            cli=self.cli,
            version=self.version,
            struck=struck,
            move=self.move,
        )

    def _frame(self, screen: str) -> _Frame | None:
        if "\x1b" in screen:
            screen = strip_ansi(screen)
        lines = screen.replace("\xa0", " ").split("\n")
        end = len(lines)
        while end and not lines[end - 1].strip():
            end -= 1
        if not end:
            return None
        lines = [ln.rstrip() for ln in lines[max(0, end - self.window) : end]]
        n = len(lines)
        start = 0
        sep = self.separator
        if sep is not None:
            for i in range(n - 1, -1, -1):
                if sep.match(lines[i]):
                    start = i + 1
                    break
        start = max(start, n - self.max_lines)
        tail_start = max(0, start - self.tail_lines)
        frame = lines[start:]
        tail = [ln for ln in lines[tail_start:start] if sep is None or not sep.match(ln)]
        bottom: list[str] = []
        for ln in reversed(frame):
            if ln.strip():
                bottom.append(ln)
                if len(bottom) == self.bottom_lines:
                    break
        bottom.reverse()
        footer = bottom[-self.footer_lines :]
        flat_parts: list[str] = []
        offsets: list[int] = []
        pos = 0
        for ln in frame:
            # wrapped lines join with a space; a blank line becomes "\n" (a paragraph break
            # that question regexes can refuse to cross)
            part = " ".join(ln.split()) or "\n"
            offsets.append(pos)
            flat_parts.append(part)
            pos += len(part) + 1
        return _Frame(
            lines=lines,
            start=start,
            tail_start=tail_start,
            frame_text="\n".join(frame),
            tail_text="\n".join(tail),
            footer_text=" ".join(" ".join(ln.split()) for ln in footer),
            bottom_text="\n".join(bottom),
            flat=" ".join(flat_parts),
            offsets=offsets,
        )

    def _match_prompt(self, rule: _PromptRule, fr: _Frame, struck: tuple[str, ...]) -> Classification | None:
        if not any(p.search(fr.footer_text) for p in rule.footer):
            return None
        q_match: re.Match[str] | None = None
        for pat in rule.question:
            for m in pat.finditer(fr.flat):
                if q_match is None or m.start() > q_match.start():
                    q_match = m
        headless = q_match is None
        if headless and not any(p.search(fr.footer_text) for p in rule.headless_footer):
            return None
        frame_lines = fr.lines[fr.start :]
        q_line = 0 if q_match is None else bisect.bisect_right(fr.offsets, q_match.start()) - 1
        # deny (a /model picker, an update offer) looks at the prompt and a few lines above it
        region = "\n".join(frame_lines[max(0, q_line - self.deny_above) :])
        if any(p.search(region) for p in (*self.deny, *rule.deny)):
            return None
        opt_from = 0 if headless else q_line + 1
        if rule.options_fixed:
            options = list(rule.options_fixed)
            numbers = list(range(1, len(options) + 1))
            selected = rule.selected_default
        elif rule.option is not None:
            options, numbers, selected = _parse_options(rule, frame_lines[opt_from:])
        else:
            options, numbers, selected = [], [], None
        if len(options) < rule.min_options:
            return None
        if headless and rule.headless_options is not None and not any(rule.headless_options.search(o) for o in options):
            return None
        q_abs = fr.start + (q_line if not headless else _first_option_line(rule, frame_lines))
        request = _extract_request(rule, fr, q_match, q_abs, fr.start if headless else q_abs)
        approve = rule.approve_keys
        if rule.accept_option is not None:
            accept = next((i for i, o in enumerate(options) if rule.accept_option.search(o)), None)
            request["accept_index"] = accept
            if accept is None or selected != accept:
                approve = ()
        basis = "\x1f".join([*(f"{k}={request[k]}" for k in sorted(request) if k != "accept_index"), *options])
        return Classification(
            state=rule.name,
            request=MappingProxyType(request),
            options=tuple(options),
            numbers=tuple(numbers),
            selected=selected,
            approve_keys=approve,
            reject_keys=rule.reject_keys,
            fingerprint=_fingerprint(rule.name, basis),
            cli=self.cli,
            version=self.version,
            struck=struck,
            choice_mode=rule.choice_mode,
            move=self.move,
        )


# --------------------------------------------------------------------------- helpers


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (CSI, OSC, DCS and two-byte escapes)."""
    return _ANSI_RE.sub("", text)


def struck_text(escapes: str, window: int = 200) -> tuple[str, ...]:
    """Runs of text drawn with strike-through (SGR 9 … 29/0) in an ``-e`` capture, each
    whitespace-collapsed, in screen order; only the last ``window`` lines are read. Struck
    pieces of one line separated only by unstruck blanks form one run (OpenCode 1.18 strikes
    ``$`` and the command separately)."""
    out: list[str] = []
    on = False
    for line in escapes.split("\n")[-window:]:
        segments: list[tuple[bool, str]] = []
        pos = 0
        for m in _SGR_OR_ESC_RE.finditer(line):
            if m.start() > pos:
                segments.append((on, line[pos : m.start()]))
            pos = m.end()
            if m.group(1) is not None:
                on = _sgr_strike(m.group(1), on)
        if pos < len(line):
            segments.append((on, line[pos:]))
        run: list[str] = []
        gap = ""
        for struck, text in segments:
            if struck:
                run += [gap, text] if run else [text]
                gap = ""
            elif run and not text.strip():
                gap += text
            else:
                _flush(run, out)
                gap = ""
        _flush(run, out)
    return tuple(out)


def _flush(run: list[str], out: list[str]) -> None:
    text = " ".join("".join(run).split())
    if text:
        out.append(text)
    run.clear()


def _sgr_strike(params: str, on: bool) -> bool:
    parts = params.replace(":", ";").split(";") if params else ["0"]
    i = 0
    while i < len(parts):
        p = parts[i]
        if p in ("", "0", "29"):
            on = False
        elif p == "9":
            on = True
        elif p in ("38", "48", "58") and i + 1 < len(parts):
            i += 2 if parts[i + 1] == "5" else 4 if parts[i + 1] == "2" else 0
        i += 1
    return on


def _fingerprint(state: str, basis: str) -> str:
    return hashlib.blake2b(f"{state}\x1e{_WS_RE.sub(' ', basis)}".encode(), digest_size=8).hexdigest()


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
    for ex in rule.extractors:
        groups: dict[str, str] | None = None
        if ex.line is not None:
            matches = list(ex.line.finditer(below))
            found = matches[-1] if matches else None  # the last match is the live one
            if found is not None:
                groups = {k: v for k, v in found.groupdict().items() if v is not None}
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
    body = textwrap.dedent("\n".join(ln for ln in lines[at + 1 :] if ln.strip())).strip("\n")
    for pat in ex.block:
        m = pat.match(body)
        if m:
            groups.update({k: v for k, v in m.groupdict().items() if v is not None})
            break
    return groups


# --------------------------------------------------------------------------- loading


def _apply_versions(raw: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    base = {k: v for k, v in raw.items() if k != "versions"}
    overrides = raw.get("versions", {})
    if not version or not isinstance(overrides, Mapping):
        return base
    have = version.split(".")
    keys = [k for k in overrides if k.split(".") == have[: len(k.split("."))]]
    for key in sorted(keys, key=lambda k: len(k.split("."))):
        base = _deep_merge(base, overrides[key])
    return base


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, val in over.items():
        if isinstance(val, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], val)
        else:
            out[key] = val
    return out


def _compile(raw: Mapping[str, Any], *, version: str | None, source: str) -> PatternSet:
    def fail(msg: str) -> PatternError:
        return PatternError(f"{source}: {msg}")

    def rx(value: Any, key: str, flags: int = 0) -> re.Pattern[str]:
        if not isinstance(value, str):
            raise fail(f"{key} must be a regex string")
        try:
            return re.compile(value, flags)
        except re.error as exc:
            raise fail(f"{key}: bad regex {value!r}: {exc}") from None

    def rxs(value: Any, key: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise fail(f"{key} must be a list of regex strings")
        return tuple(rx(v, f"{key}[{i}]", flags) for i, v in enumerate(value))

    def strs(value: Any, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f"{key} must be a list of strings")
        return tuple(value)

    meta = raw.get("meta", {})
    frame = raw.get("frame", {})
    keys = raw.get("keys", {})
    states = raw.get("states", {})
    if not all(isinstance(t, Mapping) for t in (meta, frame, keys, states)):
        raise fail("[meta], [frame], [keys] and [states] must be tables")
    cli = meta.get("cli")
    if not isinstance(cli, str) or not cli:
        raise fail("meta.cli is required")
    order = strs(frame.get("order"), "frame.order") or _DEFAULT_ORDER
    for name in (*order, *states):
        if name not in STATES or name == "starting":
            raise fail(f"unknown state {name!r} (known: {', '.join(s for s in STATES if s != 'starting')})")
    move = strs(keys.get("move"), "keys.move") or ("Up", "Down")
    if len(move) != 2:
        raise fail("keys.move must be [previous, next]")
    ml = re.MULTILINE
    prompts: dict[str, _PromptRule] = {}
    signals: dict[str, _SignalRule] = {}
    for name, spec in states.items():
        where = f"states.{name}"
        if not isinstance(spec, Mapping):
            raise fail(f"{where} must be a table")
        if name in _SIGNAL_STATES:
            signals[name] = _SignalRule(
                name=name,
                footer=rxs(spec.get("footer"), f"{where}.footer"),
                frame=rxs(spec.get("frame"), f"{where}.frame", ml),
                tail=rxs(spec.get("tail"), f"{where}.tail", ml),
                bottom=rxs(spec.get("bottom"), f"{where}.bottom", ml),
                none=rxs(spec.get("none"), f"{where}.none", ml),
                blank_frame_tail=rxs(spec.get("blank_frame_tail"), f"{where}.blank_frame_tail", ml),
            )
            continue
        extractors = []
        for i, ex in enumerate(spec.get("request", [])):
            ew = f"{where}.request[{i}]"
            if not isinstance(ex, Mapping) or ("line" in ex) == ("header" in ex):
                raise fail(f"{ew} must have exactly one of 'line' or 'header'")
            values = ex.get("set", {})
            if not isinstance(values, Mapping) or not all(isinstance(v, str) for v in values.values()):
                raise fail(f"{ew}.set must be a table of strings")
            extractors.append(
                _Extractor(
                    line=rx(ex["line"], f"{ew}.line", ml) if "line" in ex else None,
                    header=rx(ex["header"], f"{ew}.header") if "header" in ex else None,
                    block=rxs(ex.get("block"), f"{ew}.block", re.DOTALL),
                    values=MappingProxyType(dict(values)),
                )
            )
        choice_mode = spec.get("choice_mode", "number")
        if choice_mode not in _CHOICE_MODES:
            raise fail(f"{where}.choice_mode must be one of {sorted(_CHOICE_MODES)}")
        option = spec.get("option")
        fixed = strs(spec.get("options_fixed"), f"{where}.options_fixed")
        if option is None and not fixed:
            raise fail(f"{where} needs 'option' (a regex with groups num and label) or 'options_fixed'")
        opt_rx = rx(option, f"{where}.option") if option is not None else None
        if opt_rx is not None and not {"num", "label"} <= set(opt_rx.groupindex):
            raise fail(f"{where}.option must have named groups 'num' and 'label'")
        footer = rxs(spec.get("footer"), f"{where}.footer")
        question = rxs(spec.get("question"), f"{where}.question")
        if not footer or not question:
            raise fail(f"{where} needs both 'question' and 'footer'")
        prompts[name] = _PromptRule(
            name=name,
            question=question,
            footer=footer,
            headless_footer=rxs(spec.get("headless_footer"), f"{where}.headless_footer"),
            headless_options=rx(spec["headless_options"], f"{where}.headless_options") if "headless_options" in spec else None,
            option=opt_rx,
            options_fixed=fixed,
            selected_default=spec.get("selected_default"),
            continuation=bool(spec.get("continuation", True)),
            min_options=int(spec.get("min_options", 1)),
            extractors=tuple(extractors),
            approve_keys=strs(spec.get("approve_keys"), f"{where}.approve_keys"),
            reject_keys=strs(spec.get("reject_keys"), f"{where}.reject_keys"),
            choice_mode=choice_mode,
            accept_option=rx(spec["accept_option"], f"{where}.accept_option") if "accept_option" in spec else None,
            deny=rxs(spec.get("deny"), f"{where}.deny", ml),
        )
    sep = frame.get("separator")
    return PatternSet(
        cli=cli,
        version=version,
        tested_versions=strs(meta.get("tested_versions"), "meta.tested_versions"),
        version_regex=rx(meta["version_regex"], "meta.version_regex") if "version_regex" in meta else None,
        separator=rx(sep, "frame.separator") if sep else None,
        window=int(frame.get("window", 80)),
        max_lines=int(frame.get("max_lines", 40)),
        tail_lines=int(frame.get("tail_lines", 8)),
        footer_lines=int(frame.get("footer_lines", 3)),
        bottom_lines=max(int(frame.get("bottom_lines", 8)), int(frame.get("footer_lines", 3))),
        deny_above=int(frame.get("deny_above", 5)),
        order=tuple(order),
        deny=rxs(frame.get("deny"), "frame.deny", ml),
        move=(move[0], move[1]),
        prompts=MappingProxyType(prompts),
        signals=MappingProxyType(signals),
    )


def known_clis() -> tuple[str, ...]:
    """The CLI names with built-in patterns (``claude``, ``codex``, ``opencode``, ``kilo``)."""
    return tuple(CLI_PACKAGES)


@lru_cache(maxsize=16)
def _patterns_text(cli: str) -> str:
    package = CLI_PACKAGES.get(cli)
    if package is None:
        raise KeyError(f"no screen patterns for CLI {cli!r}; known: {', '.join(CLI_PACKAGES)}")
    return (resources.files(package) / "patterns.toml").read_text(encoding="utf-8")


@lru_cache(maxsize=64)
def load_patterns(cli: str, version: str | None = None) -> PatternSet:
    """The built-in, compiled patterns of ``cli`` for ``version`` (cached).

    Raises:
        KeyError: unknown CLI.
        PatternError: the shipped ``patterns.toml`` is malformed.
    """
    return PatternSet.from_toml(_patterns_text(cli), version=version, source=f"{CLI_PACKAGES[cli]}/patterns.toml")


def classify(cli: str, screen: str, *, version: str | None = None, escapes: str | None = None) -> Classification:
    """Classify a captured screen of ``cli`` (``claude``, ``codex``, ``opencode``, ``kilo``).

    Args:
        cli: the CLI name (see :func:`known_clis`).
        screen: rendered text of the visible pane (``capture-pane -p``); escapes are stripped.
        version: the CLI's version, selecting ``[versions."x.y"]`` overrides; ``None`` uses the
            base patterns.
        escapes: the same screen captured with ``-e`` (for strike-through detection).

    Raises:
        KeyError: unknown CLI.
    """
    return load_patterns(cli, version).classify(screen, escapes=escapes)


def detect_version(cli: str, screen: str) -> str | None:
    """The version the CLI prints on its screen (e.g. ``2.1.197`` from Claude's header), or
    ``None`` when not visible."""
    return load_patterns(cli).detect_version(screen)

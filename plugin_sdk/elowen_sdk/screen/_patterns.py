"""The compiled patterns of one CLI: :class:`PatternSet` (construction from ``patterns.toml``
and classification)."""

from __future__ import annotations

import bisect
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._match import _extract_request, _first_option_line, _parse_options, _signal_matches
from ._model import _CHOICE_MODES, _DEFAULT_ORDER, _SIGNAL_STATES, STATES, Classification, PatternError, _Extractor, _Frame, _PromptRule, _SignalRule
from ._text import fingerprint as _fingerprint
from ._text import focused_label, strip_ansi, struck_text

__all__ = ["PatternSet"]


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
    _option_rx: re.Pattern[str] | None = field(default=None, repr=False)
    """The numbered-option regex (with a ``cursor`` group) of the CLI's prompts, for dialogs
    recognised by their shape."""

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
        attributes: strike-through, and which button of a fixed button row is focused (its
        own background colour; :func:`~elowen_sdk.screen.focused_label`). A row focused on
        another button than the default gets approve keys that move back to the default
        first (a human in the terminal may have moved it: Enter would pick "Allow always")."""
        struck = struck_text(escapes, self.window) if escapes else ()
        frame = self._frame(screen)
        if frame is None:
            return self._result("starting", struck=struck)
        for name in self.order:
            prompt = self.prompts.get(name)
            if prompt is not None:
                result = self._match_prompt(prompt, frame, struck, escapes)
                if result is not None:
                    return result
                continue
            signal = self.signals.get(name)
            if signal is not None and _signal_matches(signal, frame):
                return self._result(name, struck=struck, basis=frame.footer_text)
        dialog = self._live_dialog(frame)
        if dialog is not None:
            question, options = dialog
            return replace(
                self._result("unknown_dialog", struck=struck, basis="\x1f".join([question, *options])),
                request=MappingProxyType({"question": question}),
                options=tuple(options),
            )
        return self._result("starting", struck=struck)

    def _live_dialog(self, fr: _Frame) -> tuple[str, list[str]] | None:
        """A dialog recognised by its shape, with no footer: a run of >= 2 numbered options,
        one under the cursor, ending on one of the last 2 non-blank lines of the frame, and a
        question line (ending in ``?``) at most 6 lines above the first option. Returns
        ``(question, options)`` or ``None``."""
        option = self._option_rx
        if option is None:
            return None
        lines = [ln for ln in fr.lines[fr.start :] if ln.strip()]
        if len(lines) < 3:
            return None
        end = len(lines)
        if not option.match(lines[-1]):
            end -= 1  # one hint line below the options is allowed
            if not option.match(lines[end - 1]):
                return None
        first = end - 1
        while first > 0 and option.match(lines[first - 1]):
            first -= 1
        matches = [option.match(ln) for ln in lines[first:end]]
        if len(matches) < 2 or not any(m is not None and m.groupdict().get("cursor") for m in matches):
            return None
        numbers = [int(m.group("num")) for m in matches if m is not None]
        if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
            return None
        for ln in reversed(lines[max(0, first - 6) : first]):
            text = ln.strip()
            if text.endswith("?"):
                return text, [m.group("label").strip() for m in matches if m is not None]
        return None

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

    def _match_prompt(self, rule: _PromptRule, fr: _Frame, struck: tuple[str, ...], escapes: str | None = None) -> Classification | None:
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
            focus = focused_label(escapes, options, self.window) if escapes and rule.choice_mode == "arrows" else None
            if focus is not None:
                selected = focus
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
        if rule.options_fixed and approve and selected is not None and rule.selected_default is not None and selected != rule.selected_default:
            delta = rule.selected_default - selected  # approve means the default button: go back to it
            approve = (*([self.move[1]] * delta if delta > 0 else [self.move[0]] * -delta), *approve)
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


# --------------------------------------------------------------------------- loading


def _scope(value: Any, where: str, fail: Any) -> bool:
    if value is None or value == "below":
        return False
    if value != "frame":
        raise fail(f"{where}.scope must be 'below' (default) or 'frame'")
    return True


def _block_cut(value: Any, where: str, fail: Any) -> bool:
    if value is None:
        return False
    if value != "header_indent":
        raise fail(f"{where}.block_cut must be 'header_indent'")
    return True


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
                    cut_header_indent=_block_cut(ex.get("block_cut"), ew, fail),
                    many=bool(ex.get("many", False)),
                    whole_frame=_scope(ex.get("scope"), ew, fail),
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
        _option_rx=next((r.option for r in prompts.values() if r.option is not None and "cursor" in r.option.groupindex), None),
    )

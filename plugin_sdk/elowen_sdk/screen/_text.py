"""Text helpers of the classifier: escape stripping, strike-through runs, fingerprints."""

from __future__ import annotations

import hashlib
import re

__all__ = ["fingerprint", "focused_label", "screen_hash", "strip_ansi", "struck_text"]

_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]")
_SGR_OR_ESC_RE = re.compile(r"\x1b\[([0-9;:]*)m|\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_WS_RE = re.compile(r"\s+")


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


def focused_label(escapes: str, labels: tuple[str, ...] | list[str], window: int = 200) -> int | None:
    """The index in ``labels`` of the button drawn with its own background colour, on the
    lowest line of an ``-e`` capture that shows every label in order (a button row such as
    OpenCode 1.18.33 / Kilo 7.7.7's ``Allow once   Allow always   Reject``, whose focused
    button is filled with the accent colour and the others are not — the plain text is the same
    whichever is focused). ``None`` when no such row is seen, or not exactly one label's
    background differs from all the others'."""
    for line in reversed(escapes.split("\n")[-window:]):
        plain: list[str] = []
        backs: list[str] = []
        bg = ""
        pos = 0
        for m in _SGR_OR_ESC_RE.finditer(line):
            if m.start() > pos:
                piece = line[pos : m.start()]
                plain.append(piece)
                backs += [bg] * len(piece)
            pos = m.end()
            if m.group(1) is not None:
                bg = _sgr_background(m.group(1), bg)
        if pos < len(line):
            plain.append(line[pos:])
            backs += [bg] * (len(line) - pos)
        text = "".join(plain)
        starts: list[int] = []
        at = 0
        for label in labels:
            found = text.find(label, at)
            if found < 0:
                break
            starts.append(found)
            at = found + len(label)
        if len(starts) != len(labels):
            continue
        colours = [backs[i] for i in starts]
        odd = [i for i, c in enumerate(colours) if colours.count(c) == 1]
        return odd[0] if len(odd) == 1 and len(set(colours)) == 2 else None
    return None


def _sgr_background(params: str, bg: str) -> str:
    """The background after one SGR sequence (``""`` is the default background)."""
    parts = params.replace(":", ";").split(";") if params else ["0"]
    i = 0
    while i < len(parts):
        p = parts[i]
        if p in ("", "0", "49"):
            bg = ""
        elif p == "48" and i + 1 < len(parts):
            n = 3 if parts[i + 1] == "5" else 5 if parts[i + 1] == "2" else 1
            bg = ";".join(parts[i : i + n])
            i += n - 1
        elif p in ("38", "58") and i + 1 < len(parts):
            i += 2 if parts[i + 1] == "5" else 4 if parts[i + 1] == "2" else 0
        elif p.isdigit() and (40 <= int(p) <= 47 or 100 <= int(p) <= 107):
            bg = p
        i += 1
    return bg


def fingerprint(state: str, basis: str) -> str:
    return hashlib.blake2b(f"{state}\x1e{_WS_RE.sub(' ', basis)}".encode(), digest_size=8).hexdigest()


def screen_hash(screen: str) -> str:
    """A short stable hash of a captured screen (16 hex chars): what the deriver and the
    decision owner compare to tell one frame from another."""
    return hashlib.blake2b(screen.encode("utf-8", "replace"), digest_size=8).hexdigest()

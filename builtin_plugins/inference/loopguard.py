"""Ends a generated reply that starts repeating itself.

Small local models (SmolLM2-135M, the embedded default) sometimes fall into a loop even with a
repeat penalty: the same sentence again and again until the token cap. :class:`LoopGuard`
watches the text as it is generated and reports a loop when a sentence or line of at least
:data:`MIN_SEGMENT` characters is completed for the ``limit + 1``-th time; the reply is then cut
just before that repetition (:attr:`LoopGuard.text`) and generation should stop.

Segments: text split at a sentence end (``.``, ``!`` or ``?`` followed by white space) or at
line breaks; compared after stripping white space. Short segments (code fences, ``}``, list
markers) are ignored: they repeat legitimately.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["MIN_SEGMENT", "LoopGuard"]

MIN_SEGMENT = 12
"""Segments shorter than this many characters (stripped) are never counted as a loop."""

_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")


class LoopGuard:
    """Feed generated pieces with :meth:`feed`; it returns ``True`` once a loop is found.

    Args:
        limit: how many times a segment may occur; its ``limit + 1``-th occurrence is a loop.
        enabled: ``False`` only collects the text (e.g. for grammar-constrained JSON).
    """

    def __init__(self, limit: int = 2, *, enabled: bool = True) -> None:
        self.limit = limit
        self.enabled = enabled
        self._text = ""
        self._start = 0  # where the segment being generated begins
        self._seen: Counter[str] = Counter()
        self._cut: int | None = None

    @property
    def looped(self) -> bool:
        """Whether a loop was found."""
        return self._cut is not None

    @property
    def text(self) -> str:
        """The text so far; after a loop, only what came before the repetition."""
        return self._text if self._cut is None else self._text[: self._cut].rstrip()

    def feed(self, piece: str) -> bool:
        """Add ``piece``; ``True`` when the text now repeats itself (stop generating)."""
        if self._cut is not None:
            return True
        self._text += piece
        if not self.enabled:
            return False
        for m in _BOUNDARY.finditer(self._text, self._start):
            if self._check(self._start, m.start()):
                return True
            self._start = m.end()
        return False

    def finish(self) -> bool:
        """Count the last, unterminated segment too; ``True`` if it makes a loop."""
        if self.enabled and self._cut is None and self._start < len(self._text):
            self._check(self._start, len(self._text))
        return self._cut is not None

    def _check(self, start: int, end: int) -> bool:
        key = self._text[start:end].strip()
        if len(key) < MIN_SEGMENT:
            return False
        self._seen[key] += 1
        if self._seen[key] > self.limit:
            self._cut = start
            return True
        return False

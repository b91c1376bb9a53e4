"""The deriver's pure state machines: what an agent's screen means over time.

Nothing here touches tmux, the store or the clock; callers pass ``now`` (monotonic seconds)
and the classification of the current frame (a provider's ``classify``, :mod:`elowen_sdk.screen`).

* :class:`Debouncer` — when to classify after output: ``quiet`` seconds after the last output,
  but never later than ``max_delay`` after the first unclassified output, so a pane that prints
  constantly is still classified regularly.
* :class:`PromptTracker` — prompt *instances* (PITFALLS 7): a prompt is keyed by its content
  (the classifier's ``fingerprint``) AND its appearance. The same fingerprint staying on screen
  is one instance; after it vanished, or after it was answered and the screen then changed,
  the same fingerprint is a NEW instance. Each instance is answered at most once.
* :class:`SignalTracker` — maps screen states to ``signal`` values and reports changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from elowen_sdk.screen import Classification, screen_hash

__all__ = [
    "Debouncer",
    "PromptInstance",
    "PromptTracker",
    "SIGNALS",
    "SignalTracker",
    "screen_hash",
    "signal_for",
]

SIGNALS: tuple[str, ...] = ("working", "needs_input", "complete", "error", "exited")
"""Values of the ``signal`` event's ``signal`` field."""

_SIGNAL_OF_STATE: dict[str, str | None] = {
    "starting": None,
    "working": "working",
    "trust_prompt": "needs_input",
    "permission_prompt": "needs_input",
    "choice_prompt": "needs_input",
    "unknown_dialog": "needs_input",
    "idle": "complete",
    "error": "error",
    "exited": "exited",
}


def signal_for(state: str) -> str | None:
    """The ``signal`` of a screen state (``None`` for ``starting``: nothing to report yet).

    ``idle`` is ``complete``: the CLI finished its turn and waits at its composer.
    """
    return _SIGNAL_OF_STATE.get(state)


# --------------------------------------------------------------------------- debounce


class Debouncer:
    """Decides when to classify a pane after output.

    Args:
        quiet: seconds of silence after the last output before classifying (e.g. 0.04).
        max_delay: cap: seconds after the first unclassified output by which a classification
            happens even if output never pauses (e.g. 0.15).
    """

    __slots__ = ("quiet", "max_delay", "_first", "_last")

    def __init__(self, quiet: float = 0.04, max_delay: float = 0.15) -> None:
        if quiet < 0 or max_delay < quiet:
            raise ValueError("need 0 <= quiet <= max_delay")
        self.quiet = quiet
        self.max_delay = max_delay
        self._first: float | None = None
        self._last = 0.0

    def output(self, now: float) -> None:
        """Output arrived at ``now``."""
        if self._first is None:
            self._first = now
        self._last = now

    @property
    def pending(self) -> bool:
        """Output arrived that was not classified yet."""
        return self._first is not None

    def due(self) -> float | None:
        """When to classify (monotonic seconds), or ``None`` when nothing is pending."""
        if self._first is None:
            return None
        return min(self._last + self.quiet, self._first + self.max_delay)

    def fired(self) -> None:
        """A classification started: everything before it is covered."""
        self._first = None


# --------------------------------------------------------------------------- prompt instances


@dataclass(slots=True)
class PromptInstance:
    """One appearance of one prompt on one pane.

    Attributes:
        seq: 1-based instance number on this pane (unique per :class:`PromptTracker`).
        fingerprint: the classifier's content hash.
        classification: the classification when the instance appeared (latest while shown).
        first_seen: monotonic seconds.
        answered: keys were sent for it (never answer it again).
        answered_hash: the screen hash when it was answered.
        decision_id: the decision created for it, if any.
    """

    seq: int
    fingerprint: str
    classification: Classification
    first_seen: float
    answered: bool = False
    answered_hash: str | None = None
    answered_at: float = 0.0
    decision_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PromptChange:
    """What one observation changed: ``appeared`` (a new instance) and/or ``gone`` (the
    previous instance left the screen or was replaced). Both ``None``: nothing changed."""

    appeared: PromptInstance | None = None
    gone: PromptInstance | None = None


class PromptTracker:
    """Tracks prompt instances on one pane. Feed every classification to :meth:`observe`.

    ``reappear_grace`` (seconds): after an answer, a changed screen still showing the same
    prompt is taken for the CLI redrawing it before it processed the keys (not a new prompt)
    until this much time has passed; a prompt that vanished and came back is new at once.
    """

    __slots__ = ("current", "_seq", "reappear_grace")

    def __init__(self, reappear_grace: float = 0.5) -> None:
        self.current: PromptInstance | None = None
        self._seq = 0
        self.reappear_grace = reappear_grace

    def observe(self, c: Classification, shash: str, now: float) -> PromptChange:
        """Update with the classification ``c`` of a screen whose hash is ``shash``.

        Rules: an answerable screen with the current instance's fingerprint continues that
        instance, unless it was answered and the screen changed since (then it is a new
        appearance of an identical prompt). A different fingerprint, or a screen that is not an
        answerable prompt, ends the current instance.
        """
        cur = self.current
        if not c.answerable or not c.fingerprint:
            if cur is None:
                return PromptChange()
            self.current = None
            return PromptChange(gone=cur)
        if cur is not None and cur.fingerprint == c.fingerprint:
            if not cur.answered or cur.answered_hash == shash or now - cur.answered_at < self.reappear_grace:
                cur.classification = c
                return PromptChange()
        self._seq += 1
        new = PromptInstance(self._seq, c.fingerprint, c, now)
        self.current = new
        return PromptChange(appeared=new, gone=cur)

    def mark_answered(self, instance: PromptInstance, shash: str, now: float = 0.0) -> None:
        """Keys were sent for ``instance`` at ``now`` while the screen hash was ``shash``."""
        instance.answered = True
        instance.answered_hash = shash
        instance.answered_at = now

    def is_current(self, seq: int, fingerprint: str) -> bool:
        """Whether instance ``seq`` with ``fingerprint`` is on screen and unanswered."""
        cur = self.current
        return cur is not None and cur.seq == seq and cur.fingerprint == fingerprint and not cur.answered


# --------------------------------------------------------------------------- signals


class SignalTracker:
    """Reports when the derived ``signal`` changes (``needs_input`` also re-reports when the
    prompt instance changes)."""

    __slots__ = ("signal", "_instance")

    def __init__(self) -> None:
        self.signal: str | None = None
        self._instance: int | None = None

    def observe(self, c: Classification, instance: PromptInstance | None) -> str | None:
        """The new signal if it changed, else ``None``."""
        sig = signal_for(c.state)
        if sig is None:
            return None
        seq = instance.seq if instance is not None else None
        if sig == self.signal and (sig != "needs_input" or seq == self._instance):
            return None
        self.signal = sig
        self._instance = seq
        return sig

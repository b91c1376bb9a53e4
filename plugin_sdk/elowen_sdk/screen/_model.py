"""The classifier's data: screen states, :class:`Classification` and the compiled rule records."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ElowenError

__all__ = ["ANSWERABLE_STATES", "STATES", "Classification", "PatternError"]

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
"""Every state :meth:`PatternSet.classify` can return. ``unknown_dialog`` is Elowen's addition: a live
dialog (selector, settings panel, update offer) that is not a known prompt. ``auth_required``:
the CLI cannot work because it is not logged in / has no credentials (Claude Code's footer
``Not logged in · Run /login``, Codex's sign-in screen); its signal is ``error`` and the task
must be blocked for a human, never answered or retried."""

ANSWERABLE_STATES: frozenset[str] = frozenset({"trust_prompt", "permission_prompt", "choice_prompt"})
"""States whose keys may be sent to the pane. Everything else must not be answered."""

_SIGNAL_STATES = frozenset({"idle", "working", "error", "auth_required", "exited", "unknown_dialog"})
_DEFAULT_ORDER = ("trust_prompt", "permission_prompt", "choice_prompt", "auth_required", "working", "error", "idle", "exited", "unknown_dialog")
_CHOICE_MODES = frozenset({"number", "arrows"})


class PatternError(ElowenError, ValueError):
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
    cut_header_indent: bool = False  # drop block lines at or left of the header's indent (warnings)
    many: bool = False  # a ``line`` extractor: every match, values joined with "\n" (else the last match)
    whole_frame: bool = False  # a ``line`` extractor searches the whole frame, not only below the question


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

"""The goal sentinel protocol: lines the brain writes to report on a goal.

Protocol (taught to every goal turn by ``prompts/goal_protocol.md``; Elowen issue 6)::

    PROGRESS: <one line on what was done and what is next>
    SUBGOAL_DONE: <n>                (1-based subgoal number)
    GOAL_BLOCKED: <reason>
    GOAL_DONE: <evidence>

Rules: a sentinel counts only at the start of a line of the assistant's own text (callers pass
assistant message text only, never tool output); lines inside fenced code blocks (```` ``` ````
or ``~~~``) are ignored; a value that is empty or an echoed placeholder from the protocol text
(``<evidence>``, ``<reason>``, ``<n>``, ``...``) is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Sentinels", "parse_sentinels"]

_LINE = re.compile(r"^\s*(?:[*_>-]+\s*)?(PROGRESS|GOAL_DONE|GOAL_BLOCKED|SUBGOAL_DONE)\s*[*_]*\s*[:：]\s*[*_]*\s*(.*?)\s*[*_]*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PLACEHOLDER = re.compile(r"^(<[^<>]*>|\[[^\[\]]*\]|\.\.\.|…)$")


@dataclass(frozen=True, slots=True)
class Sentinels:
    """What one turn's assistant text reported (the last value of each kind wins).

    Attributes:
        progress: the last ``PROGRESS`` line's text, or ``None``.
        done: the ``GOAL_DONE`` evidence, or ``None``.
        blocked: the ``GOAL_BLOCKED`` reason, or ``None``.
        subgoals_done: the 1-based subgoal numbers reported done, in order, without repeats.
    """

    progress: str | None = None
    done: str | None = None
    blocked: str | None = None
    subgoals_done: tuple[int, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return self.progress is None and self.done is None and self.blocked is None and not self.subgoals_done


def _valid(value: str) -> bool:
    return bool(value) and not _PLACEHOLDER.match(value)


def parse_sentinels(text: str) -> Sentinels:
    """Parse the sentinel lines of an assistant's text (see the module docstring)."""
    progress = done = blocked = None
    subs: list[int] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        kind, value = m.group(1), m.group(2).strip().strip("`").strip()
        if not _valid(value):
            continue
        if kind == "PROGRESS":
            progress = value
        elif kind == "GOAL_DONE":
            done = value
        elif kind == "GOAL_BLOCKED":
            blocked = value
        else:
            for n in re.findall(r"\d+", value)[:1]:
                if int(n) not in subs:
                    subs.append(int(n))
    return Sentinels(progress, done, blocked, tuple(subs))

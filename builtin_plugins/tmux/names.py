"""Session names and exact tmux targets.

tmux resolves ``-t name`` as a *prefix* (and then fnmatch) match, so ``elowen-a-1`` would hit
``elowen-a-10``; and ``.``/``:`` are target delimiters (tmux(1), "COMMANDS", target-session).
Elowen therefore only creates names from ``[A-Za-z0-9_-]`` and only targets them with the exact
form ``=name:`` (session) or a pane id ``%N`` (unique on the server).
"""

from __future__ import annotations

import re

from .errors import InvalidNameError

__all__ = ["MAX_NAME", "check_name", "is_pane_id", "pane_target", "sanitize_name", "session_target"]

MAX_NAME = 64
"""Longest session name accepted (characters)."""

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")
_PANE_ID_RE = re.compile(r"^%[0-9]{1,9}$")
_EXACT_RE = re.compile(r"^=[A-Za-z0-9_][A-Za-z0-9_-]{0,63}:(?:[0-9]{1,4}\.[0-9]{1,4})?$")
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_-]+")


def check_name(name: str) -> str:
    """Return ``name`` if it is a safe session name: 1–64 characters of ``[A-Za-z0-9_-]``, not
    starting with ``-``.

    Raises:
        InvalidNameError: anything else (including ``.`` and ``:``).
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidNameError(f"invalid tmux session name {name!r}: use 1-{MAX_NAME} characters of [A-Za-z0-9_-], not starting with '-'")
    return name


def sanitize_name(raw: str) -> str:
    """Map any text to a safe session name: runs of other characters become ``-``, leading
    ``-`` is dropped, the result is cut to :data:`MAX_NAME`. ``"Task 7: fix.bug"`` →
    ``"Task-7-fix-bug"``.

    Raises:
        InvalidNameError: nothing usable is left (e.g. ``"..."``).
    """
    name = _UNSAFE_RE.sub("-", raw).lstrip("-")[:MAX_NAME].rstrip("-")
    return check_name(name)


def session_target(name: str) -> str:
    """The exact target of session ``name``: ``=name:`` (also selects its current window and
    active pane for pane commands).

    Raises:
        InvalidNameError: ``name`` is not a safe name.
    """
    return f"={check_name(name)}:"


def is_pane_id(target: str) -> bool:
    """Whether ``target`` is a tmux pane id like ``%12``."""
    return bool(_PANE_ID_RE.match(target))


def pane_target(target: str, window: int | None = None, pane: int | None = None) -> str:
    """The exact pane target for ``target``: a pane id (``%12``) or an exact target
    (``=name:``, ``=name:W.P``) is used as is; a session name becomes ``=name:`` (its active
    pane) or, with indexes, ``=name:W.P``.

    Raises:
        InvalidNameError: ``target`` is neither a pane id nor a safe session name.
    """
    if is_pane_id(target) or _EXACT_RE.match(target):
        if window is not None or pane is not None:
            raise InvalidNameError("window/pane indexes cannot be combined with a pane id or exact target")
        return target
    base = session_target(target)
    if window is None and pane is None:
        return base
    return f"{base}{window or 0}.{pane or 0}"

"""Path classification: where a resolved target lies (checkout, its ``.git``, scratch space, a
device, a secret file) and which check, if any, a delete, write or read of it trips.

Paths here are POSIX strings, absolute and normalised by the caller (:func:`norm`); a glob target
keeps the literal directory above its first wildcard and the rest as a pattern (:class:`Target`).
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
from dataclasses import dataclass

from ._rules import Rules

__all__ = [
    "EVERYTHING_PATTERNS",
    "MAX_CANDIDATES",
    "OUTSIDE",
    "Target",
    "below",
    "brace_expand",
    "classify",
    "expand_user",
    "first_component",
    "glob_at",
    "inside",
    "is_secret",
    "may_match",
    "norm",
    "not_scratch",
]

MAX_CANDIDATES = 64
"""Most values one word may expand to (braces, variables) before the rest are dropped."""

EVERYTHING_PATTERNS = frozenset({"*", "**", ".*", "?*", "*.*", ".[!.]*", ".??*"})
"""Glob patterns that, directly in a directory, match (nearly) all of it."""

OUTSIDE = "<outside>"
"""What :func:`classify` returns for a target outside the checkout and the scratch space: the
caller reports it with its own rule (the command's target rule, or ``redirect``)."""


@dataclass(frozen=True)
class Target:
    """A resolved target: ``path`` is absolute and normalised; for a glob it is the literal
    directory above the first wildcard and ``pattern`` the rest."""

    path: str
    pattern: str | None = None

    def show(self) -> str:
        """The target as written back: ``path``, or ``path/pattern`` for a glob."""
        return self.path if self.pattern is None else posixpath.join(self.path, self.pattern)


def norm(path: str) -> str:
    """``posixpath.normpath`` without its leading ``//`` (which POSIX leaves implementation-defined)."""
    out = posixpath.normpath(path)
    return "/" + out.lstrip("/") if out.startswith("//") else out


def expand_user(path: str, home: str) -> str:
    """``~`` and ``~/…`` with ``home`` in place of the tilde."""
    return home + path[1:] if path == "~" or path.startswith("~/") else path


def inside(path: str, root: str | None) -> bool:
    """Whether ``path`` is ``root`` or lies below it (``False`` for ``root=None``)."""
    if root is None:
        return False
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def below(path: str, root: str) -> bool:
    """Whether ``path`` lies strictly below ``root``."""
    return path != root and inside(path, root)


def first_component(pattern: str) -> str:
    """The part of a relative pattern before its first ``/``."""
    return pattern.split("/", 1)[0]


def may_match(component: str, name: str) -> bool:
    """Shell semantics: a leading dot is matched only by a pattern starting with a dot."""
    if name.startswith(".") and not component.startswith((".", "[.")):
        return False
    return fnmatch.fnmatchcase(name, component)


_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")


def brace_expand(text: str) -> list[str]:
    """Bash brace expansion of the ``{a,b}`` form (no ranges), at most about
    :data:`MAX_CANDIDATES` results."""
    match = _BRACE.search(text)
    if not match:
        return [text]
    out: list[str] = []
    for alt in match.group(1).split(","):
        out.extend(brace_expand(text[: match.start()] + alt + text[match.end() :]))
        if len(out) > MAX_CANDIDATES:
            break
    return out


def glob_at(text: str) -> int:
    """Offset of the first glob character (``*``, ``?``, ``[``) in ``text``, or -1."""
    positions = [text.find(ch) for ch in "*?[" if ch in text]
    return min(positions) if positions else -1


def is_secret(rules: Rules, path: str) -> bool:
    """Whether ``path`` matches the rules' secret globs and none of their exemptions."""
    if _globs(rules.secret_exempt_globs).match(path):
        return False
    return bool(_globs(rules.secret_globs).match(path))


@functools.lru_cache(maxsize=16)
def _globs(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching a path that any of ``globs`` matches (``fnmatchcase`` semantics)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs) or "(?!)")


def not_scratch(target: Target, keep: tuple[str, ...]) -> bool:
    """Whether ``target`` touches one of the ``keep`` folders (the agent's ``$HOME``, Elowen's
    home, the checkout): it lies in one, or one lies in it. Such a target is never scratch
    space, even when the folder sits below ``/tmp`` (test harnesses put homes there)."""
    return any(inside(target.path, k) or inside(k, target.path) for k in keep if k)


def classify(rules: Rules, role: str, target: Target, checkout: str | None, secret_read: str | None = None, *, keep: tuple[str, ...] = ()) -> str | None:
    """Which check a ``role`` (``delete``, ``write`` or ``read``) of ``target`` trips.

    Returns ``None`` when it is harmless (inside the checkout, strictly below a scratch
    directory and touching none of ``keep`` — see :func:`not_scratch`; the checkout's
    ancestors never count as scratch for a delete —, writing a device such as ``/dev/null``,
    reading a non-secret), a key of the rules'
    ``[checks]`` (``secret_write``, ``git_dir_delete``, ``git_dir_write``,
    ``checkout_root_delete``, or ``secret_read`` for a read of a secret), or :data:`OUTSIDE`.
    """
    secret = is_secret(rules, target.show()) or is_secret(rules, target.path)
    if role == "read":
        return secret_read if secret and secret_read else None
    if role == "write" and secret:
        return "secret_write"
    if checkout is not None:
        git_dir = posixpath.join(checkout, ".git")
        first = first_component(target.pattern) if target.pattern else ""
        if inside(target.path, git_dir) or (role == "delete" and target.pattern and target.path == checkout and may_match(first, ".git")):
            return "git_dir_delete" if role == "delete" else "git_dir_write"
        if role == "delete" and target.path == checkout and (target.pattern is None or first in EVERYTHING_PATTERNS):
            return "checkout_root_delete"
        may_parent = bool(target.pattern) and target.path == checkout and may_match(first, "..")
        if inside(target.path, checkout) and not may_parent:
            return None
    if role == "write" and any(fnmatch.fnmatchcase(target.path, d) for d in rules.writable_devices):
        if target.pattern is None:
            return None
    contains_checkout = checkout is not None and inside(checkout, target.path)
    if not_scratch(target, keep):
        return OUTSIDE
    for scratch in rules.scratch_dirs:
        if below(target.path, scratch) and not (role != "write" and contains_checkout):
            return None
    return OUTSIDE

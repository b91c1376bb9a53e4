"""Elowen's own secrets: is a command or a path about Elowen's home?

Elowen's home (``$ELOWEN_HOME``, default ``~/.config/elowen``) holds the admin token, the
database (every token hash, every conversation) and the plugins' data. Nothing an agent or the
brain runs has any business there, so a command or file path that names it — by its absolute
path, through ``~``/``$HOME``, relative to the home folder, by ``$ELOWEN_HOME``/``$ELOWEN_DB``, or
by the names ``admin.token`` / ``elowen.db`` — is treated as destructive (asked, never run on
its own). This is a textual check: a second line behind the agent sandbox, which hides the
home altogether (a glob such as ``~/.c*/elo*/a*`` is not caught here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["elowen_home", "touches_elowen_home"]

_NAMES = ("admin.token", "elowen.db", "ELOWEN_HOME", "ELOWEN_DB")


def elowen_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$ELOWEN_HOME`` or ``~/.config/elowen`` (absolute, not created)."""
    env = os.environ if environ is None else environ
    raw = env.get("ELOWEN_HOME")
    return (Path(raw).expanduser() if raw else Path.home() / ".config" / "elowen").absolute()


def _forms(path: Path, home: Path) -> list[str]:
    forms = {str(path), os.path.realpath(path)}
    for base in {str(home), os.path.realpath(home)}:
        prefix = base.rstrip("/") + "/"
        for p in list(forms):
            if p.startswith(prefix):
                rel = p[len(prefix) :]
                forms.update({f"~/{rel}", f"$HOME/{rel}", f"${{HOME}}/{rel}", rel})
    return sorted(f for f in forms if f and f not in ("/", "."))


def touches_elowen_home(text: str, *, home: str | None = None, elowen: str | Path | None = None, db: str | Path | None = None) -> str | None:
    """Why ``text`` (a shell command or a path) names Elowen's home or database, else ``None``.

    Args:
        home: the user's ``$HOME`` for ``~`` forms (default: this process's).
        elowen: Elowen's home (default :func:`elowen_home`).
        db: the database file when it lives elsewhere (default ``$ELOWEN_DB``).
    """
    if not text:
        return None
    user_home = Path(home or os.path.expanduser("~"))
    places = [Path(elowen) if elowen else elowen_home()]
    db = db or os.environ.get("ELOWEN_DB")
    if db:
        places.append(Path(db))
    for place in places:
        for form in _forms(place, user_home):
            if form in text:
                return f"it reaches Elowen's own files ({form}: tokens, database)"
    for name in _NAMES:
        if name in text:
            return f"it names Elowen's own secrets ({name})"
    return None

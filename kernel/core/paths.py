"""Where Elowen keeps its files.

Layout (see the architecture page)::

    $ELOWEN_HOME/                 default ~/.config/elowen, mode 0700
        config.toml               settings (elowen.core.settings)
        elowen.db                 the SQLite store (override: $ELOWEN_DB)
        plugins/<name>/           per-plugin data folders

Every function reads the environment on each call, so tests can point ``ELOWEN_HOME`` at a
temporary folder with ``monkeypatch.setenv``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["db_path", "home", "plugin_data_dir"]

_PLUGIN_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def _make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700 if it does not exist yet.

    An existing folder keeps its mode: the user may have chosen it.
    """
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
    return path


def home() -> Path:
    """Elowen's home folder: ``$ELOWEN_HOME`` or ``~/.config/elowen``; created (mode 0700)."""
    raw = os.environ.get("ELOWEN_HOME")
    path = Path(raw).expanduser() if raw else Path.home() / ".config" / "elowen"
    return _make_private_dir(path.absolute())


def db_path() -> Path:
    """The store's SQLite file: ``$ELOWEN_DB`` or ``home()/elowen.db`` (not created here)."""
    raw = os.environ.get("ELOWEN_DB")
    if raw:
        return Path(raw).expanduser().absolute()
    return home() / "elowen.db"


def plugin_data_dir(name: str) -> Path:
    """``home()/plugins/<name>``, created (mode 0700) on demand.

    Raises:
        ValueError: ``name`` is not a plugin name (``[a-z0-9][a-z0-9_.-]*``), which also keeps
            ``..`` and slashes out of the path.
    """
    if not _PLUGIN_NAME.match(name) or name in {".", ".."} or ".." in name:
        raise ValueError(f"not a plugin name: {name!r}")
    return _make_private_dir(home() / "plugins" / name)

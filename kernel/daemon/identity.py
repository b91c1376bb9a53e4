"""Which Elowen home a daemon serves, as a short opaque id (stdlib only: the CLI imports it).

``GET /health`` answers ``home: home_id(ELOWEN_HOME)`` so that a client can tell its own
daemon from another home's daemon listening on the same port, without the daemon revealing
the folder's path to unauthenticated callers.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["SERVICE", "home_id"]

#: ``GET /health``'s ``service`` field for the daemon.
SERVICE = "daemon"


def home_id(home: str | Path) -> str:
    """The first 12 hex digits of the SHA-256 of ``home`` resolved (``~`` expanded, symlinks
    followed; a missing folder resolves as far as it exists)."""
    resolved = Path(home).expanduser().resolve(strict=False)
    return hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:12]

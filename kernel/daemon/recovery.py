"""Recovering admin access without the API: a new admin token written straight into the
SQLite store (``elowen daemon reset-admin-token``).

Whoever can read and write ``$ELOWEN_HOME`` (its mode is 0700) owns the daemon anyway, so this
needs no token: it opens ``elowen.db`` directly (WAL lets it write while a daemon runs),
issues a new full token for an admin, revokes that admin's older full tokens unless asked
not to, and writes the new one to ``$ELOWEN_HOME/admin.token`` (mode 0600).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from elowen.core.store import Store
from elowen_sdk import ElowenError

from .auth import ADMIN_TOKEN_FILE, issue_token, write_admin_token

__all__ = ["RecoveryError", "ResetResult", "missing_admin_token_hint", "reset_admin_token"]

log = logging.getLogger(__name__)

RESET_COMMAND = "elowen daemon reset-admin-token"


class RecoveryError(ElowenError):
    """The token cannot be reset (no database, no such admin); the message says why."""


@dataclass(frozen=True, slots=True)
class ResetResult:
    """What :func:`reset_admin_token` did: the admin's ``user_id`` and ``name``, how many old
    full tokens it ``revoked``, and the token file's ``path``."""

    user_id: int
    name: str
    revoked: int
    path: Path


def _pick_admin(store: Store, name: str | None) -> dict[str, object]:
    if name is not None:
        row = store.query_one("SELECT id, name, role FROM users WHERE name = ?", (name,))
        if row is None:
            raise RecoveryError(f"no user named {name!r}")
        if row["role"] != "admin":
            raise RecoveryError(f"user {name!r} is not an admin")
        return row
    row = store.query_one("SELECT id, name, role FROM users WHERE role = 'admin' ORDER BY (name = 'admin') DESC, id LIMIT 1")
    if row is None:
        raise RecoveryError("this home has no admin user yet; start the daemon once and it creates one")
    return row


def reset_admin_token(home: Path, db: Path | None = None, *, user: str | None = None, keep_old: bool = False) -> ResetResult:
    """Issue a new token for an admin and write it to ``home/admin.token``.

    Args:
        home: ``ELOWEN_HOME``.
        db: the SQLite file (default ``home/elowen.db``).
        user: the admin's name (default: the user ``admin`` if it is an admin, else the admin
            with the lowest id).
        keep_old: keep the admin's other full tokens (default: revoke them — a lost token
            file may have been copied).

    Raises:
        RecoveryError: no database in ``home``, no such user, or it is not an admin.
    """
    home = Path(home)
    db = Path(db) if db is not None else home / "elowen.db"
    if not db.is_file():
        raise RecoveryError(f"no Elowen database at {db} (has the daemon ever started with this ELOWEN_HOME?)")
    store = Store(db)
    try:
        with store.transaction():
            admin = _pick_admin(store, user)
            user_id = int(admin["id"])  # type: ignore[arg-type]
            revoked = 0 if keep_old else store.execute("DELETE FROM tokens WHERE user_id = ? AND scope = 'full'", (user_id,))
            token = issue_token(store, user_id)
            path = write_admin_token(home, token)
        store.audit("local", "token.reset", f"user:{user_id}", "ok", {"revoked": revoked})
    finally:
        store.close()
    log.info("wrote a new token for admin %s to %s", admin["name"], path)
    return ResetResult(user_id=user_id, name=str(admin["name"]), revoked=revoked, path=path)


def missing_admin_token_hint(store: Store, home: Path) -> str | None:
    """A start-up warning when ``home/admin.token`` is missing although an admin exists (the
    file was deleted or lost), naming the recovery command; ``None`` otherwise."""
    if (home / ADMIN_TOKEN_FILE).exists():
        return None
    if store.query_one("SELECT 1 AS x FROM users WHERE role = 'admin' LIMIT 1") is None:
        return None
    return (
        f"{home / ADMIN_TOKEN_FILE} is missing but an admin exists: the CLI will have no token. "
        f"If the token is lost, run `{RESET_COMMAND}` (with ELOWEN_HOME={home}) to issue a new one"
    )

"""Tokens, principals and project visibility.

Tokens are ``elw_`` followed by 32 random bytes, URL-safe base64 (``secrets.token_urlsafe``).
Only their SHA-256 (hex) is stored. A token has a scope:

* ``full`` — acts as its user (role ``admin`` or ``member``);
* ``agent`` — bound to one task (given to a spawned agent in its environment): it may only
  read that task, close it and post progress on it.

Plugins never call these: they ask the daemon's ``users`` service
(:class:`~elowen.daemon.services.users.UsersHostService`) for agent and overseer tokens.

Members see and act on the projects listed for them in ``user_projects``; admins see all.
:class:`Access` caches each member's set so the event bus's per-event filter is a set lookup.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from elowen.core.store import Store, utc_iso

from .errors import Unauthorized

__all__ = [
    "ADMIN_TOKEN_FILE",
    "TOKEN_PREFIX",
    "Access",
    "Principal",
    "authenticate",
    "bootstrap_admin",
    "create_agent_token",
    "hash_token",
    "issue_token",
    "login_token_cutoff",
    "new_token",
    "principal_of_token",
    "revoke_task_tokens",
    "write_admin_token",
]

log = logging.getLogger(__name__)

TOKEN_PREFIX = "elw_"
ADMIN_TOKEN_FILE = "admin.token"
_MAX_TOKEN_LEN = 200


def new_token() -> str:
    """A fresh random token (``elw_`` + 43 URL-safe characters)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of ``token``: SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling.

    Attributes:
        user_id: the user (for agent tokens: the task's owner, possibly ``None``).
        name: the user's name (``agent:task:<id>`` for agent tokens).
        role: ``admin`` or ``member`` (agent tokens: ``agent``).
        scope: ``full`` or ``agent``.
        task_id: the task an agent token is bound to.
        allowed_execs: glob patterns, or ``None`` for the daemon's list.
        tool_grants: tool names the user may use.
        token_id: the token's row id.
    """

    user_id: int | None
    name: str
    role: str
    scope: str
    task_id: int | None
    allowed_execs: tuple[str, ...] | None
    tool_grants: tuple[str, ...]
    token_id: int

    @property
    def is_admin(self) -> bool:
        return self.scope == "full" and self.role == "admin"

    def may_act(self, owner_id: int | None) -> bool:
        """The one rule for acting on an agent's work (the SDK's
        :meth:`elowen_sdk.Principal.may_act` for plugin routes): an admin, or the owner
        (``owner_id``) with a full token. Project visibility is checked by the caller."""
        return self.is_admin or (self.scope == "full" and self.user_id is not None and owner_id == self.user_id)

    @property
    def actor(self) -> str:
        """The audit actor: ``user:<id>`` or ``agent:task:<id>``."""
        if self.scope == "agent":
            return f"agent:task:{self.task_id}"
        return f"user:{self.user_id}"


def issue_token(store: Store, user_id: int | None, *, scope: str = "full", task_id: int | None = None) -> str:
    """Create and store a token; returns it (the only time it exists in clear)."""
    token = new_token()
    store.execute(
        "INSERT INTO tokens (user_id, hash, scope, task_id, created_at) VALUES (?, ?, ?, ?, ?)",
        (user_id, hash_token(token), scope, task_id, utc_iso()),
    )
    return token


def create_agent_token(store: Store, task_id: int) -> str:
    """A token bound to task ``task_id`` for the agent working on it (acting for the task's
    owner). It is deleted with the task or by :func:`revoke_task_tokens`.

    Raises:
        LookupError: no such task.
    """
    row = store.query_one("SELECT owner_id FROM tasks WHERE id = ?", (task_id,))
    if row is None:
        raise LookupError(f"no task {task_id}")
    return issue_token(store, row["owner_id"], scope="agent", task_id=task_id)


def revoke_task_tokens(store: Store, task_id: int) -> int:
    """Delete every agent token bound to ``task_id``; returns how many."""
    return store.execute("DELETE FROM tokens WHERE scope = 'agent' AND task_id = ?", (task_id,))


def _json_list(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    value = json.loads(text)
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


LOGIN_TOKEN_TTL = 7 * 24 * 3600.0
"""Seconds a token made by ``POST /auth/login`` stays valid (absolute, from its creation):
a web session that ends without a logout (idle timeout, closed browser) leaves no token that
lives forever. Tokens issued by an admin or at bootstrap do not expire."""


def login_token_cutoff(now: float | None = None) -> str:
    """The ``created_at`` (UTC ISO 8601) before which login tokens have expired."""
    return utc_iso((time.time() if now is None else now) - LOGIN_TOKEN_TTL)


def authenticate(store: Store, header: str | None) -> Principal:
    """The principal of an ``Authorization: Bearer <token>`` header.

    Raises:
        Unauthorized: no header, not a bearer token, or an unknown token.
    """
    if not header:
        raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > _MAX_TOKEN_LEN:
        raise Unauthorized("malformed Authorization header; expected 'Bearer <token>'")
    return _principal(store, "t.hash = ?", hash_token(token))


_TOKEN_SQL = (
    "SELECT t.id AS token_id, t.scope, t.task_id, t.user_id, t.origin, t.created_at, u.name, u.role, u.allowed_execs, u.tool_grants "
    "FROM tokens t LEFT JOIN users u ON u.id = t.user_id WHERE "
)


def principal_of_token(store: Store, token_id: int) -> Principal | None:
    """The principal of token ``token_id`` NOW (its user's current role and grants), or
    ``None`` when the token was revoked, its login expired or its user was deleted. Open
    streams call it to notice a revocation (:mod:`elowen.daemon.routes.events`)."""
    try:
        return _principal(store, "t.id = ?", token_id)
    except Unauthorized:
        return None


def _principal(store: Store, where: str, key: object) -> Principal:
    row = store.query_one(_TOKEN_SQL + where, (key,))
    if row is None or (row["scope"] == "full" and row["name"] is None):
        raise Unauthorized("invalid or revoked token")
    if row["origin"] == "login" and row["created_at"] < login_token_cutoff():
        raise Unauthorized("this login has expired; log in again")
    agent = row["scope"] == "agent"
    return Principal(
        user_id=row["user_id"],
        name=f"agent:task:{row['task_id']}" if agent else row["name"],
        role="agent" if agent else row["role"],
        scope=row["scope"],
        task_id=row["task_id"],
        allowed_execs=_json_list(row["allowed_execs"]) if row["name"] is not None else (),
        tool_grants=_json_list(row["tool_grants"]) or () if row["name"] is not None else (),
        token_id=row["token_id"],
    )


def bootstrap_admin(store: Store, home: Path) -> bool:
    """On first start (no users): create user ``admin`` and write its token to
    ``home/admin.token`` (mode 0600). The token is never logged. Returns whether it did."""
    if store.query_one("SELECT 1 AS x FROM users LIMIT 1") is not None:
        return False
    with store.transaction():
        user_id = store.execute(
            "INSERT INTO users (name, role, allowed_execs, tool_grants, created_at) VALUES ('admin', 'admin', NULL, '[\"*\"]', ?)",
            (utc_iso(),),
        )
        token = issue_token(store, user_id)
        path = write_admin_token(home, token)
    log.info("created the admin user; its token is in %s", path)
    store.audit("kernel", "user.create", "user:admin", "ok", {"role": "admin", "bootstrap": True})
    return True


def write_admin_token(home: Path, token: str) -> Path:
    """Write ``token`` to ``home/admin.token`` atomically, mode 0600; returns the path."""
    path = home / ADMIN_TOKEN_FILE
    tmp = path.with_name(f".{ADMIN_TOKEN_FILE}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(token + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


class Access:
    """Which projects each member may see, cached (invalidate after changing
    ``user_projects``)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._cache: dict[int, frozenset[int]] = {}

    def fresh_projects(self, user_id: int | None) -> frozenset[int]:
        """The project ids ``user_id`` is a member of, read from the database now (the cache
        is refreshed with them)."""
        if user_id is None:
            return frozenset()
        rows = self._store.query("SELECT project_id FROM user_projects WHERE user_id = ?", (user_id,))
        fresh = self._cache[user_id] = frozenset(r["project_id"] for r in rows)
        return fresh

    def projects(self, user_id: int | None) -> frozenset[int]:
        """The project ids ``user_id`` is a member of."""
        if user_id is None:
            return frozenset()
        cached = self._cache.get(user_id)
        if cached is None:
            rows = self._store.query("SELECT project_id FROM user_projects WHERE user_id = ?", (user_id,))
            cached = self._cache[user_id] = frozenset(r["project_id"] for r in rows)
        return cached

    def invalidate(self, user_id: int | None = None) -> None:
        """Forget one user's set (or everyone's)."""
        if user_id is None:
            self._cache.clear()
        else:
            self._cache.pop(user_id, None)

    def can_see(self, me: Principal, project_id: int | None) -> bool:
        """Whether ``me`` may see a project (``None``: global, visible to full tokens)."""
        if me.scope != "full":
            return False
        if me.is_admin or project_id is None:
            return True
        return project_id in self.projects(me.user_id)

    def event_filter(self, me: Principal) -> Callable[[int | None], bool] | None:
        """The event bus project filter for ``me`` (``None`` for admins: everything)."""
        if me.is_admin:
            return None
        user_id = me.user_id

        def visible(project_id: int | None) -> bool:
            return project_id is None or project_id in self.projects(user_id)

        return visible

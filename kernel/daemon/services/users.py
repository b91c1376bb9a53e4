"""Users, their passwords and project memberships (the REST routes check who may call these),
and :class:`UsersHostService`, the part plugins may use (kernel service ``"users"``, contract
:class:`elowen_sdk.services.UsersService`): agent and overseer tokens. The daemon is the one
writer of ``users`` and ``tokens``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import trio

from elowen.core.events import EventBus
from elowen.core.store import Store, utc_iso
from elowen_sdk import ElowenError
from elowen_sdk import Principal as SdkPrincipal
from elowen_sdk.errors import UserNotFound

from ..auth import Access, create_agent_token, hash_token, issue_token, login_token_cutoff, new_token, principal_of_token, revoke_task_tokens
from ..names import check_user_name, skeleton
from ..passwords import hash_password, needs_rehash, verify_password
from ..throttle import LoginThrottle

__all__ = ["NEXT_USER_ID", "OVERSEER_NAME", "USER_EVENTS", "LastAdmin", "UserExists", "UserNotFound", "UserService", "UsersHostService", "WrongPassword"]

#: The event types :meth:`UserService.announce` publishes.
USER_EVENTS = ("user.created", "user.updated", "user.removed")

_COLUMNS = "id, name, role, kind, mission_id, allowed_execs, tool_grants, created_at, password_hash IS NOT NULL AS has_password"

OVERSEER_NAME = "overseer-m{mission_id}"
"""The display name of a mission's overseer principal (a suffix ``-2``… if a person has it);
the principal is recognised by ``kind``, never by this name."""
NEXT_USER_ID = "(SELECT max(coalesce((SELECT max(id) FROM users), 0), coalesce((SELECT n FROM id_highwater WHERE name = 'users'), 0)) + 1)"
"""SQL for a new user's id: above every id in use and every id ever deleted (``id_highwater``),
so a deleted user's data (kept by plugins under their id) never passes to a newcomer."""


class UserExists(ElowenError, ValueError):
    """A user of that name already exists."""


class LastAdmin(ElowenError):
    """The change would leave no admin."""


class WrongPassword(ElowenError):
    """The current password given to change one's own password is missing or wrong.

    Attributes:
        missing: no current password was given.
    """

    def __init__(self, message: str, *, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


def _record(row: dict[str, Any], projects: list[int]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "role": row["role"],
        "kind": row["kind"],
        "mission_id": row["mission_id"],
        "allowed_execs": json.loads(row["allowed_execs"]) if row["allowed_execs"] is not None else None,
        "tool_grants": json.loads(row["tool_grants"]),
        "projects": projects,
        "created_at": row["created_at"],
        "has_password": bool(row["has_password"]),
    }


class UserService:
    """Create, list and change users; set and check their passwords; issue their tokens;
    manage ``user_projects``.

    Attributes:
        throttle: failed logins per name (in memory), used by ``POST /auth/login``.
        hash_limiter: worker threads hashing passwords at once (scrypt takes 16 MiB each, so a
            burst of logins must not take the default 40 threads).
    """

    #: Password hashes computed at once.
    HASH_THREADS = 2

    def __init__(self, store: Store, access: Access) -> None:
        self.store = store
        self.access = access
        self.throttle = LoginThrottle()
        self.hash_limiter = trio.CapacityLimiter(self.HASH_THREADS)

    def _projects(self, ids: Sequence[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {i: [] for i in ids}
        if ids:
            marks = ",".join("?" * len(ids))
            for r in self.store.query(f"SELECT user_id, project_id FROM user_projects WHERE user_id IN ({marks}) ORDER BY project_id", list(ids)):
                out[r["user_id"]].append(r["project_id"])
        return out

    def get(self, user_id: int) -> dict[str, Any]:
        """The user record ``{id, name, role, kind, mission_id, allowed_execs, tool_grants,
        projects, created_at, has_password}`` (``kind``: ``person`` or ``overseer``).

        Raises:
            UserNotFound.
        """
        row = self.store.query_one(f"SELECT {_COLUMNS} FROM users WHERE id = ?", (user_id,))
        if row is None:
            raise UserNotFound(f"user {user_id} not found")
        return _record(row, self._projects([user_id])[user_id])

    def list(self, *, after: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Users by ascending id after ``after``."""
        rows = self.store.query(f"SELECT {_COLUMNS} FROM users WHERE id > ? ORDER BY id LIMIT ?", (after or 0, limit))
        projects = self._projects([r["id"] for r in rows])
        return [_record(r, projects[r["id"]]) for r in rows]

    def create(self, name: str, role: str, *, allowed_execs: Sequence[str] | None = None, tool_grants: Sequence[str] = ()) -> tuple[dict[str, Any], str]:
        """Create a user and a full token; returns ``(user, token)`` (the token is shown once).

        Raises:
            UserExists: the name is taken, or looks like an existing user's
                (:func:`elowen.daemon.names.skeleton`).
            InvalidUserName: the name is refused (:func:`elowen.daemon.names.check_user_name`).
        """
        check_user_name(name)
        with self.store.transaction():
            if self.store.query_one("SELECT 1 AS x FROM users WHERE name = ?", (name,)) is not None:
                raise UserExists(f"a user named {name!r} already exists")
            mine = skeleton(name)
            for row in self.store.query("SELECT name FROM users"):
                if skeleton(row["name"]) == mine:
                    raise UserExists(f"{name!r} looks too much like the existing user {row['name']!r}")
            user_id = self.store.execute(
                f"INSERT INTO users (id, name, role, allowed_execs, tool_grants, created_at) VALUES ({NEXT_USER_ID}, ?, ?, ?, ?, ?)",
                (
                    name,
                    role,
                    json.dumps(list(allowed_execs)) if allowed_execs is not None else None,
                    json.dumps(list(tool_grants)),
                    utc_iso(),
                ),
            )
            token = issue_token(self.store, user_id)
        return self.get(user_id), token

    def update(self, user_id: int, changes: dict[str, Any]) -> dict[str, Any]:
        """Change ``role``, ``allowed_execs`` (``None``: the daemon's list) or ``tool_grants``.

        Raises:
            UserNotFound.
        """
        sets: dict[str, Any] = {}
        if "role" in changes:
            sets["role"] = changes["role"]
        if "allowed_execs" in changes:
            value = changes["allowed_execs"]
            sets["allowed_execs"] = json.dumps(list(value)) if value is not None else None
        if "tool_grants" in changes:
            sets["tool_grants"] = json.dumps(list(changes["tool_grants"]))
        with self.store.transaction():
            self.get(user_id)
            if sets:
                assignments = ", ".join(f"{k} = ?" for k in sets)
                self.store.execute(f"UPDATE users SET {assignments} WHERE id = ?", (*sets.values(), user_id))
        return self.get(user_id)

    # -- passwords (the static methods run scrypt, ~50 ms: call them from a worker thread) -----

    def password_hash(self, user_id: int) -> str | None:
        """The stored hash of the user's password, ``None`` if it has none.

        Raises:
            UserNotFound.
        """
        row = self.store.query_one("SELECT password_hash FROM users WHERE id = ?", (user_id,))
        if row is None:
            raise UserNotFound(f"user {user_id} not found")
        return row["password_hash"]

    def store_password_hash(self, user_id: int, stored: str | None, *, keep_token_id: int | None = None) -> int:
        """Store a hash made by :func:`elowen.daemon.passwords.hash_password` (``None``: remove
        the password; the user logs in with a token only) and revoke the user's login tokens
        (``origin = 'login'``, made by ``POST /auth/login``) in the same transaction, except
        ``keep_token_id`` (the token of a user changing their own password). Issued tokens stay.
        Returns how many login tokens were revoked.

        Raises:
            UserNotFound.
        """
        with self.store.transaction():
            if not self.store.execute("UPDATE users SET password_hash = ? WHERE id = ?", (stored, user_id)):
                raise UserNotFound(f"user {user_id} not found")
            return self.store.execute(
                "DELETE FROM tokens WHERE user_id = ? AND origin = 'login' AND id IS NOT ?",
                (user_id, keep_token_id),
            )

    def upgrade_password_hash(self, user_id: int, old: str, new: str) -> bool:
        """Replace hash ``old`` by ``new`` (same password, today's parameters) unless the
        password changed meanwhile; returns whether it did."""
        return bool(self.store.execute("UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?", (new, user_id, old)))

    @staticmethod
    def check_current(stored: str | None, current: str | None) -> None:
        """For a user changing their own password: ``current`` must match ``stored`` when a
        password is set (runs scrypt: call from a worker thread).

        Raises:
            WrongPassword: ``current`` is missing or does not match.
        """
        if stored is None:
            return
        if current is None:
            raise WrongPassword('give your current password ("current") to change it', missing=True)
        if not verify_password(current, stored):
            raise WrongPassword("the current password is wrong", missing=False)

    def login_row(self, name: str) -> dict[str, Any] | None:
        """``{id, password_hash}`` of the user called ``name``, or ``None``."""
        return self.store.query_one("SELECT id, password_hash FROM users WHERE name = ?", (name,))

    @staticmethod
    def verify_login(password: str, stored: str | None) -> tuple[bool, str | None]:
        """Check ``password`` against ``stored`` (``None``: no such user or no password; the same
        work is done). Returns ``(ok, fresh)`` where ``fresh`` is a new hash to store when the
        old one was made with outdated parameters. Runs scrypt: call from a worker thread."""
        ok = verify_password(password, stored)
        fresh = hash_password(password) if ok and stored is not None and needs_rehash(stored) else None
        return ok, fresh

    def issue_login_token(self, user_id: int) -> str:
        """A new full token for the user, marked ``origin = 'login'`` (what ``POST /auth/login``
        answers; ``POST /auth/logout`` revokes it). Returns it, the only time it exists in clear.

        Raises:
            UserNotFound.
        """
        with self.store.transaction():
            self.get(user_id)
            self.store.execute("DELETE FROM tokens WHERE origin = 'login' AND created_at < ?", (login_token_cutoff(),))
            token = new_token()
            self.store.execute(
                "INSERT INTO tokens (user_id, hash, scope, task_id, created_at, origin) VALUES (?, ?, 'full', NULL, ?, 'login')",
                (user_id, hash_token(token), utc_iso()),
            )
        return token

    def revoke_login_token(self, token_id: int) -> bool:
        """Delete token ``token_id`` if ``POST /auth/login`` made it; returns whether it did
        (other tokens are left alone: logging out of a web session never breaks a CLI token)."""
        return bool(self.store.execute("DELETE FROM tokens WHERE id = ? AND origin = 'login'", (token_id,)))

    def new_token(self, user_id: int) -> str:
        """Issue another full token for the user.

        Raises:
            UserNotFound.
        """
        self.get(user_id)
        return issue_token(self.store, user_id)

    def revoke_tokens(self, user_id: int) -> int:
        """Delete every full-scope token of the user (agent tokens of its tasks stay valid);
        returns how many.

        Raises:
            UserNotFound.
        """
        with self.store.transaction():
            self.get(user_id)
            return self.store.execute("DELETE FROM tokens WHERE user_id = ? AND scope = 'full'", (user_id,))

    def delete(self, user_id: int) -> int:
        """Delete the user and its full tokens; returns how many tokens were revoked.

        Its tasks stay, with ``owner_id`` set to ``null``; agent tokens of those tasks stay
        valid (detached from the user) so running agents can still report and close;
        memberships go.

        Raises:
            UserNotFound.
            LastAdmin: the user is the only admin.
        """
        with self.store.transaction():
            user = self.get(user_id)
            if user["role"] == "admin":
                row = self.store.query_one("SELECT count(*) AS n FROM users WHERE role = 'admin'")
                if row is not None and row["n"] <= 1:
                    raise LastAdmin("cannot delete the last admin")
            revoked = self.store.execute("DELETE FROM tokens WHERE user_id = ? AND scope = 'full'", (user_id,))
            self.store.execute("UPDATE tokens SET user_id = NULL WHERE user_id = ? AND scope = 'agent'", (user_id,))
            self.store.execute("DELETE FROM users WHERE id = ?", (user_id,))
        self.access.invalidate(user_id)
        return revoked

    def audience(self, user_id: int | None = None) -> list[int]:
        """Who may see a user event: every admin now, plus ``user_id`` (the user it is about,
        when it still exists). Ascending ids."""
        ids = {r["id"] for r in self.store.query("SELECT id FROM users WHERE role = 'admin'")}
        if user_id is not None and self.store.query_one("SELECT 1 AS x FROM users WHERE id = ?", (user_id,)) is not None:
            ids.add(user_id)
        return sorted(ids)

    def announce(self, events: EventBus, type: str, user_id: int, name: str | None = None) -> None:
        """Publish ``type`` (one of :data:`USER_EVENTS`) about a user, after the change is
        committed.

        Data: ``{"id": int, "name": str, "user": record | None, "audience": [user ids]}``:
        ``user`` is the record of :meth:`get` (``None`` for ``user.removed``); never a token
        or a password hash. Events without a project reach every full token, so
        ``audience`` (the daemon's private-event field, see ``routes/events.py``) limits them
        to the admins and the user concerned: members never see other users' events.

        Raises:
            ValueError: ``type`` is not a user event.
        """
        if type not in USER_EVENTS:
            raise ValueError(f"not a user event: {type!r}")
        user = None if type == "user.removed" else self.get(user_id)
        data = {"id": user_id, "name": user["name"] if user is not None else name, "user": user, "audience": self.audience(None if user is None else user_id)}
        events.publish(type, data)

    def add_project(self, user_id: int, project_id: int) -> dict[str, Any]:
        """Let the user see and act on a project (idempotent).

        Raises:
            UserNotFound: no such user or project.
        """
        with self.store.transaction():
            self.get(user_id)
            if self.store.query_one("SELECT 1 AS x FROM projects WHERE id = ?", (project_id,)) is None:
                raise UserNotFound(f"project {project_id} not found")
            self.store.execute("INSERT OR IGNORE INTO user_projects (user_id, project_id) VALUES (?, ?)", (user_id, project_id))
        self.access.invalidate(user_id)
        return self.get(user_id)

    def remove_project(self, user_id: int, project_id: int) -> dict[str, Any]:
        """Take a project away from the user.

        Raises:
            UserNotFound: no such user, or the user is not a member of the project.
        """
        self.get(user_id)
        removed = self.store.execute("DELETE FROM user_projects WHERE user_id = ? AND project_id = ?", (user_id, project_id))
        self.access.invalidate(user_id)
        if not removed:
            raise UserNotFound(f"user {user_id} is not a member of project {project_id}")
        return self.get(user_id)


class UsersHostService:
    """What plugins may do with users and tokens (service ``"users"``; see
    :class:`elowen_sdk.services.UsersService` for the contract). Synchronous, on the trio
    thread."""

    def __init__(self, users: UserService) -> None:
        self._users = users
        self._store = users.store

    def user(self, user_id: int) -> dict[str, Any] | None:
        """The user record (as :meth:`UserService.get`), or ``None``."""
        try:
            return self._users.get(user_id)
        except UserNotFound:
            return None

    def principal(self, token_id: int) -> SdkPrincipal | None:
        """Who token ``token_id`` is now (fresh role and projects), or ``None``: revoked,
        expired or its user deleted (see the contract)."""
        me = principal_of_token(self._store, int(token_id))
        if me is None:
            return None
        projects = None if me.is_admin else self._users.access.fresh_projects(me.user_id)
        return SdkPrincipal(user_id=me.user_id, name=me.name, role=me.role, scope=me.scope, task_id=me.task_id, project_ids=projects, token_id=me.token_id)

    def agent_token(self, task_id: int) -> str:
        """A new agent token bound to task ``task_id`` (acting for its owner).

        Raises:
            UserNotFound: no such task.
        """
        try:
            return create_agent_token(self._store, task_id)
        except LookupError as exc:
            raise UserNotFound(str(exc)) from None

    def revoke_task_tokens(self, task_id: int) -> int:
        """Delete every agent token bound to ``task_id``; returns how many."""
        return revoke_task_tokens(self._store, task_id)

    def overseer_token(self, mission_id: int) -> tuple[int, str]:
        """Create or reuse mission ``mission_id``'s overseer principal (member, no projects, no
        tool grants, ``kind = 'overseer'``), revoke its tokens and issue a fresh full one.
        Returns ``(user_id, token)``.

        Raises:
            ValueError: ``mission_id`` is not a positive integer.
        """
        if isinstance(mission_id, bool) or not isinstance(mission_id, int) or mission_id < 1:
            raise ValueError(f"mission id must be a positive integer, not {mission_id!r}")
        with self._store.transaction():
            row = self._store.query_one("SELECT id FROM users WHERE kind = 'overseer' AND mission_id = ?", (mission_id,))
            if row is None:
                base = name = OVERSEER_NAME.format(mission_id=mission_id)
                n = 1
                while self._store.query_one("SELECT 1 AS x FROM users WHERE name = ?", (name,)) is not None:
                    n += 1
                    name = f"{base}-{n}"
                user_id = self._store.execute(
                    "INSERT INTO users (id, name, role, allowed_execs, tool_grants, created_at, kind, mission_id) "
                    f"VALUES ({NEXT_USER_ID}, ?, 'member', NULL, '[]', ?, 'overseer', ?)",
                    (name, utc_iso(), mission_id),
                )
                created = True
            else:
                user_id, created = int(row["id"]), False
            self._store.execute("DELETE FROM tokens WHERE user_id = ?", (user_id,))
            token = issue_token(self._store, user_id)
        if created:
            self._store.audit("kernel", "user.create", f"user:{user_id}", "ok", {"kind": "overseer", "mission_id": mission_id})
        return user_id, token

    def revoke_overseer(self, mission_id: int) -> None:
        """Delete every token of mission ``mission_id``'s overseer principal (the row stays)."""
        self._store.execute("DELETE FROM tokens WHERE user_id IN (SELECT id FROM users WHERE kind = 'overseer' AND mission_id = ?)", (mission_id,))

    def overseer_mission(self, user_id: int | None) -> int | None:
        """The mission whose overseer principal ``user_id`` is, else ``None``."""
        if user_id is None:
            return None
        row = self._store.query_one("SELECT mission_id FROM users WHERE id = ? AND kind = 'overseer'", (user_id,))
        return None if row is None else int(row["mission_id"])

"""Users and their project memberships (the REST routes check who may call these)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from elowen.core.store import Store, utc_iso

from ..auth import Access, issue_token

__all__ = ["LastAdmin", "UserExists", "UserNotFound", "UserService"]

_COLUMNS = "id, name, role, allowed_execs, tool_grants, created_at"


class UserNotFound(LookupError):
    """No such user (or project)."""


class UserExists(ValueError):
    """A user of that name already exists."""


class LastAdmin(Exception):
    """The change would leave no admin."""


def _record(row: dict[str, Any], projects: list[int]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "role": row["role"],
        "allowed_execs": json.loads(row["allowed_execs"]) if row["allowed_execs"] is not None else None,
        "tool_grants": json.loads(row["tool_grants"]),
        "projects": projects,
        "created_at": row["created_at"],
    }


class UserService:
    """Create, list and change users; issue their tokens; manage ``user_projects``."""

    def __init__(self, store: Store, access: Access) -> None:
        self.store = store
        self.access = access

    def _projects(self, ids: Sequence[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {i: [] for i in ids}
        if ids:
            marks = ",".join("?" * len(ids))
            for r in self.store.query(
                f"SELECT user_id, project_id FROM user_projects WHERE user_id IN ({marks}) ORDER BY project_id", list(ids)
            ):
                out[r["user_id"]].append(r["project_id"])
        return out

    def get(self, user_id: int) -> dict[str, Any]:
        """The user record ``{id, name, role, allowed_execs, tool_grants, projects, created_at}``.

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

    def create(
        self, name: str, role: str, *, allowed_execs: Sequence[str] | None = None, tool_grants: Sequence[str] = ()
    ) -> tuple[dict[str, Any], str]:
        """Create a user and a full token; returns ``(user, token)`` (the token is shown once).

        Raises:
            UserExists: the name is taken.
        """
        with self.store.transaction():
            if self.store.query_one("SELECT 1 AS x FROM users WHERE name = ?", (name,)) is not None:
                raise UserExists(f"a user named {name!r} already exists")
            user_id = self.store.execute(
                "INSERT INTO users (name, role, allowed_execs, tool_grants, created_at) VALUES (?, ?, ?, ?, ?)",
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

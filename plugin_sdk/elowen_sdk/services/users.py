"""The ``users`` service: users and their tokens (a host service offered by the daemon).

Users and tokens have one writer, the daemon; a plugin that needs a token for a program it
starts asks this service (capability ``service:users``) instead of writing the ``users`` or
``tokens`` tables. Every method is synchronous (it runs on the trio thread, against the kernel
store). A token is ``elw_`` + 43 URL-safe characters and exists in clear only in the return
value: the store keeps its SHA-256.

Principals:

* a *person* (``kind = "person"``): an admin or a member, created through the API;
* an *overseer principal* (``kind = "overseer"``): the member a mission's parked overseer CLI
  acts as, bound to that mission (``mission_id``). It is marked in the ``users`` table, never
  recognised by its name: a person who calls themselves ``overseer-m3`` is still a person.

A *user record* is a dict::

    {"id": int, "name": str, "role": "admin" | "member", "kind": "person" | "overseer",
     "mission_id": int | None, "allowed_execs": [str] | None, "tool_grants": [str],
     "projects": [int], "created_at": str (UTC ISO 8601), "has_password": bool}
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from ..contracts import service_contract
from ..errors import UserNotFound
from ..types import Principal

__all__ = ["USER_KINDS", "UserKind", "UserNotFound", "UsersService"]

UserKind = Literal["person", "overseer"]
USER_KINDS: tuple[UserKind, ...] = ("person", "overseer")
"""Every kind of principal in the ``users`` table."""


@service_contract("users")
class UsersService(Protocol):
    """Users and tokens (service ``"users"``)."""

    def user(self, user_id: int) -> dict[str, Any] | None:
        """The user record (see the module docstring), or ``None``: no such user."""
        ...

    def agent_token(self, task_id: int) -> str:
        """A new token bound to task ``task_id`` (scope ``agent``: it may only read that task,
        post progress on it and close it), acting for the task's owner; give it to the agent
        working on the task. It is deleted with the task or by :meth:`revoke_task_tokens`.

        Raises:
            UserNotFound: no such task.
        """
        ...

    def revoke_task_tokens(self, task_id: int) -> int:
        """Delete every agent token bound to ``task_id``; returns how many (0: none)."""
        ...

    def overseer_token(self, mission_id: int) -> tuple[int, str]:
        """The overseer principal of mission ``mission_id`` — created on first use (a member
        with no projects and no tool grants, ``kind = "overseer"``), reused after — with its
        earlier tokens revoked and a fresh full token issued. Returns ``(user_id, token)``.

        Raises:
            ValueError: ``mission_id`` is not a positive integer.
        """
        ...

    def revoke_overseer(self, mission_id: int) -> None:
        """Delete every token of mission ``mission_id``'s overseer principal (the user row
        stays, so audit records keep their actor); nothing happens when it has none."""
        ...

    def principal(self, token_id: int) -> Principal | None:
        """Who token ``token_id`` (:attr:`elowen_sdk.Principal.token_id`) is NOW — its user's
        current role, scope and projects — or ``None`` when the token was revoked, its login
        expired or its user was deleted. A long-lived stream (a terminal WebSocket) calls it
        about every half second and ends or narrows itself when the answer changes."""
        ...

    def overseer_mission(self, user_id: int | None) -> int | None:
        """The mission whose overseer principal ``user_id`` is, or ``None`` (a person, an
        unknown user, or ``None``)."""
        ...

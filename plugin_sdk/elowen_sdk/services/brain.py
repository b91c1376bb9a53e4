"""The ``brain`` service: conversations and turns of the embedded agent (offered by the
``brain`` plugin).

A consumer (a scheduler, a subagent runner, a chat platform, the core loop) declares
``service:brain`` and asks ``brain = ctx.service(BrainService)``. A turn runs with exactly the
powers of the user it is run for: that user's tool grants, projects, approvals and YOLO setting;
the caller passes the user id it is entitled to act for and nothing more.

Rows are plain dicts (JSON-ready): a conversation has ``id``, ``user_id``, ``title``, ``model``,
``project_id``, ``kind``, ``created_at``; a message has ``id``, ``role`` (``user``,
``assistant``, ``tool``), ``content``, ``created_at``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from ..contracts import service_contract

__all__ = ["BrainService"]


@service_contract("brain")
class BrainService(Protocol):
    """The embedded agent (service ``"brain"``)."""

    def create_conversation(
        self,
        user_id: int,
        *,
        title: str = "",
        model: str = "",
        project_id: int | None = None,
        activate: bool = False,
        tool_grants: Sequence[str] | None = None,
        yolo: bool | None = None,
    ) -> dict[str, Any]:
        """Create a chat conversation of ``user_id``; ``activate`` makes it their active one.
        ``tool_grants`` (glob patterns of tool names) narrows what its turns are offered to the
        tools the user is granted that also match one of them (a sub-agent's share of its
        caller's access); ``yolo=False`` keeps YOLO off in it whatever the user's default. Both
        only ever narrow the user's powers.

        Raises:
            LookupError: ``project_id`` is not one of the user's projects.
            ValueError: ``model`` names no configured provider.
        """
        ...

    def conversation(self, user_id: int, cid: int) -> dict[str, Any]:
        """The conversation ``cid`` if ``user_id`` owns it.

        Raises:
            LookupError: no such conversation of this user.
        """
        ...

    async def turn(self, user_id: int, cid: int | None, text: str, *, max_turns: int | None = None) -> dict[str, Any]:
        """Run one turn to its end; ``cid`` ``None``: the user's active conversation. Returns
        ``{"conversation_id": int, "messages": [new message rows], "goal": dict | None}``.

        Raises:
            LookupError: not the user's conversation.
            ElowenError: a turn is already running there (``Busy``).
        """
        ...

    def stream(self, user_id: int, cid: int | None, text: str, *, max_turns: int | None = None, driver: bool = True) -> AsyncIterator[dict[str, Any]]:
        """Run a turn and yield its events (dicts with ``type``: ``brain.delta``,
        ``brain.tool``, ``brain.message``, …) until ``brain.done``."""
        ...

    def abort(self, user_id: int, cid: int | None) -> bool:
        """Abort the running turn of the conversation; ``False`` when none runs."""
        ...

    async def channel_turn(self, platform: str, platform_user: str, text: str) -> list[str]:
        """One message from a chat platform's sender in, the reply texts out (a link code for
        an unlinked sender).

        Raises:
            ValueError: a bad ``platform_user`` or ``text``.
        """
        ...

"""The ``user-tools`` service: brain tools that belong to one user (offered by the
``mcp-client`` plugin: the tools of the MCP servers a user added for themselves).

Registered tools (``register_tools``) are instance-wide: every user's turns are offered them,
under that user's grants. A user's own tools cannot be registered that way — another user must
not be offered them, and they change while the plugin runs. The brain (which declares
``service:user-tools`` optionally) asks this service for them at the start of every turn of a
user and offers them exactly like registered tools: under the user's ``tool_grants`` globs, with
``needs_approval`` and YOLO applied the same way. Two users may own tools of the same name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..contracts import service_contract
from ..types import Tool

__all__ = ["UserToolsService"]


@service_contract("user-tools")
class UserToolsService(Protocol):
    """Per-user brain tools (service ``"user-tools"``)."""

    def tools_for(self, user_id: int) -> Sequence[Tool]:
        """The tools of ``user_id`` now (``[]`` for a user without any). Synchronous and cheap
        (no I/O: it is called on every turn); a tool's name follows the rules of
        :class:`elowen_sdk.Tool` and should not be one of a registered tool (the registered one
        is offered first; the user's gets a ``_2`` suffix on the wire)."""
        ...

"""Request and result records of the relay: defined in :mod:`elowen_sdk.chat` (so consumers
depend on the SDK, not on this plugin) and re-exported here for the relay's own modules."""

from __future__ import annotations

from elowen_sdk.chat import ChatRequest, ChatResult, Delta, FinishReason, Message, Role, ToolCall, ToolSpec, Usage

__all__ = ["ChatRequest", "ChatResult", "Delta", "FinishReason", "Message", "Role", "ToolCall", "ToolSpec", "Usage"]

"""Chat types of the ``inference`` service: request and result records (frozen dataclasses,
protocol-neutral) and the errors a caller catches.

The relay translates these to and from each wire protocol (OpenAI Chat Completions,
Anthropic Messages, the embedded llama.cpp model); callers never see a wire shape. A plugin
that talks to a model imports them from here and asks ``ctx.service(InferenceService)``
(:mod:`elowen_sdk.services.inference`).

:class:`ToolCall` here is a call *the model* made; :class:`elowen_sdk.ToolCall` is the brain's
``before_tool_call`` hook record, a different thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import (
    BadResponse,
    ContextTooLong,
    InferenceError,
    LocalModelUnavailable,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeout,
    UnknownProvider,
)

__all__ = [
    "BadResponse",
    "ChatRequest",
    "ChatResult",
    "ContextTooLong",
    "Delta",
    "FinishReason",
    "InferenceError",
    "LocalModelUnavailable",
    "Message",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderHTTPError",
    "ProviderTimeout",
    "Role",
    "ToolCall",
    "ToolSpec",
    "UnknownProvider",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call made by the model.

    Attributes:
        id: the provider's call id (``call_…``, ``toolu_…``); echo it in the tool result.
        name: the tool's name.
        arguments: the parsed JSON arguments (always an object).
    """

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the text (may be empty for an assistant message that only calls tools).
        tool_calls: for ``assistant``: the tool calls it made.
        tool_call_id: for ``tool``: the id of the call this message answers.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: name, description and a JSON Schema ``object`` of its
    parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call, as the provider reported them (0 when it reported none)."""

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat call.

    Attributes:
        model_spec: ``"<provider>/<model>"`` (split at the first ``/``; the model part may
            contain more ``/``), or ``""`` for the relay's default model.
        messages: the conversation, oldest first.
        tools: tools the model may call.
        response_schema: a JSON Schema the answer must follow (structured output); the result's
            ``text`` is then the JSON document.
        schema_name: the name given to ``response_schema`` on the wire (``[a-zA-Z0-9_-]{1,64}``).
        max_tokens: the output limit (``None``: provider default; Anthropic needs one, 4096 is
            sent).
        temperature: sampling temperature, or ``None`` for the provider default.
        stream: :meth:`InferenceService.chat` streams on the wire and returns the assembled result.
        purpose: a label recorded with the token usage (``overseer``, ``brain``, ``planner``…).
    """

    model_spec: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    response_schema: Mapping[str, Any] | None = None
    schema_name: str = "response"
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    purpose: str = ""


FinishReason = str
"""Normalised: ``stop`` (natural end), ``length`` (token limit), ``tool_calls`` (the model wants
tool results), or the provider's own word for anything else (``content_filter``, …)."""


@dataclass(frozen=True, slots=True)
class ChatResult:
    """The complete answer to a :class:`ChatRequest`.

    Attributes:
        text: the assistant's text (the JSON document for structured output).
        tool_calls: the tool calls the model made, in order.
        usage: token counts.
        finish_reason: see :data:`FinishReason`.
        model: the model that answered, as the provider named it.
        provider: the provider's configured name.
        latency_ms: wall time of the whole call, retries included, in milliseconds.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: FinishReason = "stop"
    model: str = ""
    provider: str = ""
    latency_ms: int = 0


@dataclass(frozen=True, slots=True)
class Delta:
    """One streamed piece: some ``text``, or one complete ``tool_call`` (tool calls are
    delivered whole, once their arguments have fully arrived)."""

    text: str = ""
    tool_call: ToolCall | None = None

"""Records exchanged between the scripted model server and a test's script."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["anthropic", "responses", "chat", "gemini", "other"]

FAKE_MODEL = "fake-model"


@dataclass(frozen=True)
class ToolCall:
    """A tool call the scripted model makes.

    ``arguments`` is serialised as JSON on the wire. ``call_id`` is generated per protocol
    (``toolu_…`` / ``call_…``) when left empty.
    """

    name: str
    arguments: Mapping[str, Any]
    call_id: str = ""


@dataclass(frozen=True)
class ToolResult:
    """A tool result found in a request: the client's answer to an earlier :class:`ToolCall`."""

    call_id: str
    output: str
    is_error: bool = False


@dataclass(frozen=True)
class Reply:
    """What the scripted model answers to one request.

    ``text`` and ``tool_calls`` may both be set (text first). ``delay`` (seconds) is slept before
    the response starts, so a client's "working" screen can be observed. ``status`` >= 400 sends a
    protocol-shaped error body with ``error_message`` instead of a completion.
    """

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    delay: float = 0.0
    status: int = 200
    error_message: str = ""


@dataclass(frozen=True)
class ParsedRequest:
    """One recorded request, with the parts scripts and assertions need already extracted.

    ``prompt`` is the last text the user typed (injected context such as
    ``<system-reminder>…</system-reminder>`` or ``<environment_context>…`` blocks is skipped).
    ``tool_results`` are the tool results that came after that prompt, in order;
    ``all_tool_results`` are every tool result in the conversation. ``json_schema`` is the
    requested structured-output schema (Chat ``response_format``, Responses ``text.format``,
    Anthropic ``output_format``), or ``None``.
    """

    api: Api
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    model: str = ""
    stream: bool = False
    tool_names: tuple[str, ...] = ()
    prompt: str = ""
    tool_results: tuple[ToolResult, ...] = ()
    all_tool_results: tuple[ToolResult, ...] = ()
    response_format: Mapping[str, Any] | None = None
    json_schema: Mapping[str, Any] | None = None
    received_at: float = field(default_factory=time.monotonic)

    @property
    def has_tools(self) -> bool:
        """True when the request offers the model at least one tool."""
        return bool(self.tool_names)


Script = Callable[[ParsedRequest], Reply]

"""A scripted model server for tests: real HTTP on 127.0.0.1, four streaming wire protocols.

The real coding-agent CLIs (and Elowen's inference relay) are pointed at this server instead of a
model provider. Each test decides what the "model" answers by giving the server a *script*: a
callable ``(ParsedRequest) -> Reply``. Every request is recorded for assertions.

Wire protocols spoken (shapes as the CLIs pinned in ``scripts/install-test-deps`` consume them:
Claude Code 2.1.197, Codex 0.171.0, OpenCode 1.18.33, Kilo 7.7.7, Gemini CLI 0.61.0):

* Anthropic Messages — ``POST …/v1/messages`` (Claude Code adds ``?beta=true``). Streaming SSE:
  ``message_start``, ``content_block_start``, ``content_block_delta`` (``text_delta``,
  ``input_json_delta``), ``content_block_stop``, ``message_delta`` (``stop_reason`` ``tool_use`` or
  ``end_turn``), ``message_stop``. Non-streaming: one ``message`` object.
  ``POST …/v1/messages/count_tokens`` answers ``{"input_tokens": N}``.
* OpenAI Responses — ``POST …/v1/responses``. Streaming SSE: ``response.created``,
  ``response.in_progress``, ``response.output_item.added/done``,
  ``response.content_part.added/done``, ``response.output_text.delta/done``,
  ``response.function_call_arguments.delta/done``, ``response.completed``. Non-streaming: one
  ``response`` object.
* OpenAI Chat Completions — ``POST …/v1/chat/completions``. Streaming: ``chat.completion.chunk``
  objects with ``delta.content`` / ``delta.tool_calls``, a ``finish_reason`` chunk (``stop`` or
  ``tool_calls``), a usage chunk when ``stream_options.include_usage`` is set, then
  ``data: [DONE]``. Non-streaming: one ``chat.completion`` object. ``response_format`` (json_schema)
  is exposed to the script as :attr:`ParsedRequest.json_schema`.
* Gemini API — ``POST …/v1beta/models/<model>:streamGenerateContent?alt=sse`` (bare ``data:``
  frames of ``GenerateContentResponse`` with ``candidates[0].content.parts`` holding ``text`` or
  ``functionCall``; the last with ``finishReason: "STOP"``), ``…:generateContent`` (one object;
  ``generationConfig.responseJsonSchema`` / ``responseSchema`` is the ``json_schema``),
  ``…:countTokens`` (``{"totalTokens": N}``). See ``_gemini.py``.

Any other path answers 404 and is still recorded (``api == "other"``).

Usage (sync or trio tests alike; the server runs in a daemon thread)::

    with ModelServer() as server:          # DefaultScript
        ...  # point a CLI at server.url
        req = server.wait_for(lambda r: r.tool_results, timeout=60)
"""

from __future__ import annotations

from ._http import ModelServer as ModelServer
from ._parse import parse_request as parse_request
from ._script import DefaultScript as DefaultScript
from ._script import example_for_schema as example_for_schema
from ._script import shell_tool_call as shell_tool_call
from ._types import Api as Api
from ._types import ParsedRequest as ParsedRequest
from ._types import Reply as Reply
from ._types import Script as Script
from ._types import ToolCall as ToolCall
from ._types import ToolResult as ToolResult

__all__ = [
    "Api",
    "DefaultScript",
    "ModelServer",
    "ParsedRequest",
    "Reply",
    "Script",
    "ToolCall",
    "ToolResult",
    "example_for_schema",
    "parse_request",
    "shell_tool_call",
]

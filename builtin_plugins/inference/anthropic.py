"""Anthropic Messages (``POST {base_url}/v1/messages``, headers ``x-api-key`` and
``anthropic-version: 2023-06-01``).

Wire shapes per Anthropic's Messages API reference (version header ``2023-06-01``):

* ``system`` is a top-level string, not a message: the relay's system messages are joined
  (blank line between) and moved there;
* roles alternate ``user``/``assistant``: consecutive messages of one role are merged into one
  message of content blocks;
* an assistant turn's tool calls are ``tool_use`` blocks ``{id, name, input}``; tool results go
  back in the next ``user`` message as ``tool_result`` blocks ``{tool_use_id, content}``;
* tools: ``[{name, description, input_schema}]``; ``max_tokens`` is required (4096 when the
  request gives none);
* streaming events: ``message_start`` (model, input tokens), ``content_block_start`` /
  ``content_block_delta`` (``text_delta``, ``input_json_delta``) / ``content_block_stop``,
  ``message_delta`` (``stop_reason``, cumulative ``usage.output_tokens``), ``message_stop``;
  ``ping`` is ignored and ``error`` ends the stream with :class:`BadResponse`.

**Structured output**: the Messages API has no ``json_schema`` response format, so the relay
offers one extra tool named ``request.schema_name`` whose ``input_schema`` is the wanted schema
and forces it with ``tool_choice: {type: "tool", name}``. The model's ``input`` for that tool is
the answer: it becomes the result's ``text`` (JSON), it is not reported as a tool call, and the
finish reason is ``stop``. While forced, the model cannot call the request's other tools.

``base_url`` is the host root: ``https://api.anthropic.com`` (no ``/v1``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .base import HTTPProvider, parse_arguments
from .errors import BadResponse, InferenceError
from .types import ChatRequest, ChatResult, Delta, Message, ToolCall, Usage

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider", "DEFAULT_MAX_TOKENS", "build_payload", "normalise_stop"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls", "pause_turn": "stop"}


def normalise_stop(reason: str | None) -> str:
    """Anthropic's ``stop_reason`` in the relay's words (``stop``, ``length``, ``tool_calls``)."""
    return _STOP.get(reason or "end_turn", reason or "stop")


def _blocks(msg: Message) -> list[dict[str, Any]]:
    if msg.role == "tool":
        return [{"type": "tool_result", "tool_use_id": msg.tool_call_id or "", "content": msg.content}]
    blocks: list[dict[str, Any]] = []
    if msg.content:
        blocks.append({"type": "text", "text": msg.content})
    if msg.role == "assistant":
        blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)} for c in msg.tool_calls)
    return blocks


def build_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for the Messages API from the relay's messages."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "system":
            if msg.content:
                system.append(msg.content)
            continue
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = _blocks(msg)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return "\n\n".join(system), out


def build_payload(request: ChatRequest, model: str, *, stream: bool) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages``.

    Raises:
        InferenceError: a request tool has the same name as ``schema_name``.
    """
    system, messages = build_messages(request.messages)
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS, "messages": messages}
    if system:
        body["system"] = system
    tools = [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in request.tools]
    if request.response_schema is not None:
        if any(t.name == request.schema_name for t in request.tools):
            raise InferenceError(f"schema_name {request.schema_name!r} collides with a tool of the same name")
        tools.append(
            {
                "name": request.schema_name,
                "description": "Give your final answer by calling this tool; its input is the answer.",
                "input_schema": dict(request.response_schema),
            }
        )
        body["tool_choice"] = {"type": "tool", "name": request.schema_name}
    if tools:
        body["tools"] = tools
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if stream:
        body["stream"] = True
    return body


def _is_schema_tool(request: ChatRequest, name: str) -> bool:
    return request.response_schema is not None and name == request.schema_name


class AnthropicProvider(HTTPProvider):
    """An Anthropic Messages provider (``kind = "anthropic"``)."""

    def url(self) -> str:
        return f"{self.config.base_url}/v1/messages"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def payload(self, request: ChatRequest, model: str, *, stream: bool) -> dict[str, Any]:
        return build_payload(request, model, stream=stream)

    def parse(self, data: Any, request: ChatRequest) -> ChatResult:
        if data.get("type") == "error":
            raise BadResponse(f"{self.config.name}: error answer: {json.dumps(data)[:300]}")
        text: list[str] = []
        calls: list[ToolCall] = []
        structured = False
        for block in data.get("content") or []:
            kind = block.get("type")
            if kind == "text":
                text.append(block.get("text", ""))
            elif kind == "tool_use":
                args = parse_arguments(block.get("input"), provider=self.config.name, tool=block["name"])
                if _is_schema_tool(request, block["name"]):
                    structured = True
                    text = [json.dumps(args)]
                else:
                    calls.append(ToolCall(block["id"], block["name"], args))
        usage = data.get("usage") or {}
        finish = "stop" if structured and not calls else normalise_stop(data.get("stop_reason"))
        return ChatResult(
            text="".join(text),
            tool_calls=tuple(calls),
            usage=Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)),
            finish_reason=finish,
            model=str(data.get("model") or ""),
        )

    async def parse_stream(self, events: AsyncIterator[tuple[str, str]], request: ChatRequest) -> AsyncIterator[Delta | ChatResult]:
        text: list[str] = []
        calls: list[ToolCall] = []
        blocks: dict[int, dict[str, Any]] = {}
        input_tokens = output_tokens = 0
        stop: str | None = None
        model = ""
        structured = False
        stopped = False
        async for event, data in events:
            payload = json.loads(data)
            kind = payload.get("type", event)
            if kind == "message_start":
                message = payload.get("message") or {}
                model = message.get("model") or model
                usage = message.get("usage") or {}
                input_tokens = int(usage.get("input_tokens") or 0)
                output_tokens = int(usage.get("output_tokens") or 0)
            elif kind == "content_block_start":
                block = dict(payload["content_block"])
                block["json"] = []
                blocks[int(payload["index"])] = block
                if block.get("type") == "text" and block.get("text"):
                    text.append(block["text"])
                    yield Delta(text=block["text"])
            elif kind == "content_block_delta":
                block = blocks[int(payload["index"])]
                delta = payload["delta"]
                if delta.get("type") == "text_delta":
                    text.append(delta["text"])
                    yield Delta(text=delta["text"])
                elif delta.get("type") == "input_json_delta":
                    piece = delta.get("partial_json", "")
                    block["json"].append(piece)
                    if piece and _is_schema_tool(request, block.get("name", "")):
                        text.append(piece)
                        yield Delta(text=piece)
            elif kind == "content_block_stop":
                block = blocks.get(int(payload["index"])) or {}
                if block.get("type") == "tool_use":
                    raw = "".join(block["json"])
                    args = parse_arguments(raw or block.get("input") or {}, provider=self.config.name, tool=block["name"])
                    if _is_schema_tool(request, block["name"]):
                        structured = True
                        if not raw:
                            text.append(json.dumps(args))
                            yield Delta(text=text[-1])
                    else:
                        call = ToolCall(block["id"], block["name"], args)
                        calls.append(call)
                        yield Delta(tool_call=call)
            elif kind == "message_delta":
                stop = (payload.get("delta") or {}).get("stop_reason") or stop
                usage = payload.get("usage") or {}
                if usage.get("output_tokens") is not None:
                    output_tokens = int(usage["output_tokens"])
                if usage.get("input_tokens"):
                    input_tokens = int(usage["input_tokens"])
            elif kind == "message_stop":
                stopped = True
                break
            elif kind == "error":
                err = payload.get("error") or {}
                raise BadResponse(f"{self.config.name}: stream error {err.get('type', '')}: {err.get('message', data[:200])}")
        if not stopped:
            raise BadResponse(f"{self.config.name}: the stream ended before message_stop")
        yield ChatResult(
            text="".join(text),
            tool_calls=tuple(calls),
            usage=Usage(input_tokens, output_tokens),
            finish_reason="stop" if structured and not calls else normalise_stop(stop),
            model=model,
        )

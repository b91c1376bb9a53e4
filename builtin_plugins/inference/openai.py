"""OpenAI Chat Completions (``POST {base_url}/chat/completions``), the dialect also spoken by
Ollama, vLLM, llama.cpp's ``llama-server``, LM Studio and OpenRouter.

Wire shapes per the OpenAI API reference (Chat Completions, 2024–2025):

* messages: ``system``/``user``/``assistant`` with ``content``; an assistant turn's tool calls
  as ``tool_calls: [{id, type: "function", function: {name, arguments: "<json>"}}]``; each tool
  result as ``{role: "tool", tool_call_id, content}``;
* tools: ``[{type: "function", function: {name, description, parameters}}]``;
* structured output: ``response_format: {type: "json_schema", json_schema: {name, schema,
  strict: true}}`` (strict mode needs every property listed in ``required`` and
  ``additionalProperties: false`` on OpenAI's own servers; other servers are laxer);
* streaming: SSE ``chat.completion.chunk`` objects, ``delta.content`` text, ``delta.tool_calls``
  fragments keyed by ``index`` (id and name in the first fragment, ``arguments`` text spread
  over the rest), a ``finish_reason`` chunk, a last chunk with ``usage`` and empty ``choices``
  when ``stream_options: {include_usage: true}`` is sent, then ``data: [DONE]``.

``base_url`` includes the API version prefix: ``https://api.openai.com/v1``,
``http://127.0.0.1:11434/v1`` (Ollama), ``https://openrouter.ai/api/v1``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from .base import HTTPProvider, parse_arguments
from .errors import BadResponse
from .types import ChatRequest, ChatResult, Delta, Message, ToolCall, Usage

__all__ = ["OpenAIProvider", "build_messages", "build_payload", "normalise_finish"]

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls"}


def normalise_finish(reason: str | None, has_calls: bool) -> str:
    """OpenAI's ``finish_reason`` in the relay's words (``stop``, ``length``, ``tool_calls``)."""
    if reason is None:
        return "tool_calls" if has_calls else "stop"
    return _FINISH.get(reason, reason)


def _message(msg: Message) -> dict[str, Any]:
    if msg.role == "tool":
        return {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": msg.content}
    out: dict[str, Any] = {"role": msg.role, "content": msg.content}
    if msg.role == "assistant" and msg.tool_calls:
        out["content"] = msg.content or None
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))}} for c in msg.tool_calls]
    return out


def build_messages(messages: Any) -> list[dict[str, Any]]:
    """The relay's messages as Chat Completions messages."""
    return [_message(m) for m in messages]


def build_payload(request: ChatRequest, model: str, *, stream: bool) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions``."""
    body: dict[str, Any] = {"model": model, "messages": build_messages(request.messages)}
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}} for t in request.tools
        ]
    if request.response_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name, "schema": dict(request.response_schema), "strict": True},
        }
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _usage(data: Any) -> Usage:
    usage = data.get("usage") or {}
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


class OpenAIProvider(HTTPProvider):
    """An OpenAI-compatible Chat Completions provider (``kind = "openai"``)."""

    def url(self) -> str:
        return f"{self.config.base_url}/chat/completions"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def payload(self, request: ChatRequest, model: str, *, stream: bool) -> dict[str, Any]:
        return build_payload(request, model, stream=stream)

    def parse(self, data: Any, request: ChatRequest) -> ChatResult:
        choices = data.get("choices") or []
        if not choices:
            raise BadResponse(f"{self.config.name}: answer without choices: {json.dumps(data)[:300]}")
        choice = choices[0]
        message = choice.get("message") or {}
        calls = tuple(
            ToolCall(
                id=c.get("id") or f"call_{i}",
                name=c["function"]["name"],
                arguments=parse_arguments(c["function"].get("arguments"), provider=self.config.name, tool=c["function"]["name"]),
            )
            for i, c in enumerate(message.get("tool_calls") or [])
        )
        return ChatResult(
            text=message.get("content") or "",
            tool_calls=calls,
            usage=_usage(data),
            finish_reason=normalise_finish(choice.get("finish_reason"), bool(calls)),
            model=str(data.get("model") or ""),
        )

    @staticmethod
    def _slot(frag: Any, pending: dict[int, dict[str, Any]], done: int) -> int:
        """The index a ``delta.tool_calls`` fragment belongs to. Servers that leave out
        ``index`` start a new call with each new ``id``; id-less fragments continue the last."""
        if frag.get("index") is not None:
            return int(frag["index"])
        last = max(pending, default=done - 1)
        if frag.get("id") and (last not in pending or pending[last]["id"] not in ("", frag["id"])):
            return last + 1
        return max(last, 0)

    async def parse_stream(self, events: AsyncIterator[tuple[str, str]], request: ChatRequest) -> AsyncIterator[Delta | ChatResult]:
        text: list[str] = []
        pending: dict[int, dict[str, Any]] = {}  # index → {"id", "name", "arguments": [..]}
        done_calls: list[ToolCall] = []
        finish: str | None = None
        usage = Usage()
        model = ""
        finished = False

        def flush_calls() -> list[ToolCall]:
            out = []
            for index in sorted(pending):
                p = pending[index]
                name = p["name"]
                out.append(ToolCall(p["id"] or f"call_{index}", name, parse_arguments("".join(p["arguments"]), provider=self.config.name, tool=name)))
            pending.clear()
            done_calls.extend(out)
            return out

        async for _event, data in events:
            if data.strip() == "[DONE]":
                finished = True
                break
            chunk = json.loads(data)
            if isinstance(chunk.get("error"), dict):
                raise BadResponse(f"{self.config.name}: stream error: {chunk['error'].get('message', chunk['error'])}")
            model = chunk.get("model") or model
            if chunk.get("usage"):
                usage = _usage(chunk)
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                piece = delta.get("content")
                if piece:
                    text.append(piece)
                    yield Delta(text=piece)
                for frag in delta.get("tool_calls") or []:
                    slot = pending.setdefault(self._slot(frag, pending, len(done_calls)), {"id": "", "name": "", "arguments": []})
                    slot["id"] = frag.get("id") or slot["id"]
                    fn = frag.get("function") or {}
                    slot["name"] = fn.get("name") or slot["name"]
                    if fn.get("arguments"):
                        slot["arguments"].append(fn["arguments"])
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
                    for call in flush_calls():
                        yield Delta(tool_call=call)
        if not finished and finish is None:
            raise BadResponse(f"{self.config.name}: the stream ended before [DONE]")
        for call in flush_calls():
            yield Delta(tool_call=call)
        yield ChatResult(
            text="".join(text),
            tool_calls=tuple(done_calls),
            usage=usage,
            finish_reason=normalise_finish(finish, bool(done_calls)),
            model=model,
        )

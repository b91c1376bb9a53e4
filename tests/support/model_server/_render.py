"""Render a Reply as each wire protocol's streaming events or complete JSON body.

Anthropic Messages, OpenAI Responses and OpenAI Chat Completions, in the shapes Claude Code
2.1.197, Codex 0.171.0 and OpenCode 1.18.33 / Kilo 7.7.7 consume (see the package docstring).
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ._gemini import gemini_body, gemini_error, gemini_events
from ._types import FAKE_MODEL, Api, ParsedRequest, Reply, ToolCall

Event = tuple[str | None, Any]  # (SSE event name or None, JSON payload or the literal "[DONE]")


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _halves(text: str) -> list[str]:
    """Split a string in two non-empty pieces (when possible) so deltas are really incremental."""
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj)) // 4)


def _with_ids(reply: Reply, prefix: str) -> list[ToolCall]:
    return [call if call.call_id else ToolCall(call.name, call.arguments, new_id(prefix)) for call in reply.tool_calls]


def _anthropic_message(request: ParsedRequest, reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in _with_ids(reply, "toolu_"):
        content.append(
            {
                "type": "tool_use",
                "id": call.call_id,
                "name": call.name,
                "input": dict(call.arguments),
            }
        )
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": request.model or FAKE_MODEL,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": tokens(request.body),
            "output_tokens": tokens(content),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _anthropic_events(request: ParsedRequest, reply: Reply) -> Iterator[Event]:
    message = _anthropic_message(request, reply)
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for piece in _halves(block["text"]):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
        else:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": dict(block, input={}),
                },
            )
            for piece in _halves(json.dumps(block["input"])):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _responses_output(reply: Reply) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append(
            {
                "id": new_id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in _with_ids(reply, "call_"):
        output.append(
            {
                "id": new_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": json.dumps(dict(call.arguments)),
            }
        )
    return output


def _responses_object(request: ParsedRequest, response_id: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    usage = None
    if status == "completed":
        inp, out = tokens(request.body), tokens(output)
        usage = {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + out,
        }
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": request.model or FAKE_MODEL,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
    }


def _responses_events(request: ParsedRequest, reply: Reply) -> Iterator[Event]:
    response_id = new_id("resp_")
    output = _responses_output(reply)
    seq = itertools.count()

    def event(kind: str, **payload: Any) -> Event:
        return kind, {"type": kind, "sequence_number": next(seq), **payload}

    pending = _responses_object(request, response_id, "in_progress", [])
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(output):
        ref = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", content=[]),
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", **ref, content_index=0, part=part)
            for piece in _halves(text):
                yield event("response.output_text.delta", **ref, content_index=0, delta=piece)
            yield event("response.output_text.done", **ref, content_index=0, text=text)
            yield event("response.content_part.done", **ref, content_index=0, part=item["content"][0])
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", arguments=""),
            )
            for piece in _halves(item["arguments"]):
                yield event("response.function_call_arguments.delta", **ref, delta=piece)
            yield event("response.function_call_arguments.done", **ref, arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event(
        "response.completed",
        response=_responses_object(request, response_id, "completed", output),
    )


def _chat_tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
        }
        for call in _with_ids(reply, "call_")
    ]


def _chat_usage(request: ParsedRequest, reply: Reply) -> dict[str, int]:
    prompt = tokens(request.body)
    completion = tokens([reply.text, [(c.name, dict(c.arguments)) for c in reply.tool_calls]])
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chat_completion(request: ParsedRequest, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    calls = _chat_tool_calls(reply)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model or FAKE_MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": _chat_usage(request, reply),
    }


def _chat_events(request: ParsedRequest, reply: Reply) -> Iterator[Event]:
    base = {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.model or FAKE_MODEL,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return None, dict(base, choices=[choice])

    yield chunk({"role": "assistant", "content": ""})
    for piece in _halves(reply.text):
        yield chunk({"content": piece})
    calls = _chat_tool_calls(reply)
    for index, call in enumerate(calls):
        head = {"index": index, "id": call["id"], "type": "function"}
        yield chunk({"tool_calls": [dict(head, function={"name": call["function"]["name"], "arguments": ""})]})
        for piece in _halves(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if calls else "stop")
    if (request.body.get("stream_options") or {}).get("include_usage"):
        yield None, dict(base, choices=[], usage=_chat_usage(request, reply))
    yield None, "[DONE]"


def error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    if api == "gemini":
        return gemini_error(status, message)
    if api == "anthropic":
        kinds = {
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }
        return {
            "type": "error",
            "error": {"type": kinds.get(status, "api_error"), "message": message},
        }
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


STREAMERS: dict[str, Callable[[ParsedRequest, Reply], Iterator[Event]]] = {
    "anthropic": _anthropic_events,
    "responses": _responses_events,
    "chat": _chat_events,
    "gemini": gemini_events,
}


def full_body(request: ParsedRequest, reply: Reply) -> dict[str, Any]:
    if request.api == "anthropic":
        return _anthropic_message(request, reply)
    if request.api == "gemini":
        return gemini_body(request, reply)
    if request.api == "responses":
        return _responses_object(request, new_id("resp_"), "completed", _responses_output(reply))
    return _chat_completion(request, reply)

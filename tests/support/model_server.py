"""A scripted model server for tests: real HTTP on 127.0.0.1, three streaming wire protocols.

The real coding-agent CLIs (and Elowen's inference relay) are pointed at this server instead of a
model provider. Each test decides what the "model" answers by giving the server a *script*: a
callable ``(ParsedRequest) -> Reply``. Every request is recorded for assertions.

Wire protocols spoken (shapes as the CLIs pinned in ``scripts/install-test-deps`` consume them:
Claude Code 2.1.197, Codex 0.171.0, OpenCode 1.18.33, Kilo 7.7.7):

* Anthropic Messages — ``POST …/v1/messages`` (Claude Code adds ``?beta=true``). Streaming SSE:
  ``message_start``, ``content_block_start``, ``content_block_delta`` (``text_delta``,
  ``input_json_delta``), ``content_block_stop``, ``message_delta`` (``stop_reason`` ``tool_use`` or
  ``end_turn``), ``message_stop``. Non-streaming: one ``message`` object.
  ``POST …/v1/messages/count_tokens`` answers ``{"input_tokens": N}``.
* OpenAI Responses — ``POST …/v1/responses``. Streaming SSE: ``response.created``,
  ``response.in_progress``, ``response.output_item.added/done``, ``response.content_part.added/done``,
  ``response.output_text.delta/done``, ``response.function_call_arguments.delta/done``,
  ``response.completed``. Non-streaming: one ``response`` object.
* OpenAI Chat Completions — ``POST …/v1/chat/completions``. Streaming: ``chat.completion.chunk``
  objects with ``delta.content`` / ``delta.tool_calls``, a ``finish_reason`` chunk (``stop`` or
  ``tool_calls``), a usage chunk when ``stream_options.include_usage`` is set, then
  ``data: [DONE]``. Non-streaming: one ``chat.completion`` object. ``response_format`` (json_schema)
  is exposed to the script as :attr:`ParsedRequest.json_schema`.

Any other path answers 404 and is still recorded (``api == "other"``).

Usage (sync or trio tests alike; the server runs in a daemon thread)::

    with ModelServer() as server:          # DefaultScript
        ...  # point a CLI at server.url
        req = server.wait_for(lambda r: r.tool_results, timeout=60)
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import re
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

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

log = logging.getLogger(__name__)

Api = Literal["anthropic", "responses", "chat", "other"]

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


# --------------------------------------------------------------------------------------------
# Request parsing
# --------------------------------------------------------------------------------------------

_INJECTED = re.compile(r"^\s*<([A-Za-z_][\w-]*)[^>]*>.*</\1>\s*$", re.DOTALL)


def _is_injected(text: str) -> bool:
    """Context the client wraps in one XML-ish element (``<system-reminder>``, ``<environment_context>``)."""
    return bool(_INJECTED.match(text))


def _text_of(content: Any) -> str:
    """Flatten a content field (string, or list of text-bearing parts) to a string."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    if isinstance(content, Mapping):
        for key in ("text", "output", "content"):
            if key in content:
                return _text_of(content[key])
    return ""


class _Turns:
    """Walks a conversation: tracks the last user prompt and the tool results after it."""

    def __init__(self) -> None:
        self.prompt = ""
        self.since_prompt: list[ToolResult] = []
        self.all: list[ToolResult] = []

    def user_text(self, text: str) -> None:
        if text.strip() and not _is_injected(text):
            self.prompt = text
            self.since_prompt = []

    def tool_result(self, result: ToolResult) -> None:
        self.since_prompt.append(result)
        self.all.append(result)


def _parse_anthropic(body: Mapping[str, Any], turns: _Turns) -> tuple[tuple[str, ...], Any]:
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if block.get("type") == "text":
                turns.user_text(block.get("text", ""))
            elif block.get("type") == "tool_result":
                turns.tool_result(
                    ToolResult(
                        call_id=block.get("tool_use_id", ""),
                        output=_text_of(block.get("content", "")),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
    tools = tuple(t.get("name") or t.get("type", "") for t in body.get("tools") or [])
    fmt = body.get("output_format") or (body.get("output_config") or {}).get("format")
    return tools, fmt


def _parse_responses(body: Mapping[str, Any], turns: _Turns) -> tuple[tuple[str, ...], Any]:
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            content = item.get("content")
            parts = [{"text": content}] if isinstance(content, str) else content or []
            for part in parts:
                turns.user_text(part.get("text", ""))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            turns.tool_result(
                ToolResult(call_id=item.get("call_id", ""), output=_text_of(item.get("output", "")))
            )
    tools = tuple(t.get("name") or t.get("type", "") for t in body.get("tools") or [])
    fmt = (body.get("text") or {}).get("format")
    return tools, fmt


def _parse_chat(body: Mapping[str, Any], turns: _Turns) -> tuple[tuple[str, ...], Any]:
    for message in body.get("messages") or []:
        role = message.get("role")
        if role == "user":
            content = message.get("content")
            parts = [{"text": content}] if isinstance(content, str) else content or []
            for part in parts:
                if part.get("type", "text") == "text":
                    turns.user_text(part.get("text", ""))
        elif role == "tool":
            turns.tool_result(
                ToolResult(
                    call_id=message.get("tool_call_id", ""),
                    output=_text_of(message.get("content", "")),
                )
            )
    tools = tuple(
        (t.get("function") or {}).get("name") or t.get("name", "") for t in body.get("tools") or []
    )
    return tools, body.get("response_format")


def _api_for(method: str, path: str) -> Api:
    if method != "POST":
        return "other"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    return "other"


def _schema_of(fmt: Any) -> Mapping[str, Any] | None:
    """The JSON schema inside a structured-output format object, in any of the three dialects."""
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    if isinstance(fmt.get("json_schema"), Mapping):  # Chat Completions
        return fmt["json_schema"].get("schema") or {}
    return fmt.get("schema") or {}  # Responses text.format, Anthropic output_format


def parse_request(
    method: str, target: str, headers: Mapping[str, str], body: Mapping[str, Any]
) -> ParsedRequest:
    """Parse one HTTP request into a :class:`ParsedRequest` (no I/O; usable on its own)."""
    parts = urlsplit(target)
    api = _api_for(method, parts.path)
    turns = _Turns()
    tools: tuple[str, ...] = ()
    fmt: Any = None
    if api == "anthropic":
        tools, fmt = _parse_anthropic(body, turns)
    elif api == "responses":
        tools, fmt = _parse_responses(body, turns)
    elif api == "chat":
        tools, fmt = _parse_chat(body, turns)
    return ParsedRequest(
        api=api,
        method=method,
        path=parts.path,
        query=parts.query,
        headers=dict(headers),
        body=body,
        model=str(body.get("model", "")),
        stream=bool(body.get("stream", False)),
        tool_names=tools,
        prompt=turns.prompt,
        tool_results=tuple(turns.since_prompt),
        all_tool_results=tuple(turns.all),
        response_format=fmt if isinstance(fmt, Mapping) else None,
        json_schema=_schema_of(fmt),
    )


# --------------------------------------------------------------------------------------------
# Default script
# --------------------------------------------------------------------------------------------


def shell_tool_call(request: ParsedRequest, command: str) -> ToolCall:
    """A call of the shell tool offered in ``request``, named and shaped as each CLI expects.

    ``Bash`` {command, description} (Claude Code), ``exec_command`` {cmd, sandbox_permissions:
    "require_escalated", justification} (Codex 0.171: under ``approval_policy = "on-request"`` it
    asks the user only for escalated commands; ``justification`` is shown as "Reason:"),
    ``bash`` {command, description} (OpenCode, Kilo). Raises ``ValueError`` when the request
    offers none of them.
    """
    description = "Run a shell command (fake model)"
    if "Bash" in request.tool_names:
        return ToolCall("Bash", {"command": command, "description": description})
    if "exec_command" in request.tool_names:
        return ToolCall(
            "exec_command",
            {
                "cmd": command,
                "sandbox_permissions": "require_escalated",
                "justification": f"Fake model wants to run: {command}",
            },
        )
    if "bash" in request.tool_names:
        return ToolCall("bash", {"command": command, "description": description})
    raise ValueError(f"no known shell tool among {request.tool_names!r}")


def example_for_schema(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """A small value that satisfies a simple JSON schema (enum/const, object, array, scalars, $ref).

    String fields named ``title`` get ``"Fake session title"``; other strings ``"fake"``.
    """
    root = root if root is not None else schema
    return _example(schema, root, "")


def _example(schema: Mapping[str, Any], root: Mapping[str, Any], key: str) -> Any:
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _example(target, root, key)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        if schema.get(combinator):
            return _example(schema[combinator][0], root, key)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _example(sub, root, name) for name, sub in props.items()}
    if kind == "array":
        count = int(schema.get("minItems", 1))
        return [_example(schema.get("items") or {}, root, key) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    text = "Fake session title" if key == "title" else "fake"
    return text.ljust(int(schema.get("minLength", 0)), "x")


_RUN = re.compile(r"RUN:\s*(.+?)(?=\s+RUN:|\s+SLOW\b|\s+ERROR:\d{3}\b|$)", re.MULTILINE)
_ERROR = re.compile(r"\bERROR:(\d{3})\b")


class DefaultScript:
    """The default model behaviour, steered by the prompt text.

    * A request without tools (the CLIs' title requests) → a title: ``"Fake session title"``, or
      when a JSON schema is requested, :func:`example_for_schema` of it as JSON text.
    * ``ERROR:NNN`` in the prompt → HTTP status NNN with an authentication/API error body.
    * ``RUN: <cmd>`` (one or more; each ends at the next ``RUN:``, ``SLOW``, or end of line) → for
      the i-th reply after the prompt (i = tool results seen since it), if a command i remains:
      ``"FAKE: I will run a shell command."`` plus :func:`shell_tool_call` for it; otherwise
      ``"FAKE: done."``. Without ``RUN:`` → ``"FAKE: ok."``.
    * ``SLOW`` in the prompt → every reply to a tool-bearing request is delayed by ``slow_delay``
      seconds.
    """

    title = "Fake session title"

    def __init__(self, *, slow_delay: float = 3.0) -> None:
        self.slow_delay = slow_delay

    def __call__(self, request: ParsedRequest) -> Reply:
        if not request.has_tools:
            if request.json_schema is not None:
                return Reply(text=json.dumps(example_for_schema(request.json_schema)))
            return Reply(text=self.title)
        prompt = request.prompt
        error = _ERROR.search(prompt)
        if error:
            status = int(error.group(1))
            return Reply(status=status, error_message=f"Fake model server error {status}")
        delay = self.slow_delay if re.search(r"\bSLOW\b", prompt) else 0.0
        commands = [m.strip() for m in _RUN.findall(prompt)]
        step = len(request.tool_results)
        if step < len(commands):
            return Reply(
                text="FAKE: I will run a shell command.",
                tool_calls=(shell_tool_call(request, commands[step]),),
                delay=delay,
            )
        return Reply(text="FAKE: done." if commands else "FAKE: ok.", delay=delay)


# --------------------------------------------------------------------------------------------
# Response rendering
# --------------------------------------------------------------------------------------------

Event = tuple[str | None, Any]  # (SSE event name or None, JSON payload or the literal "[DONE]")


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _halves(text: str) -> list[str]:
    """Split a string in two non-empty pieces (when possible) so deltas are really incremental."""
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def _tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj)) // 4)


def _with_ids(reply: Reply, prefix: str) -> list[ToolCall]:
    return [
        call if call.call_id else ToolCall(call.name, call.arguments, _new_id(prefix))
        for call in reply.tool_calls
    ]


def _anthropic_message(request: ParsedRequest, reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in _with_ids(reply, "toolu_"):
        content.append(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": dict(call.arguments)}
        )
    return {
        "id": _new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": request.model or FAKE_MODEL,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": _tokens(request.body),
            "output_tokens": _tokens(content),
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
            yield "content_block_start", {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
            for piece in _halves(block["text"]):
                yield "content_block_delta", {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
        else:
            yield "content_block_start", {
                "type": "content_block_start",
                "index": index,
                "content_block": dict(block, input={}),
            }
            for piece in _halves(json.dumps(block["input"])):
                yield "content_block_delta", {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    yield "message_stop", {"type": "message_stop"}


def _responses_output(reply: Reply) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append(
            {
                "id": _new_id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in _with_ids(reply, "call_"):
        output.append(
            {
                "id": _new_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": json.dumps(dict(call.arguments)),
            }
        )
    return output


def _responses_object(
    request: ParsedRequest, response_id: str, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    usage = None
    if status == "completed":
        inp, out = _tokens(request.body), _tokens(output)
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
    response_id = _new_id("resp_")
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
            yield event(
                "response.content_part.done", **ref, content_index=0, part=item["content"][0]
            )
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
    prompt = _tokens(request.body)
    completion = _tokens([reply.text, [(c.name, dict(c.arguments)) for c in reply.tool_calls]])
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
        "id": _new_id("chatcmpl-"),
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
        "id": _new_id("chatcmpl-"),
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


def _error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    if api == "anthropic":
        kinds = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                 429: "rate_limit_error", 529: "overloaded_error"}
        return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


_STREAMERS: dict[str, Callable[[ParsedRequest, Reply], Iterator[Event]]] = {
    "anthropic": _anthropic_events,
    "responses": _responses_events,
    "chat": _chat_events,
}


def _full_body(request: ParsedRequest, reply: Reply) -> dict[str, Any]:
    if request.api == "anthropic":
        return _anthropic_message(request, reply)
    if request.api == "responses":
        return _responses_object(request, _new_id("resp_"), "completed", _responses_output(reply))
    return _chat_completion(request, reply)


# --------------------------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("model server: " + format, *args)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            raw = bytes(data)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            return gzip.decompress(raw)
        if encoding == "deflate":
            return zlib.decompress(raw)
        if encoding not in ("", "identity"):
            raise ValueError(f"unsupported request Content-Encoding {encoding!r}")
        return raw

    def _handle(self) -> None:
        owner = self.server.owner
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        if not isinstance(body, dict):
            body = {"_json": body}
        request = parse_request(self.command, self.path, dict(self.headers.items()), body)
        owner._record(request)
        if request.api == "other":
            if self.command == "POST" and request.path.endswith("/messages/count_tokens"):
                self._send_json(200, {"input_tokens": _tokens(body)})
            else:
                self._send_json(404, _error_body("chat", 404, f"no route {request.path}"))
            return
        try:
            reply = owner.script(request)
            # Rendered up front, so a failure is a clean 500 and not a truncated stream.
            if reply.status >= 400:
                status = reply.status
                payload: Any = _error_body(request.api, status, reply.error_message)
            elif request.stream:
                status, payload = 200, list(_STREAMERS[request.api](request, reply))
            else:
                status, payload = 200, _full_body(request, reply)
        except Exception as exc:  # a broken script must show up as a failing request, not a hang
            log.exception("model server script failed")
            self._send_json(500, _error_body(request.api, 500, f"script failed: {exc!r}"))
            return
        if reply.delay > 0:
            time.sleep(reply.delay)
        if isinstance(payload, list):
            self._send_stream(payload)
        else:
            self._send_json(status, payload)

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", _new_id("req_"))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, events: Sequence[Event]) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", _new_id("req_"))
            self.end_headers()
            for name, payload in events:
                data = payload if isinstance(payload, str) else json.dumps(payload)
                frame = ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (the user interrupted the agent): normal, not an error.
            log.debug("model server: client went away mid-stream")
            self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("model server: error while serving %s", client_address)


class ModelServer:
    """A scripted model server on 127.0.0.1, serving from a background thread.

    ``url`` is ``http://127.0.0.1:PORT`` (no trailing slash, no ``/v1``). ``script`` may be
    replaced at any time. ``requests`` is a snapshot list of every :class:`ParsedRequest`
    received, in arrival order. Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, script: Script | None = None, *, host: str = "127.0.0.1") -> None:
        self.script: Script = script or DefaultScript()
        self._host = host
        self._requests: list[ParsedRequest] = []
        self._cond = threading.Condition()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL; raises ``RuntimeError`` before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("model server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[ParsedRequest]:
        """Every request received so far (a copy)."""
        with self._cond:
            return list(self._requests)

    def start(self) -> ModelServer:
        """Bind a free port and start serving in a daemon thread. Returns ``self``."""
        httpd = _HTTPServer((self._host, 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name="elowen-test-model-server",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (in-flight streams are abandoned)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, request: ParsedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def wait_for(
        self, predicate: Callable[[ParsedRequest], Any], timeout: float = 60.0
    ) -> ParsedRequest:
        """Block until a recorded request satisfies ``predicate``; return the first that does.

        Raises ``TimeoutError`` after ``timeout`` seconds (blocking: from trio code call it via
        ``trio.to_thread.run_sync``).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for request in self._requests:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"no matching request within {timeout} s; got "
                        f"{[(r.api, r.path, r.prompt[:40]) for r in self._requests]}"
                    )
                self._cond.wait(remaining)

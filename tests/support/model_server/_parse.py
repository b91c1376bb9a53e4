"""Parse a recorded HTTP request (any of the three wire protocols) into a ParsedRequest."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ._gemini import gemini_method, parse_gemini
from ._types import Api, ParsedRequest, ToolResult

_INJECTED = re.compile(r"^\s*<([A-Za-z_][\w-]*)[^>]*>.*</\1>\s*$", re.DOTALL)


def _is_injected(text: str) -> bool:
    """True for context a client wraps in one XML-ish element rather than typed text.

    Claude Code 2.1.197 injects ``<system-reminder>`` blocks, Codex 0.171.0
    ``<environment_context>`` and Kilo 7.7.7 ``<environment_details>`` as user text.
    """
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
            turns.tool_result(ToolResult(call_id=item.get("call_id", ""), output=_text_of(item.get("output", ""))))
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
    tools = tuple((t.get("function") or {}).get("name") or t.get("name", "") for t in body.get("tools") or [])
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
    found = gemini_method(path)
    if found and found[1] != "countTokens":
        return "gemini"
    return "other"


def _schema_of(fmt: Any) -> Mapping[str, Any] | None:
    """The JSON schema inside a structured-output format object, in any of the three dialects."""
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    if isinstance(fmt.get("json_schema"), Mapping):  # Chat Completions
        return fmt["json_schema"].get("schema") or {}
    return fmt.get("schema") or {}  # Responses text.format, Anthropic output_format


def parse_request(method: str, target: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> ParsedRequest:
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
    elif api == "gemini":
        tools, fmt = parse_gemini(body, turns)
    gemini = gemini_method(parts.path) if api == "gemini" else None
    return ParsedRequest(
        api=api,
        method=method,
        path=parts.path,
        query=parts.query,
        headers=dict(headers),
        body=body,
        model=gemini[0] if gemini else str(body.get("model", "")),
        stream=gemini[1] == "streamGenerateContent" if gemini else bool(body.get("stream", False)),
        tool_names=tools,
        prompt=turns.prompt,
        tool_results=tuple(turns.since_prompt),
        all_tool_results=tuple(turns.all),
        response_format=fmt if isinstance(fmt, Mapping) else None,
        json_schema=_schema_of(fmt),
    )

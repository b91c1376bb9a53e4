"""The Gemini API wire protocol (``generativelanguage`` v1beta), as Gemini CLI 0.61.0 speaks it.

Requests: ``POST …/v1beta/models/<model>:streamGenerateContent?alt=sse`` (streaming) or
``…:generateContent`` (one JSON object), body ``{contents: [{role: "user"|"model", parts: [...]}],
systemInstruction, tools: [{functionDeclarations: [{name, …}]}], generationConfig}``. A part is
``{text}``, ``{functionCall: {id?, name, args}}`` or ``{functionResponse: {id?, name,
response}}``. ``…:countTokens`` answers ``{"totalTokens": N}``.

Streaming replies are bare ``data: <GenerateContentResponse>`` SSE frames (no event names, no
``[DONE]``): text pieces, then each function call as one whole part, the last frame carrying
``finishReason: "STOP"`` and ``usageMetadata``. Errors are ``{"error": {code, message, status}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ._types import FAKE_MODEL, ParsedRequest, Reply, ToolResult

Event = tuple[str | None, Any]

_METHODS = ("streamGenerateContent", "generateContent", "countTokens")


def gemini_method(path: str) -> tuple[str, str] | None:
    """``(model, method)`` for a ``…/models/<model>:<method>`` path of a known method, else None."""
    head, sep, method = path.rpartition(":")
    if not sep or method not in _METHODS or "/models/" not in head:
        return None
    return head.rsplit("/models/", 1)[1], method


def _lower_types(schema: Any) -> Any:
    """Gemini ``responseSchema`` spells types in capitals (``OBJECT``); make it JSON Schema."""
    if isinstance(schema, Mapping):
        out = {k: _lower_types(v) for k, v in schema.items()}
        if isinstance(out.get("type"), str):
            out["type"] = out["type"].lower()
        return out
    if isinstance(schema, list):
        return [_lower_types(item) for item in schema]
    return schema


def parse_gemini(body: Mapping[str, Any], turns: Any) -> tuple[tuple[str, ...], Any]:
    """Walk ``contents`` into ``turns``; return (tool names, a json_schema format or None)."""
    for content in body.get("contents") or []:
        if content.get("role", "user") != "user":
            continue
        for part in content.get("parts") or []:
            if "text" in part and not part.get("thought"):
                turns.user_text(part.get("text") or "")
            elif "functionResponse" in part:
                response = part["functionResponse"]
                payload = response.get("response") or {}
                output = payload.get("output", payload.get("error", payload))
                turns.tool_result(
                    ToolResult(
                        call_id=str(response.get("id") or response.get("name", "")),
                        output=output if isinstance(output, str) else json.dumps(output),
                        is_error="error" in payload,
                    )
                )
    tools = tuple(decl.get("name", "") for tool in body.get("tools") or [] for decl in tool.get("functionDeclarations") or [])
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    fmt = {"type": "json_schema", "schema": _lower_types(schema)} if schema else None
    return tools, fmt


def _usage(request: ParsedRequest, reply: Reply) -> dict[str, int]:
    prompt = max(1, len(json.dumps(request.body)) // 4)
    out = max(1, len(json.dumps([reply.text, [c.name for c in reply.tool_calls]])) // 4)
    return {"promptTokenCount": prompt, "candidatesTokenCount": out, "totalTokenCount": prompt + out}


def _call_part(call: Any) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": call.name, "args": dict(call.arguments)}
    if call.call_id:
        fc["id"] = call.call_id
    return {"functionCall": fc}


def _response(request: ParsedRequest, parts: list[dict[str, Any]], finish: bool, reply: Reply) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": request.model or FAKE_MODEL}
    if finish:
        candidate["finishReason"] = "STOP"
        out["usageMetadata"] = _usage(request, reply)
    return out


def gemini_events(request: ParsedRequest, reply: Reply) -> Iterator[Event]:
    """The SSE frames of a streamed reply (see the module docstring)."""
    text = reply.text
    pieces = [p for p in (text[: len(text) // 2], text[len(text) // 2 :]) if p]
    frames: list[list[dict[str, Any]]] = [[{"text": p}] for p in pieces]
    frames += [[_call_part(call)] for call in reply.tool_calls]
    if not frames:
        frames = [[{"text": ""}]]
    for index, parts in enumerate(frames):
        yield None, _response(request, parts, index == len(frames) - 1, reply)


def gemini_body(request: ParsedRequest, reply: Reply) -> dict[str, Any]:
    """The complete ``GenerateContentResponse`` of a non-streamed reply."""
    parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    parts += [_call_part(call) for call in reply.tool_calls]
    return _response(request, parts or [{"text": ""}], True, reply)


def gemini_error(status: int, message: str) -> dict[str, Any]:
    """A Google API error body (``UNAUTHENTICATED`` for 401, ``RESOURCE_EXHAUSTED`` for 429…)."""
    kinds = {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND",
        429: "RESOURCE_EXHAUSTED",
        503: "UNAVAILABLE",
    }
    return {"error": {"code": status, "message": message, "status": kinds.get(status, "INTERNAL")}}


def count_tokens(body: Mapping[str, Any]) -> dict[str, int]:
    """The ``countTokens`` answer."""
    return {"totalTokens": max(1, len(json.dumps(body)) // 4)}

"""Wire-level pieces: the SSE reader, request shapes that need no server, and the exports."""

from __future__ import annotations

import httpx
import pytest

import elowen_builtins.inference as inference
from elowen_builtins.inference import ChatRequest, InferenceError, Message, ToolCall, ToolSpec, anthropic, openai
from elowen_builtins.inference.transport import error_detail, iter_sse


async def _events(raw: bytes) -> list[tuple[str, str]]:
    response = httpx.Response(200, stream=httpx.ByteStream(raw))
    return [e async for e in iter_sse(response)]


async def test_sse_reader() -> None:
    raw = (
        b": a comment\r\n"
        b'event: message_start\r\ndata: {"a": 1}\r\n\r\n'
        b"data: line one\ndata: line two\nid: 7\nretry: 100\n\n"
        b"data:no-space\n\n"
        b"\n\n"
        b"data: [DONE]"  # no trailing blank line: still delivered
    )
    assert await _events(raw) == [
        ("message_start", '{"a": 1}'),
        ("message", "line one\nline two"),
        ("message", "no-space"),
        ("message", "[DONE]"),
    ]


def test_error_detail() -> None:
    assert error_detail('{"error": {"message": "Invalid key", "type": "x"}}') == "Invalid key"
    assert error_detail('{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}') == "Overloaded"
    assert error_detail("<html>Bad Gateway</html>") == "<html>Bad Gateway</html>"


def test_openai_assistant_tool_call_message_shape() -> None:
    msgs = openai.build_messages([Message("assistant", "", tool_calls=(ToolCall("c1", "f", {"x": 1}),))])
    assert msgs == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]}
    ]


def test_anthropic_schema_name_must_not_collide_with_a_tool() -> None:
    request = ChatRequest("a/m", [Message("user", "x")], tools=[ToolSpec("verdict", "d")], response_schema={"type": "object"}, schema_name="verdict")
    with pytest.raises(InferenceError, match="collides"):
        anthropic.build_payload(request, "m", stream=False)


def test_finish_reasons_are_normalised() -> None:
    assert [anthropic.normalise_stop(r) for r in ("end_turn", "max_tokens", "tool_use", "stop_sequence", "refusal")] == [
        "stop",
        "length",
        "tool_calls",
        "stop",
        "refusal",
    ]
    assert [openai.normalise_finish(r, False) for r in ("stop", "length", "tool_calls", "content_filter")] == ["stop", "length", "tool_calls", "content_filter"]


def test_exports_are_exact() -> None:
    assert sorted(inference.__all__) == sorted(set(inference.__all__))
    for name in inference.__all__:
        assert hasattr(inference, name), name
    assert set(inference.__all__) >= {
        "Relay",
        "ChatRequest",
        "ChatResult",
        "Delta",
        "Message",
        "ToolSpec",
        "ToolCall",
        "Usage",
        "InferenceError",
        "UnknownProvider",
        "ProviderHTTPError",
        "ProviderTimeout",
        "BadResponse",
        "add_provider",
        "remove_provider",
        "list_providers",
    }


def test_openai_tool_call_fragments_without_index() -> None:
    slot = openai.OpenAIProvider._slot
    pending: dict = {}
    assert slot({"index": 3}, pending, 0) == 3
    assert slot({"id": "a", "function": {"name": "f"}}, pending, 0) == 0
    pending[0] = {"id": "a", "name": "f", "arguments": []}
    assert slot({"function": {"arguments": "{}"}}, pending, 0) == 0  # continues the last call
    assert slot({"id": "a"}, pending, 0) == 0
    assert slot({"id": "b", "function": {"name": "g"}}, pending, 0) == 1  # a new id: a new call
    assert slot({"id": "c"}, {}, 2) == 2  # after two calls already flushed

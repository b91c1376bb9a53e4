"""OpenAI Chat Completions through the relay, against the scripted model server."""

from __future__ import annotations

import json

import pytest

from elowen_builtins.inference import ChatRequest, ChatResult, Delta, Message, ToolCall, ToolSpec
from tests.support.model_server import Reply
from tests.support.model_server import ToolCall as ScriptedCall

from .conftest import HeaderServer, provider_table

BASH = ToolSpec("bash", "Run a shell command.", {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})


async def test_chat_plain(server: HeaderServer, make_relay, monkeypatch: pytest.MonkeyPatch) -> None:
    server.script = lambda r: Reply(text="Hello from the model")
    monkeypatch.setenv("ELOWEN_TEST_OAI_KEY", "sk-test-123")
    async with make_relay({"oai": provider_table(server, "openai", api_key_env="ELOWEN_TEST_OAI_KEY")}) as relay:
        result = await relay.chat(ChatRequest("oai/gpt-test/v2", [Message("system", "Be brief."), Message("user", "Hi")], max_tokens=50, temperature=0.2))
    assert result.text == "Hello from the model"
    assert result.provider == "oai" and result.model == "gpt-test/v2"
    assert result.finish_reason == "stop"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.latency_ms >= 0
    (req,) = server.requests
    assert req.api == "chat" and req.path == "/v1/chat/completions"
    assert req.headers["Authorization"] == "Bearer sk-test-123"
    assert req.body["model"] == "gpt-test/v2"  # split at the first '/'
    assert req.body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert req.body["max_tokens"] == 50 and req.body["temperature"] == 0.2
    assert "stream" not in req.body and "tools" not in req.body


async def test_stream_text_and_usage(server: HeaderServer, make_relay) -> None:
    server.script = lambda r: Reply(text="streamed answer text")
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:
        items = []
        async with relay.stream(ChatRequest("oai/m", [Message("user", "Hi")])) as stream:
            async for item in stream:
                items.append(item)
    deltas = [i for i in items if isinstance(i, Delta)]
    assert len(deltas) >= 2  # really incremental
    assert "".join(d.text for d in deltas) == "streamed answer text"
    final = items[-1]
    assert isinstance(final, ChatResult) and final is stream.result
    assert final.text == "streamed answer text" and final.finish_reason == "stop"
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0  # include_usage chunk
    (req,) = server.requests
    assert req.stream and req.body["stream_options"] == {"include_usage": True}


async def test_tool_call_round_trip(server: HeaderServer, make_relay) -> None:
    """The model asks for a tool, we send the result, it answers (non-streaming)."""
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:
        history = [Message("user", "Please RUN: ls -la")]
        first = await relay.chat(ChatRequest("oai/m", history, tools=[BASH]))
        assert first.finish_reason == "tool_calls"
        (call,) = first.tool_calls
        assert call.name == "bash" and call.arguments["command"] == "ls -la" and call.id.startswith("call_")
        history += [Message("assistant", first.text, tool_calls=first.tool_calls), Message("tool", "file-a\nfile-b", tool_call_id=call.id)]
        second = await relay.chat(ChatRequest("oai/m", history, tools=[BASH]))
    assert second.text == "FAKE: done." and second.finish_reason == "stop" and not second.tool_calls
    first_req, second_req = server.requests
    assert first_req.body["tools"] == [{"type": "function", "function": {"name": "bash", "description": BASH.description, "parameters": dict(BASH.parameters)}}]
    sent = second_req.body["messages"]
    assert sent[1]["role"] == "assistant" and sent[1]["tool_calls"][0]["id"] == call.id
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == dict(call.arguments)
    assert sent[2] == {"role": "tool", "tool_call_id": call.id, "content": "file-a\nfile-b"}
    assert [(r.call_id, r.output) for r in second_req.tool_results] == [(call.id, "file-a\nfile-b")]


async def test_stream_tool_calls_accumulated_by_index(server: HeaderServer, make_relay) -> None:
    server.script = lambda r: Reply(
        text="Two calls.",
        tool_calls=(ScriptedCall("bash", {"command": "echo one"}), ScriptedCall("bash", {"command": "echo 'two'"})),
    )
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:
        async with relay.stream(ChatRequest("oai/m", [Message("user", "go")], tools=[BASH])) as stream:
            items = [i async for i in stream]
    calls = [i.tool_call for i in items if isinstance(i, Delta) and i.tool_call]
    assert [c.arguments["command"] for c in calls] == ["echo one", "echo 'two'"]
    assert all(isinstance(c, ToolCall) and c.id.startswith("call_") for c in calls)
    final = stream.result
    assert final is not None and final.tool_calls == tuple(calls) and final.finish_reason == "tool_calls"
    assert final.text == "Two calls."


async def test_structured_output_request_shape(server: HeaderServer, make_relay) -> None:
    schema = {
        "type": "object",
        "properties": {"approve": {"type": "boolean"}, "confidence": {"type": "number"}, "rationale": {"type": "string"}},
        "required": ["approve", "confidence", "rationale"],
        "additionalProperties": False,
    }
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:
        result = await relay.chat(ChatRequest("oai/m", [Message("user", "Score this")], response_schema=schema, schema_name="verdict"))
    (req,) = server.requests
    assert req.body["response_format"] == {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}
    assert req.json_schema == schema
    assert json.loads(result.text) == {"approve": False, "confidence": 0, "rationale": "fake"}

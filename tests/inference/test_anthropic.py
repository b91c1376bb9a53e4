"""Anthropic Messages through the relay, against the scripted model server."""

from __future__ import annotations

import json

from elowen_builtins.inference import ChatRequest, ChatResult, Delta, Message, ToolSpec
from elowen_builtins.inference.anthropic import ANTHROPIC_VERSION
from tests.support.model_server import ParsedRequest, Reply
from tests.support.model_server import ToolCall as ScriptedCall

from .conftest import HeaderServer, provider_table

BASH = ToolSpec("bash", "Run a shell command.", {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})


async def test_chat_plain_system_split_out(server: HeaderServer, make_relay, tmp_path) -> None:
    key_file = tmp_path / "anthropic.key"
    key_file.write_text("sk-ant-test\n")
    server.script = lambda r: Reply(text="Bonjour")
    async with make_relay({"ant": provider_table(server, "anthropic", api_key_file=str(key_file))}) as relay:
        result = await relay.chat(
            ChatRequest("ant/claude-test", [Message("system", "Rule one."), Message("system", "Rule two."), Message("user", "Hi")], temperature=0.0)
        )
    assert result.text == "Bonjour" and result.finish_reason == "stop"
    assert result.provider == "ant" and result.model == "claude-test"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    (req,) = server.requests
    assert req.api == "anthropic" and req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-test"
    assert req.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert req.body["system"] == "Rule one.\n\nRule two."
    assert req.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert req.body["max_tokens"] == 4096 and req.body["temperature"] == 0.0


async def test_stream_text(server: HeaderServer, make_relay) -> None:
    server.script = lambda r: Reply(text="a streamed reply")
    async with make_relay({"ant": provider_table(server, "anthropic")}) as relay:
        async with relay.stream(ChatRequest("ant/claude-test", [Message("user", "Hi")], max_tokens=100)) as stream:
            items = [i async for i in stream]
    deltas = [i.text for i in items if isinstance(i, Delta)]
    assert len(deltas) >= 2 and "".join(deltas) == "a streamed reply"
    final = items[-1]
    assert isinstance(final, ChatResult) and final.text == "a streamed reply" and final.finish_reason == "stop"
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 1  # message_delta's count
    assert final.model == "claude-test"
    assert server.requests[0].body["stream"] is True and server.requests[0].body["max_tokens"] == 100


async def test_tool_call_round_trip(server: HeaderServer, make_relay) -> None:
    """Streaming: tool_use arrives as input_json_delta pieces; the result goes back as a
    tool_result block; the model answers."""
    async with make_relay({"ant": provider_table(server, "anthropic")}) as relay:
        history = [Message("user", "RUN: git status")]
        async with relay.stream(ChatRequest("ant/claude-test", history, tools=[BASH])) as stream:
            items = [i async for i in stream]
        first = stream.result
        assert first is not None and first.finish_reason == "tool_calls"
        (call,) = first.tool_calls
        assert [i.tool_call for i in items if isinstance(i, Delta) and i.tool_call] == [call]
        assert call.name == "bash" and call.arguments["command"] == "git status" and call.id.startswith("toolu_")
        history += [Message("assistant", first.text, tool_calls=first.tool_calls), Message("tool", "clean", tool_call_id=call.id)]
        second = await relay.chat(ChatRequest("ant/claude-test", history, tools=[BASH]))
    assert second.text == "FAKE: done." and not second.tool_calls
    first_req, second_req = server.requests
    assert first_req.body["tools"] == [{"name": "bash", "description": BASH.description, "input_schema": dict(BASH.parameters)}]
    sent = second_req.body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": first.text}, {"type": "tool_use", "id": call.id, "name": "bash", "input": dict(call.arguments)}],
    }
    assert sent[2] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "clean"}]}
    assert [(r.call_id, r.output) for r in second_req.tool_results] == [(call.id, "clean")]


async def test_consecutive_tool_results_merge_into_one_user_message(server: HeaderServer, make_relay) -> None:
    from elowen_builtins.inference import ToolCall

    calls = (ToolCall("toolu_1", "bash", {"command": "a"}), ToolCall("toolu_2", "bash", {"command": "b"}))
    history = [
        Message("user", "go"),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "A", tool_call_id="toolu_1"),
        Message("tool", "B", tool_call_id="toolu_2"),
        Message("user", "and now?"),
    ]
    async with make_relay({"ant": provider_table(server, "anthropic")}) as relay:
        await relay.chat(ChatRequest("ant/claude-test", history, tools=[BASH]))
    sent = server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert [b["type"] for b in sent[2]["content"]] == ["tool_result", "tool_result", "text"]


SCHEMA = {
    "type": "object",
    "properties": {"approve": {"type": "boolean"}, "confidence": {"type": "number"}},
    "required": ["approve", "confidence"],
}


def _answer_with_schema_tool(request: ParsedRequest) -> Reply:
    forced = request.body.get("tool_choice", {}).get("name")
    return Reply(tool_calls=(ScriptedCall(forced, {"approve": True, "confidence": 0.9}),))


async def test_structured_output_by_forced_tool(server: HeaderServer, make_relay) -> None:
    server.script = _answer_with_schema_tool
    async with make_relay({"ant": provider_table(server, "anthropic")}) as relay:
        result = await relay.chat(ChatRequest("ant/claude-test", [Message("user", "Score it")], response_schema=SCHEMA, schema_name="verdict"))
        async with relay.stream(ChatRequest("ant/claude-test", [Message("user", "Score it")], response_schema=SCHEMA, schema_name="verdict")) as stream:
            items = [i async for i in stream]
    body = server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
    assert body["tools"][-1]["name"] == "verdict" and body["tools"][-1]["input_schema"] == SCHEMA
    assert json.loads(result.text) == {"approve": True, "confidence": 0.9}
    assert result.tool_calls == () and result.finish_reason == "stop"
    streamed = stream.result
    assert streamed is not None and json.loads(streamed.text) == {"approve": True, "confidence": 0.9}
    assert "".join(i.text for i in items if isinstance(i, Delta)) == streamed.text
    assert streamed.tool_calls == () and streamed.finish_reason == "stop"

"""Tests of the scripted model server over real HTTP (httpx), one section per wire protocol."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.model_server import (
    DefaultScript,
    ModelServer,
    ParsedRequest,
    Reply,
    ToolCall,
    example_for_schema,
)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def sse(body: str) -> list[tuple[str | None, Any]]:
    """Parse an SSE body into (event name, decoded data) pairs; ``[DONE]`` stays a string."""
    events: list[tuple[str | None, Any]] = []
    for frame in body.split("\n\n"):
        if not frame.strip():
            continue
        name, data = None, ""
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data += line[len("data: ") :]
        events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


def post(server: ModelServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=10)


# --- Anthropic Messages ---------------------------------------------------------------------

CLAUDE_TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}, {"name": "Read"}]


def anthropic_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 100,
        "stream": True,
        "tools": CLAUDE_TOOLS,
        "messages": messages,
        **extra,
    }


def test_anthropic_stream_tool_use_then_final_text(server: ModelServer) -> None:
    prompt = {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>\nctx\n</system-reminder>"},
            {"type": "text", "text": "Do it. RUN: touch a.txt"},
        ],
    }
    system_after = {"role": "system", "content": "injected after the prompt"}
    response = post(server, "/v1/messages?beta=true", anthropic_body([prompt, system_after]))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = sse(response.text)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"]
    assert starts[1]["name"] == "Bash" and starts[1]["id"].startswith("toolu_")
    text = "".join(d["delta"]["text"] for n, d in events if d.get("delta", {}).get("type") == "text_delta")
    args = "".join(d["delta"]["partial_json"] for n, d in events if d.get("delta", {}).get("type") == "input_json_delta")
    assert text == "FAKE: I will run a shell command."
    assert json.loads(args)["command"] == "touch a.txt"
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"

    recorded = server.requests[0]
    assert (recorded.api, recorded.query, recorded.stream) == ("anthropic", "beta=true", True)
    assert recorded.prompt == "Do it. RUN: touch a.txt"
    assert recorded.tool_names == ("Bash", "Read")

    tool_use_id = starts[1]["id"]
    follow_up = [
        prompt,
        {"role": "assistant", "content": [dict(starts[1], input=json.loads(args))]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "done!"}],
        },
    ]
    events = sse(post(server, "/v1/messages?beta=true", anthropic_body(follow_up)).text)
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert "FAKE: done." == "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert server.requests[1].tool_results[0].call_id == tool_use_id
    assert server.requests[1].tool_results[0].output == "done!"


def test_anthropic_rejection_with_feedback_starts_a_new_turn(server: ModelServer) -> None:
    """Claude Code sends the rejected tool_result and the user's new text in one message."""
    messages = [
        {"role": "user", "content": "RUN: rm x"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "rejected",
                    "is_error": True,
                },
                {"type": "text", "text": "No. RUN: ls"},
            ],
        },
    ]
    events = sse(post(server, "/v1/messages", anthropic_body(messages)).text)
    tool = next(d["content_block"] for n, d in events if n == "content_block_start" and d["index"] == 1)
    assert tool["name"] == "Bash"
    recorded = server.requests[0]
    assert recorded.prompt == "No. RUN: ls" and recorded.tool_results == ()
    assert recorded.all_tool_results[0].is_error


def test_anthropic_non_streaming_title_and_count_tokens(server: ModelServer) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    message = post(server, "/v1/messages", body).json()
    assert message["type"] == "message" and message["stop_reason"] == "end_turn"
    assert json.loads(message["content"][0]["text"]) == {"title": "Fake session title"}
    counted = post(server, "/v1/messages/count_tokens", body).json()
    assert counted["input_tokens"] > 0


# --- OpenAI Responses -----------------------------------------------------------------------


def responses_body(items: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    tools = [{"type": "function", "name": "exec_command", "parameters": {}}, {"type": "web_search"}]
    return {"model": "fake-model", "stream": True, "tools": tools, "input": items, **extra}


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_responses_stream_function_call_for_codex(server: ModelServer) -> None:
    items = [
        user_item("<environment_context>\n<cwd>/x</cwd>\n</environment_context>"),
        user_item("Go. RUN: echo hi > f.txt SLOW"),
    ]
    server.script = DefaultScript(slow_delay=0.3)
    started = time.monotonic()
    events = sse(post(server, "/v1/responses", responses_body(items)).text)
    assert time.monotonic() - started >= 0.3
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    for expected in (
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ):
        assert expected in names
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed" and completed["usage"]["total_tokens"] > 0
    message, call = completed["output"]
    assert message["content"][0]["text"] == "FAKE: I will run a shell command."
    assert call["type"] == "function_call" and call["name"] == "exec_command"
    args = json.loads(call["arguments"])
    assert args["cmd"] == "echo hi > f.txt"
    assert args["sandbox_permissions"] == "require_escalated"
    deltas = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert deltas == call["arguments"]

    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}
    events = sse(post(server, "/v1/responses", responses_body([*items, call, output])).text)
    final = events[-1][1]["response"]["output"]
    assert [item["type"] for item in final] == ["message"]
    assert final[0]["content"][0]["text"] == "FAKE: done."
    assert server.requests[1].tool_results[0].call_id == call["call_id"]


def test_responses_title_request_follows_text_format_schema(server: ModelServer) -> None:
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string", "minLength": 1}},
        "required": ["title"],
        "additionalProperties": False,
    }
    body = {
        "model": "m",
        "input": [user_item("Generate a title")],
        "text": {"format": {"type": "json_schema", "name": "t", "schema": schema}},
    }
    response = post(server, "/v1/responses", body).json()
    assert response["object"] == "response" and response["status"] == "completed"
    assert json.loads(response["output"][0]["content"][0]["text"]) == {"title": "Fake session title"}
    assert server.requests[0].json_schema == schema


# --- OpenAI Chat Completions ----------------------------------------------------------------

CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("bash", "edit")]


def test_chat_stream_tool_calls_usage_and_done(server: ModelServer) -> None:
    body = {
        "model": "fake-model",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": CHAT_TOOLS,
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "RUN: ls -la"},
        ],
    }
    events = sse(post(server, "/v1/chat/completions", body).text)
    assert events[-1] == (None, "[DONE]")
    chunks = [data for _, data in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d.get("content") or "" for d in deltas) == "FAKE: I will run a shell command."
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "bash" and calls[0]["id"].startswith("call_")
    args = json.loads("".join(tc["function"]["arguments"] for tc in calls))
    assert args["command"] == "ls -la" and args["description"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"

    body["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": calls[0]["id"],
                    "type": "function",
                    "function": {"name": "bash", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "total 0"},
    ]
    del body["stream_options"]
    events = sse(post(server, "/v1/chat/completions", body).text)
    chunks = [data for _, data in events[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"  # no usage chunk without the option
    assert server.requests[1].tool_results[0].output == "total 0"


def test_chat_non_streaming_response_format_passthrough(server: ModelServer) -> None:
    schema = {
        "type": "object",
        "required": ["verdict", "score", "tags"],
        "properties": {
            "verdict": {"enum": ["approve", "reject"]},
            "score": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}}
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "judge"}],
        "response_format": response_format,
    }
    completion = post(server, "/v1/chat/completions", body).json()
    assert completion["object"] == "chat.completion"
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert json.loads(choice["message"]["content"]) == {
        "verdict": "approve",
        "score": 1,
        "tags": ["fake"],
    }
    recorded = server.requests[0]
    assert recorded.response_format == response_format and recorded.json_schema == schema


def test_chat_non_streaming_scripted_tool_call(server: ModelServer) -> None:
    server.script = lambda request: Reply(tool_calls=[ToolCall("lookup", {"q": request.prompt}, "call_1")])
    body = {"model": "m", "messages": [{"role": "user", "content": "find x"}], "tools": CHAT_TOOLS}
    choice = post(server, "/v1/chat/completions", body).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    call = choice["message"]["tool_calls"][0]
    assert call["id"] == "call_1" and json.loads(call["function"]["arguments"]) == {"q": "find x"}


# --- Gemini API ----------------------------------------------------------------------------

GEMINI_TOOLS = [{"functionDeclarations": [{"name": "run_shell_command"}, {"name": "read_file"}]}]
GEMINI_STREAM = "/v1beta/models/fake-model:streamGenerateContent?alt=sse"


def gemini_body(contents: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"contents": contents, "tools": GEMINI_TOOLS, "systemInstruction": {"parts": [{"text": "sys"}]}, **extra}


def test_gemini_stream_function_call_then_final_text(server: ModelServer) -> None:
    prompt = {"role": "user", "parts": [{"text": "<session_context>\nctx\n</session_context>"}, {"text": "Do it. RUN: touch a.txt"}]}
    response = post(server, GEMINI_STREAM, gemini_body([prompt]))
    assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
    events = sse(response.text)
    assert all(name is None for name, _ in events) and "[DONE]" not in [data for _, data in events]
    parts = [p for _, data in events for p in data["candidates"][0]["content"]["parts"]]
    assert "".join(p.get("text", "") for p in parts) == "FAKE: I will run a shell command."
    (call,) = [p["functionCall"] for p in parts if "functionCall" in p]
    assert call == {"name": "run_shell_command", "args": {"command": "touch a.txt", "description": "Run a shell command (fake model)"}}
    last = events[-1][1]
    assert last["candidates"][0]["finishReason"] == "STOP" and last["usageMetadata"]["totalTokenCount"] > 0
    assert all("finishReason" not in data["candidates"][0] for _, data in events[:-1])
    first = server.requests[0]
    assert (first.api, first.model, first.stream, first.prompt) == ("gemini", "fake-model", True, "Do it. RUN: touch a.txt")
    assert first.tool_names == ("run_shell_command", "read_file") and first.query == "alt=sse"

    result = {"functionResponse": {"id": "c1", "name": "run_shell_command", "response": {"output": "done"}}}
    turns = [prompt, {"role": "model", "parts": [{"functionCall": call}]}, {"role": "user", "parts": [result]}]
    final = sse(post(server, GEMINI_STREAM, gemini_body(turns)).text)
    assert "".join(p.get("text", "") for _, d in final for p in d["candidates"][0]["content"]["parts"]) == "FAKE: done."
    second = server.requests[1]
    assert second.prompt == "Do it. RUN: touch a.txt"
    assert [(r.call_id, r.output, r.is_error) for r in second.tool_results] == [("c1", "done", False)]


def test_gemini_generate_content_schema_count_tokens_and_errors(server: ModelServer) -> None:
    schema = {"type": "OBJECT", "properties": {"title": {"type": "STRING"}, "n": {"type": "INTEGER"}}}
    body = {"contents": [{"role": "user", "parts": [{"text": "name it"}]}], "generationConfig": {"responseSchema": schema}}
    response = post(server, "/v1beta/models/gemini-x:generateContent", body)
    candidate = response.json()["candidates"][0]
    assert json.loads(candidate["content"]["parts"][0]["text"]) == {"title": "Fake session title", "n": 0}
    assert candidate["finishReason"] == "STOP" and server.requests[0].stream is False
    counted = post(server, "/v1beta/models/gemini-x:countTokens", body)
    assert counted.status_code == 200 and counted.json()["totalTokens"] > 0
    failed = post(server, GEMINI_STREAM, gemini_body([{"role": "user", "parts": [{"text": "x ERROR:401"}]}]))
    assert failed.status_code == 401
    assert failed.json()["error"] == {"code": 401, "message": "Fake model server error 401", "status": "UNAUTHENTICATED"}
    assert [r.api for r in server.requests] == ["gemini", "other", "gemini"]


# --- errors, scripting, recording -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "error_type"),
    [
        (
            "/v1/messages",
            anthropic_body([{"role": "user", "content": "x ERROR:401"}]),
            "authentication_error",
        ),
        ("/v1/responses", responses_body([user_item("x ERROR:401")]), "invalid_request_error"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x ERROR:401"}], "tools": CHAT_TOOLS},
            "invalid_request_error",
        ),
    ],
)
def test_error_status_from_prompt(server: ModelServer, path: str, body: dict[str, Any], error_type: str) -> None:
    response = post(server, path, body)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == error_type


def test_script_failure_is_a_500_and_unknown_paths_404(server: ModelServer) -> None:
    def broken(request: ParsedRequest) -> Reply:
        raise KeyError("boom")

    server.script = broken
    response = post(server, "/v1/chat/completions", {"messages": []})
    assert response.status_code == 500 and "boom" in response.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/models").status_code == 404
    assert [r.api for r in server.requests] == ["chat", "other"]


def test_wait_for_times_out_with_what_was_seen(server: ModelServer) -> None:
    post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hello"}]})
    assert server.wait_for(lambda r: r.prompt == "hello", timeout=1).api == "chat"
    with pytest.raises(TimeoutError, match="hello"):
        server.wait_for(lambda r: r.tool_results, timeout=0.2)


async def test_usable_from_trio(server: ModelServer) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            server.url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "tools": CHAT_TOOLS},
        )
    assert response.json()["choices"][0]["message"]["content"] == "FAKE: ok."


def test_example_for_schema_refs_and_nullable() -> None:
    schema = {
        "$defs": {"Item": {"type": "object", "properties": {"n": {"type": ["null", "number"]}}}},
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "ok": {"type": "boolean"},
            "c": {"const": 3},
        },
    }
    assert example_for_schema(schema) == {"items": [{"n": 0}], "ok": False, "c": 3}


def test_public_names_are_pinned() -> None:
    import tests.support.model_server as package

    assert sorted(package.__all__) == [
        "Api", "DefaultScript", "ModelServer", "ParsedRequest", "Reply", "Script", "ToolCall",
        "ToolResult", "example_for_schema", "parse_request", "shell_tool_call",
    ]  # fmt: skip
    assert all(hasattr(package, name) for name in package.__all__)

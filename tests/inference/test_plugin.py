"""The plugin in a real kernel: schema applied, service registered, settings read live."""

from __future__ import annotations

from pathlib import Path

from elowen_builtins.inference import ChatRequest, Message, Relay, add_provider, list_providers
from elowen_sdk.testing import plugin_kernel
from tests.support.model_server import Reply

from .conftest import HeaderServer


async def test_service_over_kernel_settings_and_store(tmp_path: Path, server: HeaderServer) -> None:
    server.script = lambda r: Reply(text="hello through the kernel")
    async with plugin_kernel(tmp_path, enable=["inference"], config={"inference": {"default_model": "ms/tiny-model"}}, watch_settings=False) as kernel:
        relay = kernel.contributions.get("service", "inference").obj.obj
        assert isinstance(relay, Relay) and relay.default_model == "ms/tiny-model"
        assert kernel.store.plugin_schema_version("inference") == 1
        add_provider(kernel.settings, "ms", "openai", server.url + "/v1")
        assert [r["name"] for r in list_providers(kernel.settings)] == ["ms"]
        result = await relay.chat(ChatRequest("", [Message("user", "hi")], purpose="test"))
        assert result.text == "hello through the kernel" and result.provider == "ms"
        rows = kernel.store.query("SELECT provider, model, ok, purpose FROM inference_usage")
        assert rows == [{"provider": "ms", "model": "tiny-model", "ok": 1, "purpose": "test"}]

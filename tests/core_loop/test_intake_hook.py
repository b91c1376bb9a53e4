"""The ``intake`` hookspec: a mutating hook (target ``intake``) that claims a message; the
kernel applies the patch only with ``hook.mutate:intake``."""

from __future__ import annotations

from pathlib import Path

from elowen_sdk import TurnContext
from elowen_sdk.testing import plugin_kernel
from tests.core_loop.claimer import plugin as claimer


async def test_intake_hook_claims_only_what_the_plugin_patches(tmp_path: Path) -> None:
    async with plugin_kernel(tmp_path, enable=["claimer"], modules=[claimer], entry_points=False) as kernel:
        claimed = await kernel.bus.mutate("intake", turn=TurnContext("1", "1", "ping"))
        assert claimed.context == ("claimed: pong",)
        passed = await kernel.bus.mutate("intake", turn=TurnContext("1", "1", "hello"))
        assert passed.context == ()
        kernel.store.flush_audit()
        rows = kernel.store.query("SELECT outcome FROM audit WHERE actor = ? AND action = ?", ("claimer", "hook.mutate:intake"))
        assert [r["outcome"] for r in rows] == ["applied"]

"""Every contribution hook, and the mutating/observational hooks around brain tool calls."""

from __future__ import annotations

import trio.testing

from elowen_sdk import ToolCall

from .test_registry import audit_rows

KINDS = {
    "tool": "all.tool",
    "command": "all",
    "skill": "all.skill",
    "prompt_fragment": "all.fragment",
    "platform": "all-chat",
    "executor": "allexec",
    "loop": "all.loop",
    "route": "GET /plugins/everything/ping",  # a third-party route is named by its mounted path
    "service": "all.service",
}


async def test_every_contribution_kind_is_registered_and_removed(open_kernel):
    async with open_kernel("sample_all") as k:
        await k.registry.enable("everything")
        for kind, name in KINDS.items():
            assert k.contributions.get(kind, name).plugin == "everything", kind
        assert k.contributions.all("route")["GET /plugins/everything/ping"].obj.handler() == {"pong": True}
        described = {(c["kind"], c["name"]) for c in k.registry.describe("everything")["contributions"]}
        assert described == set(KINDS.items())
        await k.registry.disable("everything")
        for kind in KINDS:
            assert dict(k.contributions.all(kind)) == {}, kind


async def test_before_tool_call_merges_arguments_and_on_tool_result_observes(open_kernel):
    async with open_kernel("sample_all") as k:
        from sample_all.plugin import results

        results.clear()
        await k.registry.enable("everything")
        call = ToolCall(tool="files.write", arguments={"path": "a.txt"})
        patched = await k.bus.mutate("before_tool_call", call=call)
        assert patched.arguments == {"path": "a.txt", "dry_run": True}
        assert [r["outcome"] for r in audit_rows(k, "hook.mutate:tool_call")] == ["applied"]
        k.bus.emit("on_tool_result", call=patched, result={"ok": 1}, error=None)
        with trio.fail_after(5):  # a third party's sync hook runs in a worker thread
            while not results:
                await trio.sleep(0.01)
        assert results == [("files.write", {"ok": 1}, None)]


async def test_service_reached_through_context_needs_capability(open_kernel):
    async with open_kernel("sample_all", "sample_async") as k:
        await k.registry.enable("everything")
        await k.registry.enable("asyncobs")
        ctx = k.registry.get("asyncobs").ctx
        import pytest

        from elowen_sdk import CapabilityError

        with pytest.raises(CapabilityError, match="service:all.service"):
            ctx.service("all.service")

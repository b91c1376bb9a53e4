"""The hook bus: observational fail-open dispatch, mutating patches under capabilities,
auto-disable, and draining on disable — with real plugins in a real kernel."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from elowen.core import reconciler as registry_mod
from elowen_sdk import TurnContext

from .test_registry import audit_rows


async def test_hook_without_implementations_is_a_no_op(open_kernel):
    async with open_kernel() as k:
        assert not k.bus.has_impls("on_event")
        k.bus.emit("on_event", event=None)  # nothing to call, nothing raised


async def test_events_reach_sync_and_async_observers(open_kernel):
    async with open_kernel("sample_good", "sample_async") as k:
        from sample_async.plugin import state as async_state
        from sample_good.plugin import state as good_state

        await k.registry.enable("good")
        await k.registry.enable("asyncobs")
        k.events.publish("test.ping", {"n": 1})
        with trio.fail_after(5):  # both third-party: the sync one runs in a worker thread
            while "test.ping" not in good_state["sync_events"] or "test.ping" not in async_state["events"]:
                await trio.sleep(0.01)


async def test_failing_observer_is_skipped_and_audited(open_kernel):
    async with open_kernel("sample_flaky", "sample_good") as k:
        from sample_good.plugin import state as good_state

        await k.registry.enable("flaky")
        await k.registry.enable("good")
        k.events.publish("test.ping", {})
        with trio.fail_after(5):  # third-party sync hooks run in worker threads
            while "test.ping" not in good_state["sync_events"] or not [r for r in audit_rows(k, "hook.on_event") if r["actor"] == "flaky"]:
                await trio.sleep(0.01)
        assert "test.ping" in good_state["sync_events"], "one plugin's failure must not stop others"
        errors = [r for r in audit_rows(k, "hook.on_event") if r["actor"] == "flaky"]
        assert errors and errors[-1]["outcome"] == "error"
        assert "ValueError" in json.loads(errors[-1]["detail"])["message"]


async def test_slow_async_observer_times_out(open_kernel):
    async with open_kernel("sample_async", hook_timeout=0.05) as k:
        await k.registry.configure("asyncobs", {"delay": 10})
        await k.registry.enable("asyncobs")
        k.events.publish("test.slow", {})
        with trio.fail_after(2):
            while not [r for r in audit_rows(k, "hook.on_event") if r["outcome"] == "timeout"]:
                await trio.sleep(0.02)


async def test_auto_disable_after_consecutive_failures(open_kernel):
    async with open_kernel("sample_flaky", max_hook_failures=3) as k:
        await k.registry.enable("flaky")
        for i in range(3):
            k.events.publish("test.ping", {"i": i})
        with trio.fail_after(2):
            while k.registry.get("flaky").state != "error":
                await trio.sleep(0.01)
        assert "3 hook failures within" in k.registry.get("flaky").error
        from sample_flaky.plugin import calls

        n = len(calls)
        k.events.publish("test.ping", {})
        assert len(calls) == n, "an auto-disabled plugin gets no more calls"


async def test_mutating_hook_applies_declared_patches_and_denies_undeclared(open_kernel):
    async with open_kernel("sample_good", "sample_mutator") as k:
        await k.registry.enable("good")
        await k.registry.enable("sneaky")
        turn = TurnContext(conversation_id="c1", user="ada", message="hi")
        out = await k.bus.mutate("turn_context", turn=turn)
        assert out.context == ("good:echo",)
        assert turn.context == (), "the input object is never mutated in place"
        rows = audit_rows(k, "hook.mutate:turn_context")
        outcomes = {(r["actor"], r["outcome"]) for r in rows}
        assert ("good", "applied") in outcomes and ("sneaky", "denied") in outcomes


async def test_mutating_order_is_deterministic(open_kernel):
    async with open_kernel("sample_good", "sample_mutator") as k:
        await k.registry.enable("good")
        await k.registry.enable("sneaky")
        actors = []
        for _ in range(3):
            await k.bus.mutate("turn_context", turn=TurnContext("c", "u", "m"))
            actors.append(tuple(r["actor"] for r in audit_rows(k, "hook.mutate:turn_context")[-2:]))
        assert len(set(actors)) == 1


async def test_disable_drains_in_flight_async_calls(open_kernel, monkeypatch):
    async with open_kernel("sample_async") as k:
        from sample_async.plugin import state

        await k.registry.configure("asyncobs", {"delay": 0.2})
        await k.registry.enable("asyncobs")
        k.events.publish("test.inflight", {})
        await trio.sleep(0.01)
        await k.registry.disable("asyncobs")
        assert "test.inflight" in state["events"], "an in-flight call finishes before the plugin is cancelled"


async def test_disable_cancels_calls_that_do_not_drain(open_kernel, monkeypatch):
    monkeypatch.setattr(registry_mod, "DRAIN_TIMEOUT", 0.1)
    async with open_kernel("sample_async", hook_timeout=30) as k:
        from sample_async.plugin import state

        await k.registry.configure("asyncobs", {"delay": 20})
        await k.registry.enable("asyncobs")
        k.events.publish("test.stuck", {})
        await trio.sleep(0.01)
        with trio.fail_after(2):
            await k.registry.disable("asyncobs")
        assert state["cancelled"] >= 1 and "test.stuck" not in state["events"]


@pytest.mark.parametrize("n", [50])
async def test_toggles_while_emitting_never_fail_an_emit(open_kernel, n):
    async with open_kernel("sample_good", "sample_async") as k:
        await k.registry.enable("asyncobs")
        failures = 0
        stop = trio.Event()

        async def emitter():
            nonlocal failures
            while not stop.is_set():
                try:
                    k.events.publish("test.load", {})
                except Exception:
                    failures += 1
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(emitter)
            for _ in range(n):
                await k.registry.enable("good")
                await k.registry.disable("good")
            stop.set()
        assert failures == 0
        hook_errors = [r for r in audit_rows(k) if r["action"].startswith("hook.") and r["outcome"] != "ok"]
        assert hook_errors == []

"""Typed services and dependency-ordered enabling against a real kernel (real SQLite file, real
config.toml): order, waiting for a provider, cycles, refusal and cascade, conformance,
announcements, typed lookup."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen.core import ordering
from elowen.core.contributions import ServiceConformanceError
from elowen.core.kernel import Kernel
from elowen.core.registry import PluginHasDependents, PluginSource
from elowen_sdk import CapabilityError, ElowenError, Service, ServiceUnavailable, parse_manifest

from . import deps
from .deps import Greeter, GreeterService, HalfGreeter, loads, plugin, unloads
from .test_registry import audit_rows

GREETER = "deptest.greeter"


@pytest.fixture(autouse=True)
def _reset(monkeypatch: pytest.MonkeyPatch) -> None:
    deps.LOG.clear()
    deps.SERVICES.clear()
    deps.registered_contract(monkeypatch)


@asynccontextmanager
async def kernel(tmp_path: Path, *sources: PluginSource, config: str = "") -> AsyncIterator[Kernel]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if config:
        (home / "config.toml").write_text(config)
    async with Kernel.open(home, db_path=tmp_path / "elowen.db", discover_entry_points=False, sources=list(sources)) as k:
        yield k


def state(k: Kernel, name: str) -> str:
    return k.registry.get(name).state


# ---------------------------------------------------------------- order


async def test_consumer_before_its_provider_alphabetically_starts_after_it(tmp_path):
    # "alpha" requires "zeta"'s service; "mid" optionally uses it; config lists alpha first
    sources = [
        plugin("alpha", requires=["zeta.svc"], builtin=True),
        plugin("mid", optional=["zeta.svc"], builtin=True),
        plugin("zeta", provides=["zeta.svc"], builtin=True),
        plugin("beta", builtin=True),
    ]
    config = "[plugins.alpha]\nenabled = true\n\n[plugins.mid]\nenabled = true\n\n[plugins.zeta]\nenabled = true\n"
    async with kernel(tmp_path, *sources, config=config) as k:
        assert {n: state(k, n) for n in ("alpha", "beta", "mid", "zeta")} == dict.fromkeys(("alpha", "beta", "mid", "zeta"), "enabled")
        order = loads()
        assert order.index("zeta") < order.index("alpha") and order.index("zeta") < order.index("mid")
        assert order == ["beta", "zeta", "alpha", "mid"], "providers first, ties by name"
        assert k.registry.enabled_order() == order
    assert unloads() == list(reversed(order)), "shutdown disables consumers before providers"


def test_plan_orders_by_required_then_optional_and_breaks_ties_by_name():
    def m(name: str, required=(), optional=(), provides=()) -> Any:
        return parse_manifest(
            {
                "name": name,
                "version": "1.0.0",
                "api": "1",
                "entry": "x",
                "capabilities": {"required": [f"service:{s}" for s in required], "optional": [f"service:{s}" for s in optional]},
                "contributes": {"services": list(provides)},
            }
        )

    manifests = {
        "agents": m("agents", required=["tmux", "tasks"], optional=["missions"], provides=["agents"]),
        "overseer": m("overseer", required=["agents"], provides=["missions"]),
        "tmux": m("tmux", provides=["tmux"]),
        "brain": m("brain", optional=["agents"]),
    }
    p = ordering.plan(manifests, manifests)
    # agents' optional edge to overseer would close a cycle: dropped, not an error
    assert p.order == ("tmux", "agents", "brain", "overseer") and p.blocked == {}
    p = ordering.plan(manifests, ["agents", "overseer", "brain"], state_of=lambda n: "disabled")
    assert set(p.blocked) == {"agents", "overseer"} and p.order == ("brain",)
    assert p.blocked["agents"] == "waiting for service 'tmux': plugin 'tmux' offers it but is disabled"
    assert "plugin 'agents' offers it but cannot start (waiting for service 'tmux'" in p.blocked["overseer"]


# ---------------------------------------------------------------- waiting for a provider


async def test_missing_provider_is_an_error_with_reason_then_enabled_when_it_appears(tmp_path):
    async with kernel(tmp_path, plugin("alpha", requires=[GREETER]), plugin("zeta", provides=[GREETER])) as k:
        info = await k.registry.enable("alpha")
        assert info["state"] == "error"
        assert info["error"] == "waiting for service 'deptest.greeter': plugin 'zeta' offers it but is disabled"
        assert [p for p in k.registry.list_plugins() if p["name"] == "alpha"][0]["error"] == info["error"]
        assert loads() == []
        assert any(r["target"] == "alpha" and r["outcome"] == "error" for r in audit_rows(k, "plugin.error"))

        assert (await k.registry.enable("zeta"))["state"] == "enabled"
        assert state(k, "alpha") == "enabled", "the waiting consumer is enabled as soon as its provider is"
        assert loads() == ["zeta", "alpha"]
        assert k.registry.get("alpha").error is None


async def test_a_provider_disabled_by_a_config_edit_leaves_its_consumer_waiting(tmp_path):
    async with kernel(tmp_path, plugin("alpha", requires=[GREETER], builtin=True), plugin("zeta", provides=[GREETER], builtin=True)) as k:
        assert state(k, "alpha") == state(k, "zeta") == "enabled"
        k.settings.update(lambda d: d.setdefault("plugins", {}).setdefault("zeta", {}).__setitem__("enabled", False))
        await k.registry.reconcile()
        assert state(k, "zeta") == "disabled"
        rec = k.registry.get("alpha")
        assert rec.state == "error" and rec.waiting and "plugin 'zeta' offers it but is disabled" in rec.error
        assert unloads() == ["alpha", "zeta"], "the consumer stops first"
        k.settings.update(lambda d: d["plugins"]["zeta"].__setitem__("enabled", True))
        await k.registry.reconcile()
        assert state(k, "alpha") == "enabled"


async def test_a_provider_that_fails_to_restart_takes_its_consumer_to_waiting(tmp_path):
    async with kernel(tmp_path, plugin("alpha", requires=[GREETER], builtin=True), plugin("zeta", provides=[GREETER], builtin=True)) as k:
        assert state(k, "alpha") == state(k, "zeta") == "enabled"
        deps.SERVICES["zeta"] = {GREETER: HalfGreeter()}  # (its next enable fails: the config below is invalid)
        k.settings.update(lambda d: d.setdefault("plugins", {}).setdefault("zeta", {}).__setitem__("config", {"restart": 1}))
        await k.registry.reconcile()
        assert state(k, "zeta") == "error" and "invalid config" in k.registry.get("zeta").error
        rec = k.registry.get("alpha")
        assert rec.state == "error" and rec.waiting and "waiting for service 'deptest.greeter'" in rec.error
        assert "alpha" not in k.registry.enabled_order()
        deps.SERVICES["zeta"] = {GREETER: Greeter("zeta")}
        k.settings.update(lambda d: d["plugins"]["zeta"].__setitem__("config", {}))
        await k.registry.reconcile()
        assert state(k, "zeta") == "enabled" and state(k, "alpha") == "enabled", "the consumer comes back with the service"


async def test_no_installed_provider(tmp_path):
    async with kernel(tmp_path, plugin("alpha", requires=["nobody.offers"])) as k:
        info = await k.registry.enable("alpha")
        assert info["state"] == "error" and info["error"] == "requires service 'nobody.offers', which no installed plugin provides"


async def test_host_services_count_as_present(tmp_path):
    async with kernel(tmp_path, plugin("alpha", requires=["tasks", "users"])) as k:
        assert (await k.registry.enable("alpha"))["state"] == "enabled"


async def test_a_cycle_is_an_error_not_a_hang(tmp_path):
    sources = [plugin("a", requires=["b.svc"], provides=["a.svc"]), plugin("b", requires=["a.svc"], provides=["b.svc"]), plugin("c", requires=["a.svc"])]
    async with kernel(tmp_path, *sources) as k:
        with trio.fail_after(5):
            await k.registry.enable("a")
            await k.registry.enable("b")
            await k.registry.enable("c")
        assert state(k, "a") == state(k, "b") == state(k, "c") == "error"
        assert k.registry.get("a").error == "dependency cycle of required services: a → b → a"
        assert k.registry.get("b").error == "dependency cycle of required services: a → b → a"
        assert "plugin 'a' offers it but cannot start (dependency cycle" in k.registry.get("c").error
        assert loads() == []


# ---------------------------------------------------------------- disabling a provider


async def test_disable_refuses_with_dependents_then_cascades_in_reverse_order(tmp_path):
    sources = [
        plugin("alpha", requires=["mid.svc"]),
        plugin("mid", requires=[GREETER], provides=["mid.svc"]),
        plugin("opt", optional=[GREETER]),
        plugin("zeta", provides=[GREETER]),
    ]
    async with kernel(tmp_path, *sources) as k:
        for name in ("zeta", "mid", "alpha", "opt"):
            assert (await k.registry.enable(name))["state"] == "enabled"
        with pytest.raises(PluginHasDependents) as err:
            await k.registry.disable("zeta")
        assert err.value.dependents == ["alpha", "mid"]
        assert isinstance(err.value, ElowenError)
        assert "required by enabled plugins: alpha, mid" in str(err.value) and "--cascade" in str(err.value)
        assert all(state(k, n) == "enabled" for n in ("alpha", "mid", "zeta", "opt")), "a refusal changes nothing"
        assert audit_rows(k, "plugin.disable")[-1]["outcome"] == "denied"

        deps.LOG.clear()
        info = await k.registry.disable("zeta", cascade=True)
        assert info["state"] == "disabled" and info["cascaded"] == ["alpha", "mid"]
        assert unloads() == ["alpha", "mid", "zeta"]
        assert state(k, "opt") == "enabled", "an optional user is not a dependent"
        assert {n: state(k, n) for n in ("alpha", "mid")} == {"alpha": "disabled", "mid": "disabled"}
        assert (await k.registry.disable("opt"))["cascaded"] == []


# ---------------------------------------------------------------- conformance


async def test_a_provider_missing_a_member_is_refused(tmp_path):
    async with kernel(tmp_path, plugin("zeta", provides=[GREETER], services={GREETER: HalfGreeter()})) as k:
        info = await k.registry.enable("zeta")
        assert info["state"] == "error"
        assert "does not satisfy its contract GreeterService" in info["error"] and "missing wave" in info["error"]
        with pytest.raises(LookupError):
            k.contributions.get("service", GREETER)
        rows = audit_rows(k, "register.service")
        assert rows[-1]["outcome"] == "invalid" and "wave" in rows[-1]["detail"]
        assert loads() == [], "on_load is not reached"


async def test_a_host_service_missing_a_member_raises(tmp_path):
    async with kernel(tmp_path) as k:
        with pytest.raises(ServiceConformanceError) as err:
            k.contributions.add("kernel", "service", Service(GREETER, HalfGreeter()), [])
        assert err.value.missing == ["wave"] and isinstance(err.value, ElowenError)
        assert GREETER not in k.contributions.all("service")
        assert k.contributions.add("kernel", "service", Service(GREETER, Greeter("host")), [])


async def test_an_undeclared_service_is_still_refused(tmp_path):
    async with kernel(tmp_path, plugin("zeta", services={GREETER: Greeter("z")})) as k:
        assert (await k.registry.enable("zeta"))["state"] == "enabled"
        assert GREETER not in k.contributions.all("service")
        assert audit_rows(k, "register.service")[-1]["outcome"] == "denied"


# ---------------------------------------------------------------- announcements


async def test_service_is_announced_after_on_load_and_before_it_goes(tmp_path):
    async with kernel(tmp_path, plugin("opt", optional=[GREETER]), plugin("zeta", provides=[GREETER])) as k:
        await k.registry.enable("opt")
        await k.registry.enable("zeta")
        seen = [e for e in deps.LOG if e[0] in ("load", "unload") or (e[0] == "service" and e[1] == "opt")]
        assert seen == [("load", "opt"), ("load", "zeta"), ("service", "opt", GREETER, True, True)]
        deps.LOG.clear()
        await k.registry.disable("zeta")
        seen = [e for e in deps.LOG if e[0] in ("load", "unload") or (e[0] == "service" and e[1] == "opt")]
        assert seen == [("service", "opt", GREETER, False, True), ("unload", "zeta")], "announced while it still works"
        deps.LOG.clear()
        k.contributions.add("kernel", "service", Service("host.thing", object()), [])
        with trio.fail_after(5):  # emitted: a third party's sync hook runs in a worker thread
            while ("service", "opt", "host.thing", True, True) not in deps.LOG:
                await trio.sleep(0.01)


async def test_a_plugin_enabled_later_is_told_of_the_services_already_there(tmp_path):
    async with kernel(tmp_path, plugin("opt", optional=[GREETER]), plugin("zeta", provides=[GREETER])) as k:
        k.contributions.add("kernel", "service", Service("host.thing", object()), [])
        await k.registry.enable("zeta")
        deps.LOG.clear()
        await k.registry.enable("opt")
        seen = [e[2:4] for e in deps.LOG if e[0] == "service" and e[1] == "opt"]
        assert seen == [(GREETER, True), ("host.thing", True)]
        assert not [e for e in deps.LOG if e[0] == "service" and e[1] == "zeta"], "only the newcomer is told"


# ---------------------------------------------------------------- typed lookup


async def test_typed_lookup_by_contract_and_by_name(tmp_path):
    async with kernel(tmp_path, plugin("alpha", requires=[GREETER]), plugin("zeta", provides=[GREETER]), plugin("other")) as k:
        await k.registry.enable("zeta")
        await k.registry.enable("alpha")
        ctx = k.registry.contexts()["alpha"]
        greeter: GreeterService = ctx.service(GreeterService)
        assert greeter.greet("Ada") == "zeta greets Ada"
        assert ctx.service(GREETER) is greeter
        with pytest.raises(TypeError, match="not a service contract"):
            ctx.service(Greeter)
        await k.registry.enable("other")
        with pytest.raises(CapabilityError, match="declare it in elowen-plugin.toml"):
            k.registry.contexts()["other"].service(GreeterService)
    (tmp_path / "fresh").mkdir()
    async with kernel(tmp_path / "fresh", plugin("opt", optional=[GREETER]), plugin("zeta", provides=[GREETER])) as k:
        await k.registry.enable("opt")
        with pytest.raises(CapabilityError, match=f"declares it but it is not granted; grant it: elowen plugin grant opt service:{GREETER}"):
            k.registry.contexts()["opt"].service(GREETER)  # declared optional, not granted yet
        await k.registry.grant("opt", f"service:{GREETER}")
        with pytest.raises(ServiceUnavailable) as err:
            k.registry.contexts()["opt"].service(GreeterService)
        assert isinstance(err.value, LookupError) and isinstance(err.value, ElowenError)
        assert str(err.value) == "service 'deptest.greeter' is not available: plugin 'zeta' offers it but is disabled"

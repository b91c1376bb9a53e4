"""Test plugins for the dependency tests, built from manifests given as dicts: each plugin is
its own object holding the module-level hook implementations below, which record what happens
to each plugin in :data:`LOG` (by ``ctx.name``) and register the services of :data:`SERVICES`."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import tomli_w

from elowen.core.registry import PluginSource
from elowen_sdk import Service, contracts, hookimpl, parse_manifest
from elowen_sdk.contracts import CONTRACT_ATTR

LOG: list[tuple[Any, ...]] = []
"""``("load", plugin)``, ``("unload", plugin)``, ``("service", plugin, name, available,
still_usable)`` in the order they happened."""

SERVICES: dict[str, dict[str, Any]] = {}
"""plugin → {service name → object} registered by its ``register_services``."""


class GreeterService(Protocol):
    """The contract of the test service ``deptest.greeter``: marked as one, but put in the SDK's
    contract registry only while a test runs (:func:`registered_contract`), so that the SDK's
    tests of every registered contract do not see it."""

    def greet(self, who: str) -> str: ...

    def wave(self) -> str: ...


setattr(GreeterService, CONTRACT_ATTR, "deptest.greeter")


def registered_contract(monkeypatch: Any) -> None:
    """Register :class:`GreeterService` for the current test only."""
    monkeypatch.setitem(contracts._CONTRACTS, "deptest.greeter", GreeterService)


class Greeter:
    """Satisfies :class:`GreeterService`."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    def greet(self, who: str) -> str:
        return f"{self.owner} greets {who}"

    def wave(self) -> str:
        return "o/"


class HalfGreeter:
    """Lacks ``wave``."""

    def greet(self, who: str) -> str:
        return who


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    for name, obj in SERVICES.get(ctx.name, {}).items():
        register(Service(name, obj))


@hookimpl
def on_load(ctx: Any) -> None:
    LOG.append(("load", ctx.name))


@hookimpl
def on_unload(ctx: Any) -> None:
    LOG.append(("unload", ctx.name))


@hookimpl
def on_service(ctx: Any, name: str, available: bool) -> None:
    usable = name in ctx.contributions("service")
    LOG.append(("service", ctx.name, name, available, usable))


def plugin(
    name: str,
    *,
    provides: Iterable[str] = (),
    requires: Iterable[str] = (),
    optional: Iterable[str] = (),
    builtin: bool = False,
    services: dict[str, Any] | None = None,
) -> PluginSource:
    """A plugin source named ``name`` offering ``provides`` (registered objects: ``services``,
    default a :class:`Greeter` each) and requiring / optionally using the named services.
    ``builtin``: from the ``elowen`` distribution (enabled by default, all capabilities)."""
    provides = list(provides)
    SERVICES[name] = services if services is not None else {s: Greeter(name) for s in provides}
    raw = {
        "name": name,
        "version": "1.0.0",
        "api": "1",
        "entry": f"deps_{name}",
        "capabilities": {
            "required": [f"service:{s}" for s in requires],
            "optional": [f"service:{s}" for s in optional],
        },
        "contributes": {"services": provides, "hooks": ["on_service"]},
    }
    raw = tomllib.loads(tomli_w.dumps(raw))  # what a file would give
    manifest = parse_manifest(raw, Path(f"/nonexistent/{name}/elowen-plugin.toml"))
    module = ModuleType(f"deps_{name}")  # compared by identity, as pluggy needs
    for fn in (register_services, on_load, on_unload, on_service):
        setattr(module, fn.__name__, fn)
    return PluginSource(
        name=name,
        entry=f"deps_{name}",
        loader=lambda: module,
        distribution="elowen" if builtin else "deps-tests",
        dist_version="1.0.0",
        manifest=manifest,
    )


def loads() -> list[str]:
    return [e[1] for e in LOG if e[0] == "load"]


def unloads() -> list[str]:
    return [e[1] for e in LOG if e[0] == "unload"]

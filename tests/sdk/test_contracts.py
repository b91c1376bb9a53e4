"""Every service contract of the SDK against the real thing: a kernel with every builtin
plugin (and the daemon's host services) is booted once, and each registered service object is
checked against its contract; each contract documents every member it declares."""

from __future__ import annotations

import inspect
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

import elowen_sdk.services  # noqa: F401  (registers every builtin contract)
from elowen_sdk.contracts import contracts, missing_members, protocol_members

FORWARD: dict[str, str] = {}
"""Contracts written ahead of their provider: no builtin plugin offers them yet."""

CONTRACTS = contracts()


async def _boot(tmp: Path) -> dict[str, tuple[str, Any]]:
    from elowen.core.kernel import Kernel
    from elowen.daemon.server import build_state

    home = tmp / "home"
    home.mkdir()
    socket = f"elowen-test-{uuid.uuid4().hex[:8]}"
    (home / "config.toml").write_text(f'[plugins.tmux.config]\nsocket = "{socket}"\n')
    try:
        async with Kernel.open(home, db_path=tmp / "elowen.db", watch_settings=False, wait_plugins=False) as kernel:
            build_state(kernel)  # the daemon's host services: tasks, users
            kernel.registry.start_loading()
            with trio.fail_after(60):
                await kernel.registry.ready.wait()
            bad = {p["name"]: p["error"] for p in kernel.registry.list_plugins() if p["builtin"] and p["state"] != "enabled"}
            assert bad == {}, bad
            return {name: (owned.plugin, owned.obj.obj) for name, owned in kernel.contributions.all("service").items()}
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Any]]:
    """Service name → (owner, object) as registered by a booted kernel with the daemon's state."""
    return trio.run(_boot, tmp_path_factory.mktemp("contracts"))


def test_the_builtin_contracts_are_registered() -> None:
    assert {"tmux", "tasks", "inference", "users", "memory", "notify"} <= set(CONTRACTS)


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_the_registered_service_conforms(name: str, services: dict[str, tuple[str, Any]]) -> None:
    if name in FORWARD:
        assert name not in services or missing_members(services[name][1], CONTRACTS[name]) == []
        pytest.skip(f"no builtin provider yet: {FORWARD[name]}")
    assert name in services, f"no enabled plugin (nor the daemon) offers {name!r}"
    owner, obj = services[name]
    assert missing_members(obj, CONTRACTS[name]) == [], f"{owner}'s {name!r} service"


def test_host_services_are_the_daemons(services: dict[str, tuple[str, Any]]) -> None:
    assert services["tasks"][0] == services["users"][0] == "kernel"
    assert services["tmux"][0] == "tmux" and services["inference"][0] == "inference"


def test_missing_members_catches_a_partial_service() -> None:
    class HalfTmux:
        socket = "x"

        async def capture(self, target: str) -> str:
            return ""

    missing = missing_members(HalfTmux(), CONTRACTS["tmux"])
    assert "capture" not in missing and "socket" not in missing
    assert {"spawn", "kill", "pane_info", "open_stream", "send_text"} <= set(missing)


def _documented(contract: type) -> list[str]:
    """Members of ``contract`` with no docstring (attributes: not in the class docstring)."""
    doc = inspect.getdoc(contract) or ""
    undocumented = []
    for member in sorted(protocol_members(contract)):
        declared = next((vars(base)[member] for base in contract.__mro__ if member in vars(base)), None)
        if isinstance(declared, property):
            declared = declared.fget
        if callable(declared):
            if not (inspect.getdoc(declared) or "").strip():
                undocumented.append(member)
        elif f"{member}:" not in doc and f"{member}," not in doc:
            undocumented.append(member)
    return undocumented


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_every_contract_member_is_documented(name: str) -> None:
    contract = CONTRACTS[name]
    assert (inspect.getdoc(contract) or "").strip(), f"{contract.__qualname__} has no docstring"
    assert (inspect.getmodule(contract).__doc__ or "").strip(), f"{contract.__module__} has no module docstring"
    assert _documented(contract) == []


def test_the_documentation_check_can_fail() -> None:
    from typing import Protocol

    class Quiet(Protocol):
        size: int

        def go(self) -> None: ...

    assert _documented(Quiet) == ["go", "size"]


UNCONTRACTED = {"brain": "used by no other plugin (its routes and commands reach it directly)"}
"""Builtin services with no contract, and why."""


def test_every_builtin_service_has_a_contract(services: dict[str, tuple[str, Any]]) -> None:
    assert sorted(set(services) - set(CONTRACTS) - set(UNCONTRACTED)) == []
    assert sorted(set(UNCONTRACTED) - set(services)) == []  # a stale entry goes

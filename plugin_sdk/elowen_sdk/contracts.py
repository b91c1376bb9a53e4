"""Service contracts: the typed interfaces plugins meet through.

A *contract* is a :class:`typing.Protocol` marked with :func:`service_contract`, which gives it
the service name used in manifests (``service:<name>`` capabilities, ``contributes.services``).
A consumer asks ``ctx.service(TmuxService)`` and gets an object typed as that protocol; a
provider registers an object with ``register(Service(name="tmux", obj=...))`` and the kernel
checks it with :func:`missing_members` before accepting it (a clear error naming what is
missing). A service name with no contract in this registry (a third party's own) is accepted
unchecked.

Example::

    @service_contract("greeter")
    class GreeterService(Protocol):
        def greet(self, name: str) -> str: ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["CONTRACT_ATTR", "contract_for", "contract_name", "contracts", "missing_members", "protocol_members", "service_contract"]

CONTRACT_ATTR = "__elowen_service__"
"""Attribute :func:`service_contract` sets on a protocol class: its service name."""

_T = TypeVar("_T")
_CONTRACTS: dict[str, type] = {}
_SKIP = frozenset({CONTRACT_ATTR, "__doc__", "__module__", "__qualname__", "__annotations__", "__dict__", "__weakref__", "__slots__"})


def service_contract(name: str) -> Callable[[type[_T]], type[_T]]:
    """Mark a protocol class as the contract of service ``name`` and record it.

    Raises:
        ValueError: another contract already claims ``name``.
    """

    def mark(cls: type[_T]) -> type[_T]:
        known = _CONTRACTS.get(name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise ValueError(f"service {name!r} already has a contract: {known.__module__}.{known.__qualname__}")
        setattr(cls, CONTRACT_ATTR, name)
        _CONTRACTS[name] = cls
        return cls

    return mark


def contract_name(contract: type) -> str:
    """The service name of a contract class.

    Raises:
        TypeError: ``contract`` is not marked with :func:`service_contract`.
    """
    name = getattr(contract, CONTRACT_ATTR, None)
    if not isinstance(name, str):
        raise TypeError(f"{contract!r} is not a service contract (mark it with @service_contract)")
    return name


def contract_for(name: str) -> type | None:
    """The contract registered for service ``name``, or ``None`` (a third party's own service)."""
    return _CONTRACTS.get(name)


def contracts() -> dict[str, type]:
    """Every registered contract: service name → protocol class (a copy)."""
    return dict(_CONTRACTS)


def protocol_members(contract: type) -> frozenset[str]:
    """Public members a protocol declares: methods, properties and annotated attributes,
    across its protocol bases (``Protocol`` and ``object`` excluded)."""
    members: set[str] = set()
    for base in contract.__mro__:
        if base in (object, Protocol) or not getattr(base, "_is_protocol", False):
            continue
        for attr in (*vars(base).keys(), *getattr(base, "__annotations__", {}).keys()):
            if attr.startswith("_") or attr in _SKIP:
                continue
            members.add(attr)
    return frozenset(members)


def missing_members(obj: Any, contract: type) -> list[str]:
    """The members of ``contract`` that ``obj`` lacks (sorted); empty when it conforms.

    A declared method must be callable on ``obj``; an attribute or property must be present.
    Signatures are not compared (that is mypy's job at the provider's side).
    """
    missing: list[str] = []
    for attr in sorted(protocol_members(contract)):
        declared = None
        for base in contract.__mro__:
            if attr in vars(base):
                declared = vars(base)[attr]
                break
        try:
            value = getattr(obj, attr)
        except Exception:
            missing.append(attr)
            continue
        if callable(declared) and not isinstance(declared, (property, type)) and not callable(value):
            missing.append(attr)
    return missing

"""The order plugins are enabled in, derived from their manifests.

A plugin *requires* service ``x`` when ``service:x`` is in its ``capabilities.required``, *uses*
it when it is in ``capabilities.optional``, and *provides* it when ``x`` matches an entry of its
``contributes.services``. Host services (:data:`HOST_SERVICES`, offered by the daemon itself)
are always present.

:func:`plan` orders a set of plugins so that providers come before their consumers (a
topological order, ties broken by name); disabling goes in the reverse order. A plugin whose
required service no plugin of the set provides, or that is part of a cycle of required services,
is *blocked* with a one-line reason instead (and so are the plugins that depend on it). An
optional service only orders: its provider goes first when it is in the set, unless that would
close a cycle (then the edge is dropped; the consumer learns of the service from the
``on_service`` announcement).
"""

from __future__ import annotations

import fnmatch
import heapq
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from elowen_sdk import Manifest, parse_capability

__all__ = ["HOST_SERVICES", "Plan", "optional_services", "plan", "provides", "required_services"]

HOST_SERVICES: frozenset[str] = frozenset({"tasks", "users"})
"""Services the daemon registers itself before any plugin loads; a plugin requiring one is
never held back for it."""


def _services(capabilities: Iterable[str]) -> tuple[str, ...]:
    out = []
    for cap in capabilities:
        name, arg = parse_capability(cap)
        if name == "service" and arg:
            out.append(arg)
    return tuple(out)


_PARSED: dict[int, tuple[Manifest, tuple[str, ...], tuple[str, ...]]] = {}
"""id(manifest) → (manifest, required, optional): manifests are immutable and few, and a plan is
made at every reconcile (the manifest is kept so that its id stays its own)."""


def _parsed(manifest: Manifest) -> tuple[Manifest, tuple[str, ...], tuple[str, ...]]:
    entry = _PARSED.get(id(manifest))
    if entry is None or entry[0] is not manifest:
        entry = _PARSED[id(manifest)] = (manifest, _services(manifest.required), _services(manifest.optional))
    return entry


def required_services(manifest: Manifest) -> tuple[str, ...]:
    """The services named by ``service:<x>`` in ``capabilities.required``."""
    return _parsed(manifest)[1]


def optional_services(manifest: Manifest) -> tuple[str, ...]:
    """The services named by ``service:<x>`` in ``capabilities.optional``."""
    return _parsed(manifest)[2]


def provides(manifest: Manifest, service: str) -> bool:
    """Whether ``contributes.services`` declares ``service`` (entries may be shell patterns)."""
    return any(fnmatch.fnmatchcase(service, entry) for entry in manifest.contributes.get("services", ()))


@dataclass(frozen=True, slots=True)
class Plan:
    """The result of :func:`plan`.

    Attributes:
        order: the plugins that can run, providers before consumers (ties by name).
        blocked: plugin → why it cannot run (a missing required service, a cycle, or a blocked
            provider).
        after: plugin → the plugins that must be enabled before it (required and kept
            optional edges).
    """

    order: tuple[str, ...]
    blocked: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, frozenset[str]] = field(default_factory=dict)


def plan(
    manifests: Mapping[str, Manifest],
    candidates: Iterable[str],
    *,
    host: Collection[str] = HOST_SERVICES,
    state_of: Callable[[str], str] | None = None,
) -> Plan:
    """Order ``candidates`` (names of plugins that should run) by their service dependencies.

    Args:
        manifests: name → manifest of every known plugin (non-candidates are named in reasons:
            "plugin 'tmux' offers it but is disabled").
        candidates: the plugins to order (each must be in ``manifests``).
        host: services that are always present.
        state_of: name → a short state for reasons (``"disabled"``, ``"in error"``…); default
            ``"not enabled"``.

    Returns:
        a :class:`Plan`. Never raises for cycles or missing services: those are ``blocked``.
    """
    state = state_of or (lambda _name: "not enabled")
    pool = sorted(set(candidates))
    if not any(optional_services(manifests[n]) or set(required_services(manifests[n])) - set(host) for n in pool):
        return Plan(order=tuple(pool), after={n: frozenset() for n in pool})  # nothing to order
    blocked: dict[str, str] = {}
    deps: dict[str, set[str]] = {}
    while True:
        live = [n for n in pool if n not in blocked]
        deps = {}
        newly = False
        for consumer in live:
            deps[consumer] = set()
            for service in required_services(manifests[consumer]):
                if service in host or provides(manifests[consumer], service):
                    continue
                providers = [p for p in live if p != consumer and provides(manifests[p], service)]
                if not providers:
                    blocked[consumer] = _missing_reason(service, consumer, manifests, blocked, state)
                    newly = True
                    break
                deps[consumer].update(providers)
        if newly:
            continue
        for component in _cycles(live, deps):
            path = " → ".join([*component, component[0]])
            for name in component:
                blocked[name] = f"dependency cycle of required services: {path}"
            newly = True
        if not newly:
            break
    live = [n for n in pool if n not in blocked]
    for consumer in live:
        for service in optional_services(manifests[consumer]):
            for provider in live:
                if provider == consumer or provider in deps[consumer] or not provides(manifests[provider], service):
                    continue
                if not _reaches(provider, consumer, deps):  # would the edge close a cycle?
                    deps[consumer].add(provider)
    return Plan(order=_topological(live, deps), blocked=blocked, after={n: frozenset(d) for n, d in deps.items()})


def _missing_reason(service: str, consumer: str, manifests: Mapping[str, Manifest], blocked: Mapping[str, str], state: Callable[[str], str]) -> str:
    offers = sorted(n for n, m in manifests.items() if n != consumer and provides(m, service))
    if not offers:
        return f"requires service {service!r}, which no installed plugin provides"
    held = []
    for name in offers:
        if name in blocked:
            held.append(f"plugin {name!r} offers it but cannot start ({blocked[name]})")
        else:
            held.append(f"plugin {name!r} offers it but is {state(name)}")
    return f"waiting for service {service!r}: " + "; ".join(held)


def _reaches(start: str, goal: str, deps: Mapping[str, set[str]]) -> bool:
    """Whether ``goal`` is among the transitive dependencies of ``start`` (or is it)."""
    seen, stack = set(), [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(deps.get(node, ()))
    return False


def _cycles(nodes: list[str], deps: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each as a cycle
    path starting at its smallest name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:
        nonlocal counter
        work = [(root, iter(sorted(deps.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(deps.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(_cycle_path(set(component), deps))

    for node in nodes:
        if node not in index:
            visit(node)
    return out


def _cycle_path(component: set[str], deps: Mapping[str, set[str]]) -> list[str]:
    """One cycle through the smallest member of ``component``: follow the smallest dependency
    inside the component until a node repeats."""
    path = [min(component)]
    while True:
        nxt = min(d for d in deps[path[-1]] if d in component)
        if nxt in path:
            return path[path.index(nxt) :]
        path.append(nxt)


def _topological(nodes: list[str], deps: Mapping[str, set[str]]) -> tuple[str, ...]:
    """Kahn's algorithm; among the plugins ready at a step, the smallest name goes first."""
    waiting = {n: len(deps[n]) for n in nodes}
    dependents: dict[str, list[str]] = {n: [] for n in nodes}
    for node in nodes:
        for dep in deps[node]:
            dependents[dep].append(node)
    ready = [n for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for dependent in dependents[node]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    return tuple(order)

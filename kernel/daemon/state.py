"""The daemon's shared state, reachable from request handlers with :func:`current`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from quart import current_app

from elowen_sdk.services.executors import ExecError, ExecutorsService, ExecutorsUnavailable, ExecutorUnavailable, ResolvedExec, UnknownExecutor

from .origin import HostPolicy, policy_for

if TYPE_CHECKING:
    from elowen.core.kernel import Kernel

    from .auth import Access
    from .plugin_routes import PluginRouter
    from .services.projects import ProjectService
    from .services.tasks import TaskService
    from .services.users import UserService

__all__ = ["DaemonState", "current", "executors_of", "explain_unknown"]

EXTENSION = "elowen"


@dataclass(slots=True)
class DaemonState:
    """What every request handler needs.

    Attributes:
        kernel: the running kernel (store, events, registry, settings).
        tasks: the task service.
        users: the user service.
        projects: the project service.
        access: the members' visible-projects cache.
        heartbeat: seconds between SSE heartbeat comments.
        openapi: the OpenAPI document of the daemon's own routes (generated once).
        plugin_router: the plugin route dispatcher (``None`` before the app mounts it).
        stopping: set when the daemon begins to shut down (SSE streams end).
        inflight: requests (and SSE streams) being handled now; shutdown waits for 0.
        host_policy: which ``Host``/``Origin`` values name this daemon (:mod:`elowen.daemon.origin`;
            set by ``serve`` from the bound host and port; by default loopback names, any port).
    """

    kernel: Kernel
    tasks: TaskService
    users: UserService
    projects: ProjectService
    access: Access
    openapi: dict[str, object] = field(default_factory=dict)
    heartbeat: float = 15.0
    stopping: trio.Event = field(default_factory=trio.Event)
    inflight: int = 0
    plugin_router: PluginRouter | None = None
    openapi_cache: tuple[object, dict[str, object]] | None = None
    host_policy: HostPolicy = field(default_factory=lambda: policy_for(None, None, env={}))

    def openapi_document(self) -> dict[str, object]:
        """``/openapi.json``: :attr:`openapi` plus the plugin routes served now; rebuilt only
        when the route contributions change (cached by their snapshot object). Call it while
        handling a request (the plugin table is read through :func:`current`)."""
        if self.plugin_router is None:
            return self.openapi
        from .openapi import with_plugin_routes

        snapshot, table = self.plugin_router.snapshot()
        if self.openapi_cache is None or self.openapi_cache[0] is not snapshot:
            self.openapi_cache = (snapshot, with_plugin_routes(self.openapi, table))
        return self.openapi_cache[1]

    def resolve_exec(self, spec: str | None) -> ResolvedExec:
        """Resolve ``spec`` (``None``: the configured fallback) through the ``executors`` service.

        Raises:
            elowen_sdk.services.executors.ExecError: the spec does not resolve now (its
                ``status`` and ``code`` are the HTTP answer).
        """
        registry = executors_of(self.kernel)
        try:
            return registry.resolve(spec)
        except UnknownExecutor as exc:
            raise explain_unknown(self.kernel, registry.settings().fallback if spec is None else spec, exc) from None

    def check_exec(self, spec: str | None, *, personal: Collection[str] | None) -> ResolvedExec:
        """:meth:`resolve_exec` plus the allow-lists (``[execs] allowed`` and ``personal``).

        Raises:
            elowen_sdk.services.executors.ExecError: as :meth:`resolve_exec`, or
                ``ExecNotAllowed`` (403).
        """
        registry = executors_of(self.kernel)
        try:
            return registry.check(spec, personal=personal, whose="your")
        except UnknownExecutor as exc:
            raise explain_unknown(self.kernel, registry.settings().fallback if spec is None else spec, exc) from None


def explain_unknown(kernel: Kernel, spec: str, exc: UnknownExecutor) -> ExecError:
    """``exc`` as "unavailable" when an installed plugin that is not enabled declares the
    executor ``spec`` names in its manifest (``[contributes] executors``); else ``exc``. The
    registry only knows the providers it has seen; the daemon also knows the manifests."""
    name = spec.strip().removeprefix("exec:").strip().partition(":")[0]
    for rec in kernel.registry.records.values():
        manifest = rec.manifest
        if manifest is None or rec.state == "enabled" or name not in (manifest.contributes.get("executors") or ()):
            continue
        available = ", ".join(exc.available) or "none"
        return ExecutorUnavailable(
            f"exec {spec!r}: executor {name!r} is provided by plugin {rec.name!r}, which is {rec.state} "
            f"(enable it: elowen plugin enable {rec.name}); available now: {available}",
            plugin=rec.name,
            available=exc.available,
        )
    return exc


def executors_of(kernel: Kernel) -> ExecutorsService:
    """The ``executors`` service among the kernel's contributions.

    Raises:
        ExecutorsUnavailable: 409 ``executors_unavailable``, no enabled plugin offers it.
    """
    try:
        return kernel.contributions.get("service", "executors").obj.obj  # type: ignore[no-any-return]
    except LookupError:
        raise ExecutorsUnavailable(
            "executor specs are resolved by the agents plugin, which is not enabled (elowen plugin enable agents)", plugin="agents"
        ) from None


def current() -> DaemonState:
    """The state of the app serving this request."""
    return current_app.extensions[EXTENSION]  # type: ignore[no-any-return]

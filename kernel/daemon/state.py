"""The daemon's shared state, reachable from request handlers with :func:`current`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from quart import current_app

from .execspec import DEFAULT_ALLOWED, DEFAULT_FALLBACK, ResolvedExec, resolve

if TYPE_CHECKING:
    from elowen.core.kernel import Kernel

    from .auth import Access
    from .plugin_routes import PluginRouter
    from .services.projects import ProjectService
    from .services.tasks import TaskService
    from .services.users import UserService

__all__ = ["DaemonState", "current"]

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

    def exec_settings(self) -> tuple[str, Collection[str], Collection[str]]:
        """``(fallback, allowed patterns, plain allow-list)`` from settings ``[execs]``."""
        execs = self.kernel.settings.get("execs", default={}) or {}
        fallback = execs.get("fallback", DEFAULT_FALLBACK)
        allowed = execs.get("allowed", DEFAULT_ALLOWED)
        plain = execs.get("plain", ())
        return fallback, allowed, plain if isinstance(plain, list) else ()

    def resolve_exec(self, spec: str | None) -> ResolvedExec:
        """Resolve ``spec`` with the configured fallback and plain allow-list.

        Raises:
            ExecSpecError: invalid spec (or invalid configured fallback).
        """
        fallback, _, plain = self.exec_settings()
        return resolve(spec, fallback=fallback, allow_plain=plain)


def current() -> DaemonState:
    """The state of the app serving this request."""
    return current_app.extensions[EXTENSION]  # type: ignore[no-any-return]

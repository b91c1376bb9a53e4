"""Plugin glue of ``deriver``: one :class:`Deriver` per enable, offered as service ``deriver``.

On load it watches every running agent session at once (so re-enabling it resumes
classification of live panes without waiting for output); afterwards the agents plugin's events
tell it which sessions to watch: ``agent.spawned`` / ``agent.adopted`` start a watcher,
``agent.exited`` drops it, ``decision.decided`` tells it keys were sent for a prompt, and
``plugin.enabled`` of an executor provider plugin watches the running sessions that waited for
its executors (e.g. after a restart, when the provider is enabled after the deriver).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import trio

from elowen_sdk import Loop, Service, hookimpl
from elowen_sdk.services.agents import AgentsService, DecisionsService
from elowen_sdk.services.executors import ExecutorsService
from elowen_sdk.services.tasks import TasksService
from elowen_sdk.services.tmux import TmuxService

from .supervisor import Pane, Supervisor
from .tracking import Debouncer

__all__ = ["Deriver", "DeriverConfig", "on_event", "on_load", "on_unload", "register_loops", "register_services"]


@dataclass(frozen=True, slots=True)
class DeriverConfig:
    """``[plugins.deriver.config]`` (seconds; schema in ``elowen-plugin.toml``). Defaults 0.1 /
    0.3 s keep 50 busy agents under 15 % of a core with prompt → decision at ~110 ms
    (``bench/deriver.py``)."""

    sweep_interval: float = 5.0
    debounce_quiet: float = 0.1
    debounce_max: float = 0.3
    auto_trust: bool = True

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> DeriverConfig:
        """Take the known keys of ``config`` (the validated plugin config)."""
        cfg = dict(config or {})
        return cls(**{f.name: type(f.default)(cfg[f.name]) for f in fields(cls) if cfg.get(f.name) is not None})


class Deriver:
    """The deriver of one enable (the ``deriver`` service: :meth:`watched`)."""

    def __init__(self, ctx: Any, config: DeriverConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.supervisor = Supervisor(
            tmux=lambda: ctx.service(TmuxService),
            decisions=lambda: ctx.service(DecisionsService),
            publish=ctx.publish,
            auto_trust=config.auto_trust,
        )
        self._nursery: trio.Nursery | None = None
        self._started = False  # run() has watched the sessions running at its start

    # ------------------------------------------------------------------ service

    def watched(self) -> list[str]:
        """Names of the agent sessions this deriver classifies now."""
        return sorted(name for name, pane in self.supervisor.panes.items() if not pane.closed)

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Watch every running agent session, then serve events until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.supervisor.timers.run)
            task_status.started()
            try:
                rows = self.ctx.service(AgentsService).sessions(state="running", limit=100_000)
            except LookupError:
                rows = []
            for pane in list(self.supervisor.panes.values()):  # added by an event before this ran
                self._start(self.supervisor.watch, pane)
            for row in rows:
                self.supervise(row)
            self._started = True
            await trio.sleep_forever()

    def supervise_running(self) -> None:
        """Watch every running agent session not watched yet (e.g. those whose executor
        provider was not enabled when this deriver started)."""
        if not self._started:
            return  # run() is about to watch them all
        try:
            rows = self.ctx.service(AgentsService).sessions(state="running", limit=100_000)
        except LookupError:
            return
        for row in rows:
            self.supervise(row)

    def _provides_executors(self, plugin: object) -> bool:
        return any(owned.plugin == plugin for owned in self.ctx.contributions("executor").values())

    def close(self) -> None:
        """Stop watching (the plugin is being disabled): every pane is dropped."""
        for name in list(self.supervisor.panes):
            self.forget(name)
        self._nursery = None

    def _start(self, fn: Any, *args: Any) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._guarded, fn, *args)

    async def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            await fn(*args)
        except Exception:  # one pane's failure must not stop the others
            self.ctx.log.exception("background task %s failed", getattr(fn, "__qualname__", fn))

    def supervise(self, row: Mapping[str, Any]) -> Pane | None:
        """Watch the running session ``row`` (an ``AgentsService`` session row); ``None`` when
        it is already watched, has no pane yet, or its provider is not enabled."""
        name = str(row["session"])
        if name in self.supervisor.panes or row.get("state") != "running" or not row.get("pane_id"):
            return None
        try:
            provider = self.ctx.service(ExecutorsService).provider(str(row["provider"]))
        except LookupError:
            self.ctx.log.warning("cannot watch %s: executor %s is not enabled", name, row["provider"])
            return None
        try:
            check = getattr(provider, "check", None)
            if callable(check):
                check()  # its patterns load (else every classification would fail)
        except Exception as exc:
            self.ctx.log.warning("cannot watch %s (left unsupervised): %s", name, exc)
            return None
        pane = Pane(
            name=name,
            task_id=int(row["task_id"]),
            project_id=self._project_of(int(row["task_id"])),
            target=str(row["pane_id"]),
            provider=provider,
            debounce=Debouncer(self.config.debounce_quiet, self.config.debounce_max),
            workdir=str(row.get("workdir") or "") or None,
            home=str((row.get("env") or {}).get("HOME") or "") or None,
        )
        try:
            pane.inherited = [d for d in self.ctx.service(DecisionsService).open_for_session(name) if d["kind"] in ("prompt", "question")]
        except LookupError:
            pane.inherited = []
        self.supervisor.panes[name] = pane
        self._start(self.supervisor.watch, pane)
        return pane

    def forget(self, name: str) -> None:
        pane = self.supervisor.panes.pop(name, None)
        if pane is not None:
            pane.closed = True

    def _project_of(self, task_id: int) -> int | None:
        if not self.ctx.has("service:tasks"):
            return None
        try:
            task = self.ctx.service(TasksService).exists(task_id)
        except LookupError:
            return None
        return task.get("project_id") if task else None

    async def sweep(self) -> None:
        """Classify every watched pane; restart lost watchers (the safety net). A pane that
        fails is logged (once per distinct error) and the others are still classified."""
        for pane in list(self.supervisor.panes.values()):
            if not pane.watching and not pane.closed:
                self._start(self.supervisor.watch, pane)
            try:
                await self.supervisor.derive(pane)
            except Exception as exc:  # one pane's failure must not stop the sweep of the others
                if pane.sweep_error != str(exc):
                    self.ctx.log.exception("sweep of %s failed (logged once until it changes)", pane.name)
                pane.sweep_error = str(exc)
            else:
                pane.sweep_error = ""

    async def _derive_later(self, pane: Pane, instance: Any, delay: float) -> None:
        """Derive ``pane`` after ``delay`` seconds unless its answered prompt ``instance`` left
        the screen meanwhile (the usual case: the CLI's output after the keys was derived)."""
        await trio.sleep(delay)
        if not pane.closed and pane.prompts.current is instance:
            await self.supervisor.derive(pane)

    def on_event(self, event: Any) -> None:
        """Follow the agents plugin's events (see the module docstring)."""
        kind = event.type
        if kind in ("agent.spawned", "agent.adopted"):
            try:
                row = self.ctx.service(AgentsService).session(str(event.data.get("session")))
            except LookupError:
                return
            if row is not None:
                self.supervise(row)
        elif kind == "plugin.enabled" and self._provides_executors(event.data.get("name")):
            self.supervise_running()  # sessions that waited for this provider's executors
        elif kind == "agent.exited":
            self.forget(str(event.data.get("session")))
        elif kind == "decision.decided":
            pane = self.supervisor.decided(event.data.get("decision") or {})
            if pane is not None:  # look again once the CLI had time to redraw after the keys
                self._start(self._derive_later, pane, pane.prompts.current, pane.prompts.reappear_grace)


_runtime: dict[str, tuple[Any, Deriver]] = {}  # plugin name → (its context, its deriver)


def deriver_for(ctx: Any) -> Deriver:
    """The deriver of this enable of the plugin (created on first use)."""
    entry = _runtime.get(ctx.name)
    if entry is None or entry[0] is not ctx:
        deriver = Deriver(ctx, DeriverConfig.from_mapping(ctx.config))
        _runtime[ctx.name] = (ctx, deriver)
        return deriver
    return entry[1]


@hookimpl
def register_services(ctx: Any, register: Any) -> None:
    register(Service("deriver", deriver_for(ctx)))


@hookimpl
def register_loops(ctx: Any, register: Any) -> None:
    deriver = deriver_for(ctx)
    register(Loop("deriver.sweep", deriver.config.sweep_interval, deriver.sweep))


@hookimpl
def on_load(ctx: Any) -> None:
    """Watch every live agent session at once, then follow the agents plugin's events."""
    ctx.start_soon(deriver_for(ctx).run, name="deriver.run")


@hookimpl
def on_unload(ctx: Any) -> None:
    """Stop watching; the agents keep running (shown as unsupervised)."""
    entry = _runtime.pop(ctx.name, None)
    if entry is not None:
        entry[1].close()


@hookimpl
def on_event(ctx: Any, event: Any) -> None:
    entry = _runtime.get(ctx.name)
    if entry is not None and entry[0] is ctx:
        entry[1].on_event(event)

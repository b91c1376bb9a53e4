"""``AgentsService``: task → agent in tmux, and everything that keeps it honest.

A small facade over the parts, one module each:

* :mod:`.scheduler` — ready tasks → claimed sessions (one transaction per claim);
* :mod:`.lifecycle` — spawn, re-adoption, liveness, stuck detector, janitor, ``signal`` events;
* :mod:`.decide` — the ``decisions`` service: verdicts applied, keys sent after a fresh check;
* :mod:`.tickets` — single-use live-terminal tickets.

What an agent's screen means (signals, prompt decisions) is the ``deriver`` plugin's job; with
it disabled agents still run, their sessions shown as unsupervised (``supervised: false``).

Events: ``agent.spawned``, ``agent.adopted``, ``agent.exited`` (data ``{"task_id", "session",
"attempt", "provider", "reason"?}``), ``decision.created``, ``decision.decided``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from elowen_sdk.services import TasksService, TmuxService
from elowen_sdk.services.agents import SpawnError
from elowen_sdk.services.executors import ExecError

from .config import AgentsConfig, daemon_url
from .decide import Decisions, Keys
from .decisions import DecisionStore
from .executors import Executors
from .lifecycle import Lifecycle, missing_program
from .scheduler import Scheduler
from .sessions import SessionStore
from .spawn import elowen_bin_dir
from .stateinit import StateInit
from .tickets import Ticket, Tickets

__all__ = ["AgentsService"]

log = logging.getLogger("elowen.plugin.agents")


class AgentsService:
    """The agents plugin's runtime (one per enable). Offered to other plugins as service
    ``agents`` (contract :class:`elowen_sdk.services.agents.AgentsService`); its
    :attr:`decisions` as service ``decisions``, its :attr:`executors` as ``executors``.

    Args:
        ctx: the plugin context (needs ``store``, ``events.publish``, ``service:tmux``,
            ``service:tasks``).
        config: :class:`AgentsConfig`.
        tokens: ``(create(task_id) -> str | None, revoke(task_id) -> int)`` for agent-scoped
            tokens, or ``None`` (agents then get no ``ELOWEN_TOKEN``).
    """

    def __init__(self, ctx: Any, config: AgentsConfig, tokens: tuple[Callable[[int], Any], Callable[[int], int]] | None = None) -> None:
        self.ctx = ctx
        self.config = config
        self.session_store = SessionStore(ctx.store)
        self.decision_store = DecisionStore(ctx.store, ctx.publish, self._project_of)
        self.executors = Executors(ctx)  # service ``executors``: the provider registry and [execs]
        self.keys = Keys(self.tmux)
        data_dir = getattr(ctx, "data_dir", None)
        # one per enable, shared by both spawn paths; run in this plugin's own folder (no shared folder's config above it)
        self.state_init = StateInit(workdir=Path(data_dir) / "cli-init" if data_dir else None)
        self.lifecycle = Lifecycle(
            ctx,
            config,
            self.session_store,
            self.decision_store,
            self.keys,
            provider=self.executors.provider,
            tokens=tokens,
            publish=self._publish,
            start=self._start,
            wake=self.wake,
            state_init=self.state_init,
        )
        self.decisions = Decisions(
            self.decision_store,
            self.session_store,
            self.keys,
            tmux=self.tmux,
            provider=self.executors.provider,
            end_agent=self.lifecycle.end_agent,
            start=self._start,
            tasks=self.tasks,
            after_reject=config.after_reject,
        )
        self.scheduler = Scheduler(ctx, config, self.session_store, self.lifecycle, resolve=self._resolve, provider=self.executors.provider)
        self.tickets = Tickets(config.ticket_ttl)
        self.ready = trio.Event()
        self._tasks_up = trio.Event()
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ services

    def service_announced(self, name: str, available: bool) -> None:
        """``on_service``: the task service appeared (see :meth:`run`)."""
        if name == "tasks" and available:
            self._tasks_up.set()

    def tmux(self) -> TmuxService:
        """The current ``TmuxService`` (raises ``LookupError`` when the tmux plugin is off)."""
        return self.ctx.service(TmuxService)

    def tasks(self) -> TasksService:
        """The daemon's task service (raises ``LookupError`` without a daemon)."""
        return self.ctx.service(TasksService)

    def _project_of(self, task_id: int | None) -> int | None:
        """The task's project; for a deleted task the project kept on its latest session row
        (so its agent's later events stay in that project instead of becoming global)."""
        if task_id is None:
            return None
        try:
            task = self.tasks().exists(task_id)
        except LookupError:
            task = None
        if task:
            return task.get("project_id")
        row = self.ctx.store.query_one(
            "SELECT project_id FROM agent_sessions WHERE task_id = ? AND project_id IS NOT NULL ORDER BY id DESC LIMIT 1", (task_id,)
        )
        return int(row["project_id"]) if row else None

    def _publish(self, type_: str, data: Mapping[str, Any], task_id: int | None) -> None:
        self.ctx.publish(type_, dict(data), self._project_of(task_id))

    # ------------------------------------------------------------------ the contract

    def wake(self) -> None:
        """Run the scheduler now (a task was created or reopened)."""
        self.scheduler.wake()

    def sessions(self, *, task_id: int | None = None, state: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Agent sessions, newest first, each with ``supervised`` (see
        :meth:`elowen_sdk.services.agents.AgentsService.sessions`)."""
        watched = self.watched()
        return [self._supervision(r, watched) for r in self.session_store.list_sessions(task_id=task_id, state=state, limit=limit)]

    def session(self, name: str) -> dict[str, Any] | None:
        """The session row named ``name`` with ``supervised``, or ``None``."""
        row = self.session_store.by_name(name)
        return None if row is None else self._supervision(row, self.watched())

    def daemon_url(self) -> str:
        """The daemon URL agents are given as ``ELOWEN_URL``."""
        return daemon_url(self.config)

    async def spawn_session(self, name: str, exec_spec: str, *, prompt: str, cwd: str, env: Mapping[str, str]) -> dict[str, Any]:
        """See :meth:`elowen_sdk.services.agents.AgentsService.spawn_session`.

        Raises:
            SpawnError: the spec does not resolve or its provider is off, the program is
                missing, or tmux refused.
        """
        try:
            resolved = self.executors.resolve(exec_spec)
            provider = self.executors.provider(resolved.provider)
        except (ExecError, LookupError) as exc:
            raise SpawnError(f"cannot start {exec_spec!r}: {exc}") from None
        if not hasattr(provider, "build_command"):
            raise SpawnError(f"executor {resolved.provider!r} is not a CLI provider")
        penv = provider.env_for(skip_permissions=True)
        try:
            provider.preseed_trust(cwd, env=penv)
        except Exception:
            log.exception("pre-seeding trust for %s failed", cwd)
        argv = provider.build_command(prompt, model=resolved.model or None, skip_permissions=True)
        full = {**penv, **env}
        path = full.get("PATH") or os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        if elowen_bin_dir() not in path.split(os.pathsep):
            path = os.pathsep.join([elowen_bin_dir(), path])
        full["PATH"] = path
        full.setdefault("ELOWEN_URL", self.daemon_url())
        missing = missing_program(argv[0], full)
        if missing:
            raise SpawnError(f"cannot start {resolved.spec}: the program {missing!r} is not installed or not on the PATH")
        await self.state_init.ensure(provider, full)
        try:
            spawned = await self.tmux().spawn(name, argv, cwd=cwd, env=full)
        except Exception as exc:  # TmuxError and LookupError (tmux off) alike
            raise SpawnError(f"cannot start tmux session {name!r}: {exc}") from None
        log.info("spawned %s (%s) outside the scheduler", name, resolved.spec)
        return {"session": name, "pane_id": spawned.pane_id, "pid": spawned.pid, "provider": resolved.provider, "model": resolved.model, "spec": resolved.spec}

    # ------------------------------------------------------------------ supervision

    def watched(self) -> frozenset[str] | None:
        """Sessions the ``deriver`` watches now, or ``None`` when no deriver is enabled. Read
        from the registry's service snapshot, not as a declared capability: the deriver uses
        this plugin's services, so declaring it here would make the two a cycle."""
        owned = self.ctx.contributions("service").get("deriver")
        if owned is None:
            return None
        try:
            return frozenset(owned.obj.obj.watched())
        except Exception:
            log.exception("asking the deriver what it watches failed")
            return None

    @staticmethod
    def _supervision(row: dict[str, Any], watched: frozenset[str] | None) -> dict[str, Any]:
        row["supervised"] = watched is not None and row["session"] in watched
        if row["state"] == "running" and not row["supervised"]:
            row["signal"] = "unsupervised"  # no deriver: its last signal would be stale
        return row

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Wait for the tasks service if it is not there yet, re-adopt live sessions, reconcile
        dead ones, then run the scheduler until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            # tmux is enabled before this plugin (its manifest requires it); the daemon registers
            # ``tasks`` before any plugin loads, a bare kernel (tests) may do so later: on_service
            if "tasks" not in self.ctx.contributions("service"):
                await self._tasks_up.wait()
            await self.lifecycle.adopt()
            self.ready.set()
            await self._guarded(self.lifecycle.stuck)
            await self.scheduler.run(self._guarded)

    def _start(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._guarded, fn, *args)

    @staticmethod
    async def _guarded(fn: Callable[..., Any], *args: Any) -> None:
        try:
            await fn(*args)
        except Exception:  # one pane's failure must not stop the others
            log.exception("background task %s failed", getattr(fn, "__qualname__", fn))

    # ------------------------------------------------------------------ loops

    async def tick(self) -> list[str]:
        """One scheduler tick (see :meth:`.scheduler.Scheduler.tick`)."""
        return await self.scheduler.tick() if self.ready.is_set() else []

    async def liveness(self) -> None:
        if self.ready.is_set():
            await self.lifecycle.liveness()

    async def stuck(self) -> None:
        if self.ready.is_set():
            await self.lifecycle.stuck()

    async def janitor(self) -> None:
        if self.ready.is_set():
            await self.lifecycle.janitor()

    async def decide(self, decision_id: int, action: str, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`.decide.Decisions.decide`."""
        return await self.decisions.decide(decision_id, action, **kwargs)

    def issue_ticket(self, session: str, *, input: bool, user_id: int) -> str:
        """A single-use ticket for the terminal WebSocket, valid ``ticket_ttl`` seconds."""
        return self.tickets.issue(session, input=input, user_id=user_id)

    def redeem_ticket(self, ticket: str, session: str) -> Ticket | None:
        """The ticket's grant if valid for ``session`` (it is consumed either way)."""
        return self.tickets.redeem(ticket, session)

    # ------------------------------------------------------------------ scheduler

    def _resolve(self, task: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(provider, model)`` for a task an agent CLI should run, or ``None`` (it waits;
        see :meth:`.executors.Executors.target`)."""
        return self.executors.target(task)

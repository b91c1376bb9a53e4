"""The scheduler: ready tasks → agent sessions (:class:`Scheduler`).

Each :meth:`Scheduler.tick` claims ready ``open`` tasks whose exec spec resolves to an allowed
CLI provider — ``open → in_progress`` and the ``agent_sessions`` row in ONE transaction, so two
racing ticks cannot both spawn — then hands each claim to the lifecycle to spawn. A tick runs
every ``scheduler_interval`` seconds and at once when woken (a task was created or reopened).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from elowen_sdk.services import MissionsService, TasksService

from .config import AgentsConfig
from .lifecycle import Lifecycle
from .sessions import SessionStore

__all__ = ["Scheduler"]

log = logging.getLogger("elowen.plugin.agents")


class Scheduler:
    """Claims and spawns ready tasks up to ``max_agents``.

    Args:
        ctx: the plugin context (``store``, ``service:tasks``, optional ``service:missions``).
        config: :class:`~.config.AgentsConfig`.
        sessions: the session store.
        lifecycle: spawns the claimed sessions.
        resolve: ``resolve(task)`` → ``(provider, model)`` of a task a CLI should run, or
            ``None`` (it waits).
        provider: ``provider(name)`` → the executor provider (raises ``LookupError``).
    """

    def __init__(
        self,
        ctx: Any,
        config: AgentsConfig,
        sessions: SessionStore,
        lifecycle: Lifecycle,
        *,
        resolve: Callable[[Mapping[str, Any]], tuple[str, str] | None],
        provider: Callable[[str], Any],
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.sessions = sessions
        self.lifecycle = lifecycle
        self._resolve = resolve
        self._provider = provider
        self._lock = trio.Lock()
        self._wake = trio.Event()

    def wake(self) -> None:
        """Run a tick now."""
        self._wake.set()

    async def run(self, guarded: Callable[..., Any]) -> None:
        """Tick every ``scheduler_interval`` seconds or when woken, until cancelled;
        ``guarded(fn)`` runs one tick and logs its failure."""
        while True:
            await guarded(self.tick)
            with trio.move_on_after(self.config.scheduler_interval):
                await self._wake.wait()
            self._wake = trio.Event()

    async def tick(self) -> list[str]:
        """Claim and spawn ready tasks up to ``max_agents``; returns the sessions started."""
        started: list[str] = []
        async with self._lock:
            tasks = self.ctx.service(TasksService)
            missions = self._missions()
            for task in tasks.ready():
                if self.sessions.count_running() >= self.config.max_agents:
                    break
                if missions is not None and not missions.may_dispatch(task):
                    continue  # its mission is at L0, paused, stalled or at max_sessions
                target = self._resolve(task)
                if target is None:
                    continue
                try:
                    provider = self._provider(target[0])
                except LookupError:
                    continue
                row = self._claim(task["id"], target[0], target[1])
                if row is None:
                    continue
                if await self.lifecycle.launch(row, provider):
                    started.append(row["session"])
        return started

    def _missions(self) -> MissionsService | None:
        """The overseer's ``missions`` service, or ``None`` when the overseer is disabled."""
        try:
            return self.ctx.service(MissionsService)
        except LookupError:
            return None

    def _claim(self, task_id: int, provider: str, model: str) -> dict[str, Any] | None:
        """``open → in_progress`` + ``attempts + 1`` + the session row, atomically; ``None``
        if the task is no longer open."""
        tasks = self.ctx.service(TasksService)
        store = self.ctx.store
        with store.transaction():
            try:
                current = tasks.get(task_id)
            except LookupError:  # deleted meanwhile (TaskNotFound)
                return None
            if current["state"] != "open":
                return None
            if self.sessions.list_sessions(task_id=task_id, state="running"):
                return None  # an agent of it still runs (it is being ended): never a second one beside it
            workdir = tasks.project_path(task_id)
            if workdir is None:
                return None
            previous = self.sessions.latest_for_task(task_id)
            attempt = (previous["attempt"] if previous else 0) + 1
            tasks.update(task_id, {"state": "in_progress", "attempts": int(current["attempts"]) + 1})
            return self.sessions.insert(
                task_id=task_id,
                attempt=attempt,
                provider=provider,
                model=model,
                workdir=workdir,
                cli_session_id=None,
                project_id=current.get("project_id"),
            )

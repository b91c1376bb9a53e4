"""The brain worker: tasks whose exec is ``elowen:<provider>/<model>`` run on the brain, in
this process, scoped to the task's project folder.

Flow (as for CLI workers, Elowen issue 4): a ready ``open`` task is claimed (``in_progress``);
a ``task`` conversation is run with the worker prompt (``prompts/brain_worker.md``) and the
file, terminal and ``task.close`` tools (destructive calls refused — nobody is there to
approve them); the worker must close the task with ``task.close``. If it ends without closing,
fails, or stalls (the watchdog: no event for ``worker_stall_timeout`` seconds), the task's
durable ``attempts`` counter goes up and it is reopened with a resume note — or ``blocked``
once ``worker_max_attempts`` is reached. At start-up, ``in_progress`` brain-worker tasks with no
live worker (the daemon restarted) are recovered the same way.

The agents plugin's scheduler must leave ``elowen`` tasks to this worker (provider ``elowen``
is registered as an :class:`~elowen_sdk.Executor` by this plugin).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from elowen_sdk import CapabilityError
from elowen_sdk.services import MissionsService

from .goals import PROMPTS
from .turns import run_turn

if TYPE_CHECKING:
    from .service import BrainService

__all__ = ["BrainWorker", "is_brain_task"]

log = logging.getLogger("elowen.plugin.brain")

PROVIDER = "elowen"


def is_brain_task(task: dict[str, Any]) -> bool:
    """Whether a task record's exec resolves to the brain worker."""
    resolved = task.get("exec_resolved") or {}
    return resolved.get("provider") == PROVIDER


@dataclass(slots=True)
class _Run:
    task_id: int
    conversation_id: int
    scope: trio.CancelScope
    stalled: bool = False


class BrainWorker:
    """Claims and runs brain-worker tasks (one trio task each). Also the executor object of
    ``elowen``: the class attributes below are its part of the exec grammar (specs
    ``elowen:<provider>/<model>``, read by the ``executors`` registry)."""

    display_name = "Elowen brain"
    requires_model = True
    model_pattern = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*/[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,199}$")
    model_hint = "'<provider>/<model>' of an inference provider"

    def __init__(self, service: BrainService) -> None:
        self.service = service
        self.runs: dict[int, _Run] = {}
        self._wake = trio.Event()
        self.finished: list[dict[str, Any]] = []

    @property
    def provider(self) -> str:
        return PROVIDER

    def wake(self) -> None:
        """Scan for ready tasks soon (on ``task.created``)."""
        self._wake.set()

    async def run(self) -> None:
        """The worker loop: recover orphans once, then scan every ``worker_interval`` seconds
        and whenever woken. Runs in the plugin's nursery."""
        self.recover()
        while True:
            self.scan()
            with trio.move_on_after(float(self.service.config.get("worker_interval", 10))):
                await self._wake.wait()
            self._wake = trio.Event()

    def _tasks(self) -> Any | None:
        try:
            return self.service.tasks()
        except LookupError:
            return None

    def _missions(self) -> MissionsService | None:
        """The overseer's missions gate, or ``None`` when the overseer is off."""
        try:
            return self.service.ctx.service(MissionsService)  # type: ignore[no-any-return]
        except (LookupError, CapabilityError):
            return None

    def recover(self) -> int:
        """Requeue ``in_progress`` brain tasks that have no live worker; returns how many."""
        tasks = self._tasks()
        if tasks is None:
            return 0
        count = 0
        for task in tasks.list_tasks(state="in_progress", limit=100_000):
            if is_brain_task(task) and task["id"] not in self.runs:
                self._retry(task, "the daemon restarted while the brain worker was running")
                count += 1
        return count

    def scan(self) -> list[int]:
        """Claim every ready brain task not yet running whose mission (if any) may dispatch now
        (the missions gate the agents scheduler asks too); returns the claimed ids."""
        tasks = self._tasks()
        if tasks is None:
            return []
        claimed = []
        missions = self._missions()
        for task in tasks.ready():
            if not is_brain_task(task) or task["id"] in self.runs:
                continue
            if missions is not None and not missions.may_dispatch(task):
                continue  # its mission is at L0, paused, stalled or at max_sessions (as for CLI agents)
            current = tasks.exists(task["id"])
            if current is None or current["state"] != "open":
                continue
            task = tasks.update(task["id"], {"state": "in_progress"})
            scope = trio.CancelScope()
            conv = self._conversation(task)
            self.runs[task["id"]] = _Run(task["id"], conv["id"], scope)
            self.service.ctx.start_soon(self._work, task, conv, scope, name=f"brain.worker.{task['id']}")
            claimed.append(task["id"])
        return claimed

    def _conversation(self, task: dict[str, Any]) -> dict[str, Any]:
        db = self.service.db
        row = db.store.query_one("SELECT id FROM brain_conversations WHERE task_id = ? ORDER BY id DESC LIMIT 1", (task["id"],))
        if row is not None:
            return db.conversation(row["id"])  # type: ignore[return-value]
        model = (task.get("exec_resolved") or {}).get("model") or ""
        return db.create_conversation(
            user_id=task.get("owner_id"), kind="task", title=task["title"], model=model, project_id=task["project_id"], task_id=task["id"]
        )

    def _prompt(self, task: dict[str, Any]) -> str:
        try:
            template = (PROMPTS / "brain_worker.md").read_text(encoding="utf-8")
        except OSError:
            template = "Do task #{task_id}: {title}\n\n{description}\n\n{resume_note}\nClose it with task.close when done."
        note = f"Note from the previous attempt: {task['resume_note']}" if task.get("resume_note") else ""
        return template.format(task_id=task["id"], title=task["title"], description=task.get("description") or "", resume_note=note)

    async def _work(self, task: dict[str, Any], conv: dict[str, Any], scope: trio.CancelScope) -> None:
        service = self.service
        session = service.session(conv)
        session.running = True
        env = service.env_for(session, task=task)
        error: str | None = None
        try:
            with scope:
                result = await run_turn(service, session, env, self._prompt(task), worker=True, max_rounds=int(service.config.get("worker_max_rounds", 40)))
                error = result.error or (f"breaker: {result.tripped}" if result.tripped else None)
        except Exception as exc:
            log.exception("brain worker on task %s failed", task["id"])
            error = f"{type(exc).__name__}: {exc}"
        finally:
            run = self.runs.pop(task["id"], None)
            session.running = False
            session.emit("brain.done", {"goal": None})
        if env.closed is not None:
            self.finished.append({"task_id": task["id"], "outcome": "closed"})
            return
        if run is not None and run.stalled:
            reason = "the brain worker stalled (watchdog)"
        elif scope.cancelled_caught:
            reason = "the brain worker was stopped"
        else:
            reason = error or "the brain worker ended without closing the task"
        current = self._tasks()
        if current is not None:
            latest = current.exists(task["id"])
            if latest is not None and latest["state"] == "in_progress":
                self._retry(current.get(task["id"]), reason)
        self.finished.append({"task_id": task["id"], "outcome": reason})

    def _retry(self, task: dict[str, Any], reason: str) -> None:
        tasks = self._tasks()
        assert tasks is not None
        attempts = int(task.get("attempts") or 0) + 1
        limit = int(self.service.config.get("worker_max_attempts", 2))
        state = "blocked" if attempts >= limit else "open"
        note = f"attempt {attempts}: {reason}"
        tasks.update(task["id"], {"state": state, "attempts": attempts, "resume_note": note})
        log.info("brain task %s: %s → %s", task["id"], reason, state)
        if state == "open":
            self.wake()

    def watchdog(self) -> list[int]:
        """Stop workers with no activity for ``worker_stall_timeout`` seconds (their tasks are
        retried); returns the task ids stopped. A :class:`~elowen_sdk.Loop` calls it."""
        limit = float(self.service.config.get("worker_stall_timeout", 600))
        now = trio.current_time()
        stopped = []
        for run in list(self.runs.values()):
            session = self.service.sessions.existing(run.conversation_id)
            if session is not None and now - session.last_activity > limit:
                run.stalled = True
                run.scope.cancel()
                stopped.append(run.task_id)
        return stopped

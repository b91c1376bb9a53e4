"""The bounded :class:`ProjectExecutor`: works through an approved project one agent turn at a
time, trusting only the ledger.

Every iteration:

1. if a turn released earlier is still open (the daemon restarted meanwhile), wait for it —
   never release it again;
2. stop when no planned task is left (``complete``, or ``partial`` when some were dropped), when
   ``executor_max_iterations`` turns were counted (``cap``), when the spend since the run started
   passed ``budget_tokens`` (``budget``, with ``executor_stop_on_budget``; re-checked here,
   between tasks), or when no task left has all its dependencies closed (``blocked``);
3. take the most urgent held task whose dependencies are all closed (ledger priority, then plan
   position); drop it durably if its ledger ``attempts`` already reached
   ``executor_max_task_attempts``;
4. in a mission, ask the dispatch decision and wait for its answer (:mod:`.dispatch`: L0 → a
   human, L1–L3 → the overseer's path and threshold); a rejected dispatch drops the task;
5. count the iteration and record the turn (one transaction), then *release* the task
   (``blocked → open``): the brain worker claims an ``elowen:`` task, the agents scheduler a
   CLI task (child tasks are outside the mission: step 4 was their gate);
6. wait (at most ``executor_turn_timeout``) until the turn ended in the ledger: the task is
   closed, cancelled or blocked, or open again with more attempts (the worker's retry, or a
   CLI session that ended without closing);
7. judge progress from the ledger alone: closed WITH evidence is done; closed without evidence
   is reopened and held with a note (done means evidence); a new progress note is progress; else
   the turn counts against ``attempts`` (exactly one per turn) and, at the limit, the task is
   dropped (``cancelled``, label ``core-loop:dropped``). A task that is not done is held again.

Durable state: the iteration count and turns in ``core_loop_runs``/``core_loop_turns``, attempts
in the ledger — a restart resumes the same run with the same counts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from elowen_sdk.services import AgentsService, GitService, InferenceService, MissionsService, TasksService

from .dispatch import DispatchGate
from .projects import HELD_NOTE, Projects
from .receipt import build_receipt
from .settings import Settings

__all__ = ["DROPPED_LABEL", "STOP_REASONS", "ProjectExecutor"]

log = logging.getLogger("elowen.plugin.core-loop")

STOP_REASONS = ("complete", "partial", "blocked", "cap", "budget")
DROPPED_LABEL = "core-loop:dropped"
POLL = 0.1
"""Seconds between ledger reads while a turn runs."""
DECISION_POLL = 0.5
"""Seconds between reads of an open dispatch decision."""


class ProjectExecutor:
    """Runs projects in state ``approved`` (one trio task per project).

    Args:
        ctx: the plugin context.
        projects: the :class:`~.projects.Projects` helper (store, services).
        settings: a callable returning the current :class:`~.settings.Settings`.
        report: ``async report(kind, project, payload)``: a pulse or a receipt to send back
            (``kind`` ``"pulse"`` or ``"receipt"``).
    """

    def __init__(
        self, ctx: Any, projects: Projects, settings: Callable[[], Settings], report: Callable[[str, dict[str, Any], dict[str, Any]], Awaitable[None]]
    ) -> None:
        self.ctx = ctx
        self.projects = projects
        self.db = projects.db
        self.settings = settings
        self.report = report
        self.running: set[int] = set()
        self.gate = DispatchGate(ctx, projects.db)

    # -- services ---------------------------------------------------------------------------

    def _service(self, contract: Any) -> Any | None:
        try:
            return self.ctx.service(contract)
        except LookupError:
            return None

    def spend(self, run: dict[str, Any]) -> int:
        """Tokens (input + output) the relay recorded since the run started (every caller: a
        conservative over-count when other work runs at the same time)."""
        relay: InferenceService | None = self._service(InferenceService)
        if relay is None:
            return 0
        usage = relay.usage_since(run["started_at"])
        return int(usage["input_tokens"]) + int(usage["output_tokens"])

    # -- the ambient tick ---------------------------------------------------------------------

    def tick(self) -> list[int]:
        """Start a run for every approved project without one (a :class:`~elowen_sdk.Loop`
        calls this); returns the project ids started."""
        if not self.settings().executor_enabled or self._service(TasksService) is None:
            return []
        started = []
        for project in self.db.projects(state="approved"):
            if project["id"] not in self.running:
                self.running.add(project["id"])
                self.ctx.start_soon(self.run, project["id"], name=f"core-loop.run.{project['id']}")
                started.append(project["id"])
        return started

    async def run(self, pid: int) -> dict[str, Any] | None:
        """Run (or resume) the project's current run to its stop; returns the ended run row."""
        self.running.add(pid)
        try:
            project = self.db.project(pid)
            if project is None or project["state"] != "approved":
                return None
            run = self.db.current_run(pid) or self.db.start_run(pid)
            while True:
                reason = await self.step(project, run)
                run = self.db.run(run["id"])
                if reason is not None:
                    return await self._end(project, run, reason)
        finally:
            self.running.discard(pid)

    # -- one iteration -----------------------------------------------------------------------

    async def _worktrees(self, task_ids: list[int]) -> dict[int, dict[str, Any]]:
        """{task id: its git worktree record} for the tasks that have one (the git service's;
        empty when the git plugin is off)."""
        git: GitService | None = self._service(GitService)
        if git is None:
            return {}
        out: dict[int, dict[str, Any]] = {}
        for tid in task_ids:
            try:
                rec = await git.worktree(int(tid))
            except Exception:  # a broken git plugin never stops the receipt
                log.warning("core loop: the git service failed on task %s", tid, exc_info=True)
                continue
            if rec is not None:
                out[int(tid)] = rec
        return out

    def _children(self, pid: int, tasks: TasksService) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """``(planned row, ledger record)`` in plan order; a task deleted from the ledger is
        marked dropped and left out."""
        out = []
        for planned in self.db.tasks(pid):
            if tasks.exists(planned["task_id"]) is None:
                if not planned["dropped"]:
                    self.db.drop(planned["task_id"], "deleted from the ledger")
                continue
            out.append((planned, tasks.get(planned["task_id"])))
        return out

    async def step(self, project: dict[str, Any], run: dict[str, Any]) -> str | None:
        """One iteration (see the module docstring); returns a stop reason or ``None``."""
        settings = self.settings()
        tasks: TasksService | None = self._service(TasksService)
        if tasks is None:
            return "blocked"
        turn = self.db.open_turn(run["id"])
        if turn is not None:
            await self._finish_turn(project, run, turn, tasks, settings)
            return None
        children = self._children(project["id"], tasks)
        closed = {t["id"] for _, t in children if t["state"] == "closed"}
        remaining = [(p, t) for p, t in children if t["state"] != "closed" and not p["dropped"]]
        if not remaining:
            return "partial" if any(p["dropped"] for p, _ in children) else "complete"
        if run["iterations"] >= settings.executor_max_iterations:
            return "cap"
        if settings.executor_stop_on_budget and settings.budget_tokens and self.spend(run) >= settings.budget_tokens:
            return "budget"
        ready = [(p, t) for p, t in remaining if t["state"] in ("blocked", "open") and all(d in closed for d in t["deps"])]
        if not ready:
            return "blocked"
        planned, task = min(ready, key=lambda pt: (pt[1]["priority"], pt[0]["position"]))
        if int(task["attempts"]) >= settings.executor_max_task_attempts:
            self._drop(task, planned, f"dropped after {task['attempts']} attempts without progress")
            return None
        level = self._level(project)
        if level is not None:
            verdict = await self._gate(project, planned, task, level)
            if verdict is not None:
                return verdict if verdict in STOP_REASONS else None
        notes = len(tasks.progress_log(task["id"], limit=10_000))
        self.db.begin_turn(run["id"], task["id"], int(task["attempts"]), notes)
        if task["state"] != "open":
            tasks.update(task["id"], {"state": "open"})
        agents: AgentsService | None = self._service(AgentsService)
        if agents is not None:
            agents.wake()
        log.info("core-loop project %s: released task %s (iteration %s)", project["id"], task["id"], run["iterations"] + 1)
        return None

    def _mission(self, project: dict[str, Any]) -> dict[str, Any] | None:
        if not project.get("mission_id"):
            return None
        missions: MissionsService | None = self._service(MissionsService)
        if missions is None:
            return None
        try:
            return missions.get(int(project["mission_id"]))
        except LookupError:
            return None

    def _level(self, project: dict[str, Any]) -> int | None:
        """The autonomy level of the project's mission, or ``None`` (no mission, or the
        overseer is off: nothing gates the dispatch)."""
        mission = self._mission(project)
        return None if mission is None else int(mission["level"])

    async def _gate(self, project: dict[str, Any], planned: dict[str, Any], task: dict[str, Any], level: int) -> str | None:
        """Ask/await the dispatch decision of ``task``; ``None``: release it now, ``"again"``:
        re-plan the iteration (the task was dropped), or a stop reason."""
        while True:
            mission = self._mission(project)
            if mission is not None and mission["state"] != "active":
                log.info("core-loop project %s: mission %s is %s: run stopped", project["id"], mission["id"], mission["state"])
                return "blocked"
            verdict, why = self.gate.check(self.db.project(project["id"]) or project, self.db.task(task["id"]) or planned, task, level)
            if verdict == "go":
                log.info("core-loop project %s: dispatch of task %s: %s", project["id"], task["id"], why)
                return None
            if verdict == "rejected":
                self._drop(task, planned, why)
                return "again"
            if verdict == "unavailable":
                log.warning("core-loop project %s: %s", project["id"], why)
                return "blocked"
            await trio.sleep(DECISION_POLL)  # a human-gated wait: no iteration counted

    async def _wait_turn(self, turn: dict[str, Any], tasks: TasksService, timeout: float) -> bool:
        """Wait until the turn ended in the ledger; ``False`` on timeout."""
        with trio.move_on_after(timeout):
            while True:
                if tasks.exists(turn["task_id"]) is None:
                    return True
                task = tasks.get(turn["task_id"])
                state = task["state"]
                if state in ("closed", "cancelled", "blocked"):
                    return True
                if state == "open" and int(task["attempts"]) > int(turn["attempts_before"]):
                    return True
                await trio.sleep(POLL)
        return False

    async def _finish_turn(self, project: dict[str, Any], run: dict[str, Any], turn: dict[str, Any], tasks: TasksService, settings: Settings) -> None:
        ended = await self._wait_turn(turn, tasks, settings.executor_turn_timeout)
        if tasks.exists(turn["task_id"]) is None:
            self.db.end_turn(turn["id"], "deleted")
            self.db.drop(turn["task_id"], "deleted from the ledger")
            return
        task = tasks.get(turn["task_id"])
        planned = self.db.task(task["id"])
        before = int(turn["attempts_before"])
        counted = max(int(task["attempts"]), before + 1)
        if task["state"] == "closed" and task["evidence"]:
            outcome = "closed"
        elif task["state"] == "closed":
            outcome = "no_evidence"
            with self.ctx.store.transaction():
                tasks.update(task["id"], {"state": "open"})
                tasks.update(
                    task["id"],
                    {
                        "state": "blocked",
                        "attempts": counted,
                        "resume_note": "closed without evidence: reopened by the core loop — close it again with evidence (command output, test results, a diff)",
                    },
                )
            log.warning("core-loop project %s: task %s was closed without evidence, reopened", project["id"], task["id"])
        elif task["state"] == "cancelled":
            outcome = "cancelled"
            if planned is not None and not planned["dropped"]:
                self.db.drop(task["id"], "cancelled outside the core loop")
        elif len(tasks.progress_log(task["id"], limit=10_000)) > int(turn["notes_before"]):
            outcome = "progress" if ended else "timeout"
            if task["state"] == "open":
                tasks.update(task["id"], {"state": "blocked", "attempts": before, "resume_note": HELD_NOTE})
        else:
            outcome = "no_progress" if ended else "timeout"
            if task["state"] in ("open", "blocked"):
                tasks.update(task["id"], {"state": "blocked", "attempts": counted})
        self.db.end_turn(turn["id"], outcome)
        latest = tasks.get(task["id"])
        if planned is not None and latest["state"] == "blocked" and int(latest["attempts"]) >= settings.executor_max_task_attempts:
            self._drop(latest, planned, f"dropped after {latest['attempts']} attempts without progress")
        log.info("core-loop project %s: turn on task %s ended: %s", project["id"], task["id"], outcome)
        await self._pulse(project, run, tasks, settings)

    def _drop(self, task: dict[str, Any], planned: dict[str, Any], reason: str) -> None:
        tasks: TasksService = self.ctx.service(TasksService)
        labels = sorted({*task.get("labels", []), DROPPED_LABEL})
        with self.ctx.store.transaction():
            if task["state"] not in ("cancelled", "closed"):
                tasks.update(task["id"], {"state": "cancelled", "labels": labels, "resume_note": reason})
            self.db.drop(task["id"], reason)
        log.info("task %s %s", task["id"], reason)

    async def _pulse(self, project: dict[str, Any], run: dict[str, Any], tasks: TasksService, settings: Settings) -> None:
        if not settings.pulse_enabled:
            return
        children = self._children(project["id"], tasks)
        done = [t for _, t in children if t["state"] == "closed" and t["evidence"]]
        current = self.db.run(run["id"])
        if len(done) - int(current["pulsed"]) < settings.pulse_every_n_tasks:
            return
        self.db.set_pulsed(run["id"], len(done))
        payload = {
            "project": project["id"],
            "run": run["id"],
            "done": len(done),
            "total": len(children),
            "latest": [{"task_id": t["id"], "title": t["title"]} for t in done[-settings.pulse_every_n_tasks :]],
            "text": f"Project #{project['id']} {project['title']!r}: {len(done)} of {len(children)} tasks done (latest: {done[-1]['title']}).",
        }
        await self.report("pulse", project, payload)

    async def _end(self, project: dict[str, Any], run: dict[str, Any], reason: str) -> dict[str, Any]:
        settings = self.settings()
        tasks: TasksService | None = self._service(TasksService)
        spend = self.spend(run)
        children = self._children(project["id"], tasks) if tasks else []
        receipt = build_receipt(project, run, reason, spend, children, await self._worktrees([t["id"] for _, t in children]))
        with self.ctx.store.transaction():
            self.db.end_run(run["id"], reason, spend, receipt)
            if tasks is not None and project["task_id"] is not None and tasks.exists(project["task_id"]) is not None:
                parent = tasks.get(project["task_id"])
                if reason == "complete" and parent["state"] in ("open", "blocked", "in_progress"):
                    tasks.close(
                        parent["id"], f"all {len(receipt['tasks'])} planned tasks closed with evidence", [line["evidence_ref"] for line in receipt["tasks"]]
                    )
                elif parent["state"] == "blocked":
                    tasks.update(parent["id"], {"resume_note": f"core-loop run {run['id']} stopped: {reason}"})
            self.db.update_project(project["id"], state="done" if reason == "complete" else "stopped")
        self.ctx.publish(
            "core_loop.run_ended", {"project": project["id"], "run": run["id"], "stop_reason": reason, "receipt": receipt}, project_id=project["ledger_project"]
        )
        log.info("core-loop project %s: run %s ended: %s", project["id"], run["id"], reason)
        if settings.receipt_enabled:
            await self.report("receipt", project, receipt)
        return self.db.run(run["id"])

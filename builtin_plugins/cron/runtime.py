"""The cron runtime of one enable of the plugin: the ticker, the runs, delivery.

**Exactly once.** The ticker claims a fire in one transaction (the run row ``claimed`` and the
job's ``next_fire`` moved on, compare-and-set) before anything runs. A run then creates the
owner's conversation, commits ``running`` with its id, and only then starts the turn. After a
crash (``kill -9``) at any point:

* before the claim commits: nothing was written; the fire is still due and is claimed on the
  next start (on time if within ``late_grace``, else by the catch-up policy);
* claimed, not started: the run is started on the next start (it never ran: no repeat);
* running: the run is recorded ``failed`` (``interrupted``) and **not** repeated (a turn that
  may have acted is never run twice).

**Powers.** A run is a turn of the owner's own brain conversation (a fresh one per fire,
through :class:`~elowen_sdk.services.BrainService`), so it has the owner's tool grants,
projects, approvals and YOLO setting and nothing more. An owner deleted or demoted (their role
lower than when the job was made) stops their jobs, and an owner who loses the project a job
works in stops that job: at once on ``user.updated`` / ``user.removed``, and re-checked before
every run.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio

from elowen_sdk import utc_iso
from elowen_sdk.services import BrainService, NotifyService, UsersService

from .planning import plan_fires
from .schedule import Schedule
from .store import CronStore, parse_iso

__all__ = ["ROLE_RANK", "Cron", "CronConfig", "cancelled", "instance_zone", "lost_project"]

log = logging.getLogger("elowen.plugin.cron")

ROLE_RANK = {"member": 1, "admin": 2}
"""Roles by power: a job stops when its owner's rank falls below the rank it was made with."""

PASS_BUDGET = 0.25
"""Seconds one ticker pass may claim for before it yields (a long downtime of many jobs)."""

INTERRUPTED = "interrupted: the daemon stopped while this run was going; not repeated"
RESULT_CHARS = 4000


def cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is trio's cancellation: ``Cancelled``, or a group of nothing else (a
    nursery inside the brain's turn raises one)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(trio.Cancelled)
        return rest is None
    return False


def lost_project(job: dict[str, Any], user: dict[str, Any]) -> str | None:
    """``owner lost project N`` when the job works in project N and its owner (a member) no
    longer has it, else ``None``."""
    project = job.get("project_id")
    if project is None or user.get("role") == "admin" or int(project) in {int(p) for p in user.get("projects") or ()}:
        return None
    return f"owner lost project {project}"


def instance_zone() -> str:
    """The machine's IANA time zone: ``$TZ``, ``/etc/timezone``, the ``/etc/localtime`` link,
    else ``UTC``."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and "/" in tz or tz == "UTC":
        return tz
    try:
        text = Path("/etc/timezone").read_text(encoding="utf-8").strip()
        if text:
            return text
    except OSError:
        pass
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return "UTC"


@dataclass(frozen=True, slots=True)
class CronConfig:
    """The plugin's settings (see its manifest for each one's meaning)."""

    timezone: str = ""
    tick_interval: float = 1.0
    late_grace: float = 60.0
    min_interval: float = 60.0
    max_concurrent_runs: int = 4
    run_timeout: float = 900.0
    max_jobs_per_user: int = 100
    catchup_cap: int = 10

    @classmethod
    def from_mapping(cls, config: Any) -> CronConfig:
        return cls(
            str(config.get("timezone", "")),
            float(config.get("tick_interval", 1.0)),
            float(config.get("late_grace", 60.0)),
            float(config.get("min_interval", 60.0)),
            int(config.get("max_concurrent_runs", 4)),
            float(config.get("run_timeout", 900.0)),
            int(config.get("max_jobs_per_user", 100)),
            int(config.get("catchup_cap", 10)),
        )

    @property
    def zone(self) -> str:
        """The default time zone of new jobs."""
        return self.timezone or instance_zone()


class Cron:
    """The runtime (see the module docstring)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.config = CronConfig.from_mapping(ctx.config)
        self.db = CronStore(ctx.store)
        self.limiter = trio.CapacityLimiter(max(1, self.config.max_concurrent_runs))
        self.scopes: dict[int, trio.CancelScope] = {}  # job id → the scope of its running batch
        self.wake = trio.Event()

    # -- services ----------------------------------------------------------------------------

    def _users(self) -> UsersService | None:
        try:
            users: UsersService = self.ctx.service(UsersService)
            return users
        except LookupError:
            return None

    def owner_problem(self, job: dict[str, Any]) -> str | None:
        """Why the job's owner may no longer run it (``owner deleted``, ``owner demoted …``),
        or ``None``. Without a users service (a bare kernel) the owner is taken as is."""
        users = self._users()
        if users is None:
            return None
        user = users.user(int(job["owner_id"]))
        if user is None:
            return "owner deleted"
        if ROLE_RANK.get(user["role"], 0) < ROLE_RANK.get(job["owner_role"], 0):
            return f"owner demoted ({job['owner_role']} → {user['role']})"
        return lost_project(job, user)

    def user_changed(self, user_id: int, removed: bool) -> None:
        """Stop the user's jobs if they were deleted or demoted (``user.*`` events)."""
        if removed:
            stopped = self.db.stop_owner_jobs(user_id, "owner deleted")
        else:
            stopped = []
            for job_id in [r["id"] for r in self.db.store.query("SELECT id FROM cron_jobs WHERE owner_id = ? AND state IN ('active', 'paused')", (user_id,))]:
                job = self.db.job(job_id)
                problem = self.owner_problem(job) if job else None
                if job and problem:
                    self.db.update_job(job_id, state="stopped", stop_reason=problem)
                    stopped.append(job_id)
        for job_id in stopped:
            scope = self.scopes.get(job_id)
            if scope is not None:
                scope.cancel()
        if stopped:
            log.info("stopped jobs %s of user %d (%s)", stopped, user_id, "deleted" if removed else "demoted")
            self.ctx.store.audit("cron", "cron.stop", f"user:{user_id}", "ok", {"jobs": stopped, "reason": "owner deleted" if removed else "owner demoted"})

    # -- the ticker --------------------------------------------------------------------------

    async def supervise(self) -> None:
        """Run the ticker for the plugin's lifetime; a ticker that raises is logged, restarted
        after a second and the gap recorded (``cron_gaps``, reason ``ticker_restarted``)."""
        restarted = False
        while True:
            try:
                await self.run_ticker(restarted=restarted)
            except Exception:
                log.exception("the cron ticker failed; restarting it")
            restarted = True
            await trio.sleep(1.0)

    async def run_ticker(self, *, restarted: bool) -> None:
        """Recover interrupted runs, record the gap since the last heartbeat, then tick every
        ``tick_interval`` seconds."""
        now = utc_iso()
        prev = self.db.ticker()
        if prev is not None:
            gap = (parse_iso(now) - parse_iso(prev["heartbeat"])).total_seconds()
            if restarted or gap > max(1.0, 3 * self.config.tick_interval):
                self.db.add_gap(prev["heartbeat"], now, "ticker_restarted" if restarted else "daemon_down")
        self.db.ticker_started(now, restarted=restarted)
        if not restarted:
            self.recover()
        while True:
            self.tick(datetime.now(UTC))
            self.db.beat(utc_iso())
            with trio.move_on_after(self.config.tick_interval):
                await self.wake.wait()
            self.wake = trio.Event()

    def recover(self) -> None:
        """After a start: runs left ``running`` are ``failed`` (interrupted, not repeated);
        runs left ``claimed`` never started and are run now."""
        batches: dict[int, list[int]] = {}
        for run in self.db.open_runs():
            if run["status"] == "running":
                self.db.finish_run(run["id"], "failed", error=INTERRUPTED)
                log.warning("run %d of job %d was interrupted by a restart; recorded failed, not repeated", run["id"], run["job_id"])
            else:
                batches.setdefault(run["job_id"], []).append(run["id"])
        for job_id, run_ids in batches.items():
            self.start_batch(job_id, run_ids)

    def tick(self, now: datetime) -> int:
        """Claim every due fire — all jobs of the pass in one transaction (each job in its own
        savepoint), committed before any run starts — then start the runs. A pass holds the
        event loop at most about :data:`PASS_BUDGET` seconds; what is left is claimed by the
        next pass at once. Returns how many runs were started."""
        batches: list[tuple[int, list[int]]] = []
        deadline = time.monotonic() + PASS_BUDGET
        with self.db.store.transaction():
            for job in self.db.due(now, limit=5000):
                if time.monotonic() > deadline:  # the rest in the next pass, right after a checkpoint
                    self.wake.set()
                    break
                try:
                    with self.db.store.transaction():
                        claimed = self._claim(job, now)
                except Exception:
                    log.exception("claiming the fires of job %d failed; retried on the next tick", job["id"])
                    continue
                if claimed:
                    batches.append((job["id"], claimed))
        for job_id, run_ids in batches:
            self.start_batch(job_id, run_ids)
        return sum(len(ids) for _, ids in batches)

    def _claim(self, job: dict[str, Any], now: datetime) -> list[int] | None:
        try:
            schedule = Schedule.from_json(job["spec"])
        except (ValueError, KeyError) as exc:
            self.db.update_job(job["id"], state="stopped", stop_reason=f"unreadable schedule: {exc}")
            return None
        open_run = self.db.open_run(job["id"])
        plan = plan_fires(
            schedule,
            job["next_fire"],
            now,
            paused=job["state"] == "paused",
            policy=job["catchup"],
            cap=int(job["catchup_cap"]),
            grace=self.config.late_grace,
            open_run=open_run["id"] if open_run else None,
        )
        return self.db.claim(job, plan.records, plan.next_fire, done=plan.done)

    # -- runs --------------------------------------------------------------------------------

    def start_batch(self, job_id: int, run_ids: list[int]) -> None:
        """Run the claimed runs of one job one after another, in the plugin's nursery."""
        self.ctx.start_soon(self._batch, job_id, list(run_ids), name=f"cron.job.{job_id}")

    async def _batch(self, job_id: int, run_ids: list[int]) -> None:
        with trio.CancelScope() as scope:
            self.scopes[job_id] = scope
            try:
                for run_id in run_ids:
                    await self.execute(job_id, run_id)
            finally:
                if self.scopes.get(job_id) is scope:
                    del self.scopes[job_id]
        if scope.cancelled_caught:
            for run_id in run_ids:
                self.db.finish_run(run_id, "failed", error="cancelled: the job was stopped or deleted")

    async def execute(self, job_id: int, run_id: int) -> None:
        """One claimed run: check the owner, create the conversation, commit ``running``,
        run the turn (bounded by ``run_timeout``), record the outcome, deliver the result."""
        job = self.db.job(job_id)
        if job is None:
            return
        problem = self.owner_problem(job)
        if problem:
            self.db.update_job(job_id, state="stopped", stop_reason=problem)
            self.db.finish_run(run_id, "failed", error=f"job stopped: {problem}")
            return
        try:
            brain = self.ctx.service(BrainService)
        except LookupError:
            self.db.finish_run(run_id, "failed", error="the brain plugin is not enabled")
            return
        run = self.db.run(run_id)
        if run is None or run["status"] != "claimed":
            return
        async with self.limiter:
            title = f"Scheduled: {job['name'] or job['prompt'][:40]} ({run['scheduled_for'][:16].replace('T', ' ')} UTC)"
            try:
                conv = brain.create_conversation(int(job["owner_id"]), title=title, model=job["model"], project_id=job["project_id"])
            except (LookupError, ValueError) as exc:
                self.db.finish_run(run_id, "failed", error=f"cannot start the conversation: {exc}")
                await self.deliver(job, run_id, "failed", str(exc), None)
                return
            cid = int(conv["id"])
            if not self.db.start_run(run_id, cid):
                return
            self._publish(job, run_id, "running", cid)
            text = f"[Scheduled run {run_id} of cron job {job_id} ({job['schedule']}), due {run['scheduled_for']}]\n{job['prompt']}"
            status, error, result = "failed", None, None
            try:
                with trio.move_on_after(self.config.run_timeout) as timeout:
                    reply = await brain.turn(int(job["owner_id"]), cid, text)
                if timeout.cancelled_caught:
                    error = f"timed out after {self.config.run_timeout:g} s"
                else:
                    status, error, result = _outcome(reply)
            except BaseException as exc:
                if cancelled(exc):
                    self.db.finish_run(run_id, "failed", error="cancelled: the job was stopped, deleted or the plugin disabled")
                    raise
                if not isinstance(exc, Exception):
                    raise
                log.warning("run %d of job %d failed: %s", run_id, job_id, exc)
                error = f"{type(exc).__name__}: {exc}"
            self.db.finish_run(run_id, status, error=error, result=result)
            self._publish(job, run_id, status, cid)
            await self.deliver(job, run_id, status, result if status == "ran" else error or "", cid)

    def _publish(self, job: dict[str, Any], run_id: int, status: str, cid: int | None) -> None:
        self.ctx.publish("cron.run", {"job_id": job["id"], "run_id": run_id, "status": status, "conversation_id": cid, "audience": [job["owner_id"]]})

    async def deliver(self, job: dict[str, Any], run_id: int, status: str, text: str | None, cid: int | None) -> None:
        """Send a finished run's result to its owner: through the ``notify`` service when it
        is offered (``delivered = notify:<id>``), else as a ``cron.result`` event for the
        owner only (``delivered = event``; the result also stays in the run and its
        conversation). ``deliver = none`` sends nothing."""
        if job["deliver"] == "none":
            self.db.set_delivered(run_id, "none")
            return
        name = job["name"] or job["prompt"][:60]
        title = f"{'Scheduled' if status == 'ran' else 'Scheduled run failed'}: {name}"[:120]
        body = (text or "(no reply)")[:1000]
        try:
            notify: NotifyService | None = self.ctx.service(NotifyService)
        except LookupError:
            notify = None
        if notify is not None:
            try:
                with trio.fail_after(10):
                    nid = await notify.notify(int(job["owner_id"]), title, body, url=None, urgency="normal" if status == "ran" else "high", kind="cron")
                self.db.set_delivered(run_id, f"notify:{nid}" if nid else "notify:off")  # 0: the owner switched cron notifications off
                return
            except Exception as exc:  # a failing notify plugin must not lose the result: fall back
                log.warning("notify failed for run %d: %s; sent as an event instead", run_id, exc)
        data = {"job_id": job["id"], "run_id": run_id, "status": status, "conversation_id": cid, "title": title, "body": body, "audience": [job["owner_id"]]}
        self.ctx.publish("cron.result", data)
        self.db.set_delivered(run_id, "event")

    # -- status ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``{"ticker": {heartbeat, age_s, started_at, restarts, alive}, "gaps": [...],
        "next_fire": str | None, "running": [job ids]}``."""
        beat = self.db.ticker()
        age = (datetime.now(UTC) - parse_iso(beat["heartbeat"])).total_seconds() if beat else math.inf
        alive = age <= max(5.0, 3 * self.config.tick_interval)
        ticker = {**(beat or {}), "age_s": round(age, 3) if beat else None, "alive": alive}
        return {"ticker": ticker, "gaps": self.db.gaps(), "next_fire": self.db.next_due(), "running": sorted(self.scopes)}


def _outcome(reply: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """``(status, error, result)`` of a brain turn's return value: the last assistant text is
    the result; a turn whose model call failed (a ``note`` "model call failed") failed."""
    messages = reply.get("messages") or []
    texts = [m.get("content") or "" for m in messages if m.get("role") == "assistant" and (m.get("content") or "").strip()]
    notes = [m.get("content") or "" for m in messages if m.get("role") == "note"]
    if reply.get("command") is not None:
        return "ran", None, str(reply["command"])[:RESULT_CHARS]
    if not texts and notes:
        return "failed", notes[-1][:1000], None
    if not texts:
        return "failed", "the turn produced no reply", None
    return "ran", None, texts[-1][:RESULT_CHARS]

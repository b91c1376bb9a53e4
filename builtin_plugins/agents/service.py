"""``AgentsService``: task → agent in tmux, and everything that keeps it honest.

* **Scheduler** (:meth:`tick`): claims ready ``open`` tasks whose exec resolves to an allowed CLI
  provider (``open → in_progress`` and the ``agent_sessions`` row in ONE transaction, so two
  racing ticks cannot both spawn), then spawns the agent in tmux.
* **Deriver**: :class:`~.supervisor.Supervisor`, event-driven per session, plus :meth:`sweep`.
* **Liveness** (:meth:`liveness`): pane death (``#{pane_dead}``), idle/stalled from pane activity;
  one ``check`` decision per stall episode.
* **Stuck detector** (:meth:`stuck`): an ``in_progress`` task whose agent is gone is reopened with
  a resume note while ``tasks.attempts <= max_relaunches``, then ``blocked``. The counter is the
  task's durable ``attempts`` column (one per launch).
* **Janitor** (:meth:`janitor`): ends sessions of closed/cancelled tasks, revokes their tokens.
* **Re-adoption** (:meth:`start`): live ``elowen-t*`` sessions recorded as running are supervised
  again after a restart (never spawned twice); dead ones go to the stuck detector at once.

Events: ``agent.spawned``, ``agent.adopted``, ``agent.exited`` (data ``{"task_id", "session",
"attempt", "provider", "reason"?}``), ``signal``, ``decision.created``, ``decision.decided``.
"""

from __future__ import annotations

import calendar
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from .config import AgentsConfig, daemon_url, exec_settings, executor_provider
from .decisions import DecisionStore, Gate, Verdict
from .deriver import ActivityTracker, Debouncer
from .screen import Classification
from .sessions import SessionStore
from .spawn import Launch, agent_env, render_prompt
from .supervisor import AnswerError, Pane, Supervisor

__all__ = ["AUTH_HINTS", "AgentsService", "DecideError", "Ticket", "auth_note"]

log = logging.getLogger(__name__)

TYPED_RESUME_PROMPT = frozenset({"opencode", "kilo"})
"""Providers whose CLI ignores the prompt on its command line when resuming (OpenCode 1.18.33
and Kilo 7.7.7 with ``-s <id> --prompt=…`` open the old conversation with an empty composer):
the prompt is typed into the composer once the screen is idle."""

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh"})
"""``pane_current_command`` values meaning the agent fell back to a shell (PITFALLS 13)."""


class DecideError(Exception):
    """A decision cannot be answered as asked. ``status`` is the HTTP status to answer
    (404, 409, 422); ``code`` the error code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Ticket:
    """A single-use terminal ticket: ``session``, ``input`` allowed, ``expires`` (monotonic)."""

    session: str
    input: bool
    expires: float
    user_id: int


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return calendar.timegm(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


class AgentsService:
    """The agents plugin's runtime (one per enable). Offered to other plugins as service
    ``agents``; its :attr:`gate` setter as service ``decisions``.

    Args:
        ctx: the plugin context (needs ``store``, ``events.publish``, ``service:tmux``,
            ``service:tasks``).
        config: :class:`AgentsConfig`.
        tokens: ``(create(task_id) -> str, revoke(task_id) -> int)`` for agent-scoped tokens,
            or ``None`` (agents then get no ``ELOWEN_TOKEN``).
    """

    def __init__(self, ctx: Any, config: AgentsConfig, tokens: tuple[Callable[[int], str], Callable[[int], int]] | None = None) -> None:
        self.ctx = ctx
        self.config = config
        self.sessions = SessionStore(ctx.store)
        self.decisions = DecisionStore(ctx.store, ctx.publish, self._project_of)
        self.supervisor = Supervisor(
            tmux=self.tmux,
            sessions=self.sessions,
            decisions=self.decisions,
            publish=ctx.publish,
            on_prompt=self._on_prompt,
            auto_trust=config.auto_trust,
            on_blocked=self._on_blocked,
        )
        self._tokens = tokens
        self.gate: Gate | None = None
        self.ready = trio.Event()
        self._wake = trio.Event()
        self._tick_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._tickets: dict[str, Ticket] = {}
        self._refused: set[int] = set()
        self._launching: set[str] = set()  # claimed sessions whose spawn is in progress

    # ------------------------------------------------------------------ services

    def tmux(self) -> Any:
        """The current ``TmuxService`` (raises ``LookupError`` when the tmux plugin is off)."""
        return self.ctx.service("tmux")

    def tasks(self) -> Any:
        """The daemon's task service (raises ``LookupError`` without a daemon)."""
        return self.ctx.service("tasks")

    def set_gate(self, gate: Gate | None) -> None:
        """Install (or remove with ``None``) the decision gate (see :mod:`.decisions`)."""
        self.gate = gate

    def _project_of(self, task_id: int | None) -> int | None:
        if task_id is None:
            return None
        row = self.ctx.store.query_one("SELECT project_id FROM tasks WHERE id = ?", (task_id,))
        return row["project_id"] if row else None

    def _publish(self, type_: str, data: Mapping[str, Any], task_id: int | None) -> None:
        self.ctx.publish(type_, dict(data), self._project_of(task_id))

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Wait for the tmux and tasks services, re-adopt live sessions, reconcile dead ones,
        then run the scheduler until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.supervisor.timers.run)
            task_status.started()
            while True:
                try:
                    self.tmux()
                    self.tasks()
                    await self.tmux().list_sessions("elowen-t")
                    break
                except Exception:  # the tmux / daemon plugins are not up yet
                    await trio.sleep(0.05)
            await self.adopt()
            self.ready.set()
            await self._guarded(self.stuck)
            while True:
                await self._guarded(self.tick)
                with trio.move_on_after(self.config.scheduler_interval):
                    await self._wake.wait()
                self._wake = trio.Event()

    def wake(self) -> None:
        """Run the scheduler now (a task was created or reopened)."""
        self._wake.set()

    def _start(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._guarded, fn, *args)

    @staticmethod
    async def _guarded(fn: Callable[..., Any], *args: Any) -> None:
        try:
            await fn(*args)
        except Exception:  # one pane's failure must not stop the others
            log.exception("agents: background task %s failed", getattr(fn, "__qualname__", fn))

    def _pane(self, row: Mapping[str, Any], provider: Any) -> Pane:
        now = trio.current_time()
        pane = Pane(
            name=row["session"],
            task_id=int(row["task_id"]),
            project_id=self._project_of(int(row["task_id"])),
            target=row["pane_id"] or row["session"],
            provider=provider,
            debounce=Debouncer(self.config.debounce_quiet, self.config.debounce_max),
            activity=ActivityTracker(idle_after=self.config.idle_after, stall_after=self.config.stall_after, now=now),
        )
        self.supervisor.panes[pane.name] = pane
        return pane

    def _drop(self, name: str) -> None:
        pane = self.supervisor.panes.pop(name, None)
        if pane is not None:
            pane.closed = True

    async def adopt(self) -> list[str]:
        """Supervise every recorded running session that is alive in tmux; returns their
        names. Sessions missing or dead are left to :meth:`stuck`."""
        adopted = []
        tmux = self.tmux()
        for row in self.sessions.running():
            name = row["session"]
            if name in self.supervisor.panes or not row["pane_id"]:
                continue
            if not await tmux.is_alive(name):
                continue
            try:
                provider = executor_provider(self.ctx, row["provider"])
            except LookupError:
                log.warning("agents: cannot supervise %s: executor %s is not enabled", name, row["provider"])
                continue
            pane = self._pane(row, provider)
            pane.inherited = [d for d in self.decisions.open_for_session(name) if d["kind"] in ("prompt", "question")]
            self._start(self.supervisor.watch, pane)
            adopted.append(name)
            self._publish("agent.adopted", _agent_data(row), row["task_id"])
            log.info("agents: re-adopted %s", name)
        return adopted

    # ------------------------------------------------------------------ scheduler

    def _resolve(self, task: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(provider, model)`` for a task an agent CLI should run, or ``None``."""
        from elowen.daemon.execspec import DEFAULT_ALLOWED, DEFAULT_FALLBACK, ExecNotAllowed, ExecSpecError, check_allowed, resolve

        execs = exec_settings(self.ctx)
        plain = execs.get("plain") or ()
        try:
            resolved = resolve(task.get("exec"), fallback=execs.get("fallback", DEFAULT_FALLBACK), allow_plain=plain)
            check_allowed(resolved, execs.get("allowed", DEFAULT_ALLOWED))
            owner = task.get("owner_id")
            if owner is not None:
                row = self.ctx.store.query_one("SELECT allowed_execs FROM users WHERE id = ?", (owner,))
                if row and row["allowed_execs"] is not None:
                    check_allowed(resolved, json.loads(row["allowed_execs"]), whose="the owner's")
        except (ExecSpecError, ExecNotAllowed) as exc:
            if task["id"] not in self._refused:
                self._refused.add(task["id"])
                log.warning("agents: task %s not started: %s", task["id"], exc)
            return None
        if resolved.provider not in ("claude", "codex", "opencode", "kilo"):
            return None
        return resolved.provider, resolved.model

    async def tick(self) -> list[str]:
        """Claim and spawn ready tasks up to ``max_agents``; returns the sessions started."""
        if not self.ready.is_set():
            return []
        started: list[str] = []
        async with self._tick_lock:
            tasks = self.tasks()
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
                    provider = executor_provider(self.ctx, target[0])
                except LookupError:
                    continue
                row = self._claim(task["id"], target[0], target[1])
                if row is None:
                    continue
                if await self._launch(row, provider):
                    started.append(row["session"])
        return started

    def _missions(self) -> Any:
        """The overseer's ``missions`` service, or ``None`` when the overseer is disabled."""
        try:
            return self.ctx.service("missions")
        except LookupError:
            return None

    def _claim(self, task_id: int, provider: str, model: str) -> dict[str, Any] | None:
        """``open → in_progress`` + ``attempts + 1`` + the session row, atomically; ``None``
        if the task is no longer open."""
        tasks = self.tasks()
        store = self.ctx.store
        with store.transaction():
            current = store.query_one("SELECT state, attempts, project_id FROM tasks WHERE id = ?", (task_id,))
            if current is None or current["state"] != "open":
                return None
            project = store.query_one("SELECT path FROM projects WHERE id = ?", (current["project_id"],))
            if project is None:
                return None
            previous = self.sessions.latest_for_task(task_id)
            attempt = (previous["attempt"] if previous else 0) + 1
            tasks.update(task_id, {"state": "in_progress", "attempts": int(current["attempts"]) + 1})
            return self.sessions.insert(task_id=task_id, attempt=attempt, provider=provider, model=model, workdir=project["path"], cli_session_id=None)

    def build_launch(self, row: Mapping[str, Any], provider: Any, token: str | None) -> Launch:
        """The command line and environment for the session ``row`` (resume when enabled,
        valid and a previous session exists)."""
        task = self.tasks().get(int(row["task_id"]))
        workdir = row["workdir"]
        penv = provider.env_for()
        session_id: str | None = None
        resumed = False
        if row["attempt"] > 1 and provider.settings.resume_sessions:
            prev = self.ctx.store.query_one(
                "SELECT cli_session_id, env, started_at FROM agent_sessions WHERE task_id = ? AND attempt < ? ORDER BY attempt DESC LIMIT 1",
                (row["task_id"], row["attempt"]),
            )
            candidate = prev["cli_session_id"] if prev else None
            if candidate and provider.validate_session_id(candidate, workdir=workdir, env=penv):
                session_id, resumed = candidate, True
            elif candidate:
                log.info("agents: %s: previous session id %r is not resumable; starting fresh", row["session"], candidate)
        if session_id is None and provider.chooses_session_id:
            session_id = provider.new_session_id()
        if self.config.preseed_trust:
            provider.preseed_trust(workdir, env=penv)
        prompt = render_prompt(task, resume_note=task.get("resume_note") if row["attempt"] > 1 else None)
        argv = provider.build_command(prompt, model=row["model"] or None, session_id=session_id, resume=resumed)
        env = agent_env(penv, url=daemon_url(self.config), task_id=int(row["task_id"]), token=token)
        return Launch(argv=argv, env=env, workdir=workdir, cli_session_id=session_id, resumed=resumed, prompt=prompt)

    async def _launch(self, row: dict[str, Any], provider: Any) -> bool:
        self._launching.add(row["session"])
        try:
            return await self._spawn(row, provider)
        finally:
            self._launching.discard(row["session"])

    async def _spawn(self, row: dict[str, Any], provider: Any) -> bool:
        name = row["session"]
        token = None
        try:
            if self._tokens is not None:
                token = self._tokens[0](int(row["task_id"]))
            launch = self.build_launch(row, provider, token)
            missing = _missing_program(launch.argv[0], launch.env)
            if missing:
                await self._cannot_start(row, provider, missing)
                return False
            if launch.cli_session_id:
                self.sessions.set_cli_session_id(name, launch.cli_session_id)
            spawned = await self.tmux().spawn(name, launch.argv, cwd=launch.workdir, env=launch.env)
        except Exception as exc:
            log.exception("agents: spawning %s failed", name)
            # kill=False: a session of that name that we could not create is not ours to end
            await self._gone(self.sessions.by_name(name) or row, f"spawn failed: {exc}", None, kill=False)
            return False
        self.sessions.spawned(name, pane_id=spawned.pane_id, pid=spawned.pid, env=launch.public_env())
        row = self.sessions.by_name(name) or row
        self._publish("agent.spawned", {**_agent_data(row), "resumed": launch.resumed, "argv0": launch.argv[0]}, row["task_id"])
        log.info("agents: task %s: spawned %s (%s%s)", row["task_id"], name, row["provider"], ", resumed" if launch.resumed else "")
        pane = self._pane(row, provider)
        if launch.resumed and row["provider"] in TYPED_RESUME_PROMPT:
            pane.pending_text = launch.prompt
        self._start(self.supervisor.watch, pane)
        return True

    # ------------------------------------------------------------------ sweeps

    async def sweep(self) -> None:
        """Full deriver sweep: classify every supervised pane; restart lost watchers."""
        if not self.ready.is_set():
            return
        for pane in list(self.supervisor.panes.values()):
            if not pane.watching and not pane.closed:
                self._start(self.supervisor.watch, pane)
            await self.supervisor.derive(pane)

    async def liveness(self) -> None:
        """Pane death and stalls: a dead pane is recorded ``exited`` (the stuck detector then
        relaunches or blocks); a stalled pane raises one ``check`` decision per episode."""
        if not self.ready.is_set():
            return
        from elowen_builtins.tmux import SessionNotFoundError

        tmux = self.tmux()
        now = trio.current_time()
        for pane in list(self.supervisor.panes.values()):
            try:
                info = await tmux.pane_info(pane.target)
            except SessionNotFoundError:
                await self._exited(pane.name, "tmux session missing", None)
                continue
            if info.dead or info.current_command in SHELLS:
                reason = f"the CLI exited (status {info.dead_status})" if info.dead else f"the CLI fell back to a shell ({info.current_command})"
                await self._exited(pane.name, reason, info.dead_status)
                continue
            await self.supervisor.derive(pane)
            if pane.activity.new_stall(now) and not self.decisions.open_for_session(pane.name):
                quiet = round(now - pane.activity.last_change)
                self.decisions.create(
                    "check", task_id=pane.task_id, session=pane.name,
                    payload={"reason": "stalled", "quiet_seconds": quiet, "signal": pane.signals.signal, "state": pane.last.state if pane.last else None},
                )

    async def _exited(self, name: str, reason: str, status: int | None) -> None:
        """Record that the agent of session ``name`` is gone. The dead pane is kept (its last
        screen is readable) while the task is ``in_progress``: the stuck detector ends it."""
        row = self.sessions.by_name(name)
        self._drop(name)
        if row is not None and self.sessions.finish(name, "exited", reason=reason, exit_status=status):
            self._capture_cli_session(row)
            self._publish("agent.exited", {**_agent_data(row), "reason": reason}, row["task_id"])
            self._publish("signal", {"task_id": row["task_id"], "session": name, "signal": "exited", "state": "exited"}, row["task_id"])
            task = self.tasks().exists(int(row["task_id"]))
            if task is None or task["state"] != "in_progress":
                await self._end_session(name, int(row["task_id"]), "exited", reason)

    def _capture_cli_session(self, row: Mapping[str, Any]) -> None:
        """Remember the CLI's conversation id (from its own files) for a later resume."""
        if row.get("cli_session_id"):
            return
        try:
            provider = executor_provider(self.ctx, row["provider"])
            found = provider.find_session_id(row["workdir"], env=row.get("env") or None, since=_epoch(row.get("started_at")))
        except Exception:
            log.exception("agents: looking up the session id of %s failed", row["session"])
            return
        if found:
            self.sessions.set_cli_session_id(row["session"], found)

    async def stuck(self) -> None:
        """Reopen (or block) ``in_progress`` tasks whose agent is gone."""
        if not self.ready.is_set():
            return
        from elowen_builtins.tmux import SessionNotFoundError

        tmux = self.tmux()
        for task in self.tasks().list(state="in_progress", limit=100_000):
            row = self.sessions.latest_for_task(task["id"])
            if row is None or row["session"] in self._launching:
                continue  # not started by this plugin, or being started right now
            reason, status = None, row["exit_status"]
            if row["state"] != "running":
                reason = row["end_reason"] or row["state"]
            elif row["pane_id"]:
                try:
                    info = await tmux.pane_info(row["pane_id"])
                    if info.dead:
                        reason, status = f"the CLI exited (status {info.dead_status})", info.dead_status
                    elif info.current_command in SHELLS:
                        reason = f"the CLI fell back to a shell ({info.current_command})"
                except SessionNotFoundError:
                    reason = "tmux session missing"
            elif row["session"] not in self.supervisor.panes:
                reason = "never started"
            if reason is not None:
                await self._gone(row, reason, status)

    async def _cannot_start(self, row: Mapping[str, Any], provider: Any, program: str) -> None:
        """The CLI's program is not installed: retrying cannot help, so the task is blocked at
        once with a note that says what to install or configure."""
        name, task_id = row["session"], int(row["task_id"])
        plugin = {"claude": "claude-code"}.get(str(row["provider"]), str(row["provider"]))
        note = (
            f"Cannot start {row['provider']}: the program {program!r} is not installed or not on the PATH. "
            f"Install it, or set its path with `elowen plugin config {plugin} binary=/path/to/{program.rsplit('/', 1)[-1]}`, "
            "then reopen the task."
        )
        await self._end_session(name, task_id, "exited", note, kill=False)
        self.tasks().update(task_id, {"state": "blocked", "resume_note": note})
        log.warning("agents: task %s blocked: %s", task_id, note)

    def _on_blocked(self, pane: Pane, c: Classification) -> None:
        self._start(self._not_authenticated, pane.name)

    async def _not_authenticated(self, name: str) -> None:
        """The CLI of session ``name`` shows it is not logged in / has no credentials
        (screen state ``auth_required``): no relaunch can fix that, so — like a missing
        program — the task is blocked at once with a note saying how to log in, and the
        session is ended. Events: ``agent.exited`` (reason = the note) and the task service's
        ``task.updated``; the ``signal`` event (``error``, state ``auth_required``) was
        published by the supervisor."""
        row = self.sessions.by_name(name)
        if row is None or row["state"] != "running":
            return
        task_id = int(row["task_id"])
        note = auth_note(str(row["provider"]))
        tasks = self.tasks()
        task = tasks.exists(task_id)
        # block first: with the task no longer in_progress the stuck detector leaves it alone
        # while the session is being ended
        if task is not None and task["state"] == "in_progress":
            tasks.update(task_id, {"state": "blocked", "resume_note": note})
        await self._end_session(name, task_id, "exited", note)
        self._publish("agent.exited", {**_agent_data(row), "reason": note}, task_id)
        log.warning("agents: task %s blocked: %s", task_id, note)

    async def _gone(self, row: Mapping[str, Any], reason: str, status: int | None, *, kill: bool = True) -> None:
        """The agent of ``row`` is gone: end its session, then reopen or block the task."""
        name, task_id = row["session"], int(row["task_id"])
        await self._exited(name, reason, status)
        await self._end_session(name, task_id, "exited", reason, kill=kill)
        tasks = self.tasks()
        task = tasks.exists(task_id)
        if task is None or task["state"] != "in_progress":
            return
        task = tasks.get(task_id)
        attempts = int(task["attempts"])
        base = f"Attempt {row['attempt']} (tmux session {name}) ended: {reason}."
        if attempts <= self.config.max_relaunches:
            note = f"{base} Relaunch {attempts} of {self.config.max_relaunches}: check what is already done, then continue."
            tasks.update(task_id, {"state": "open", "resume_note": note})
            log.info("agents: task %s reopened: %s", task_id, reason)
            self.wake()
        else:
            note = f"{base} Blocked after {self.config.max_relaunches} relaunches; a human must look at it."
            tasks.update(task_id, {"state": "blocked", "resume_note": note})
            log.warning("agents: task %s blocked: %s", task_id, reason)

    async def _end_session(self, name: str, task_id: int, state: str, reason: str, *, kill: bool = True) -> None:
        self._drop(name)
        self.sessions.finish(name, state, reason=reason)
        for d in self.decisions.open_for_session(name):
            self.decisions.settle(d["id"], "expired", decided_by="elowen:agents", rationale=f"the agent session ended: {reason}")
        if kill:
            try:
                await self.tmux().kill(name)
            except Exception:
                log.exception("agents: killing %s failed", name)
        if self._tokens is not None:
            self._tokens[1](task_id)

    async def janitor(self) -> None:
        """End the sessions of closed, cancelled or deleted tasks and revoke their tokens."""
        if not self.ready.is_set():
            return
        tasks = self.tasks()
        for row in self.sessions.running():
            task = tasks.exists(int(row["task_id"]))
            if task is not None and task["state"] not in ("closed", "cancelled"):
                continue
            state = task["state"] if task else "deleted"
            self._capture_cli_session(row)
            await self._end_session(row["session"], int(row["task_id"]), "ended", f"task {state}")
            self._publish("agent.exited", {**_agent_data(row), "reason": f"task {state}"}, row["task_id"])

    # ------------------------------------------------------------------ decisions

    def _on_prompt(self, pane: Pane, decision: dict[str, Any]) -> None:
        if self.gate is not None:
            self._start(self._ask_gate, decision)

    async def _ask_gate(self, decision: dict[str, Any]) -> None:
        gate = self.gate
        if gate is None:
            return
        verdict: Verdict | None = None
        with trio.move_on_after(self.config.gate_timeout):
            try:
                verdict = await gate(decision)
            except Exception:
                log.exception("agents: the decision gate failed on decision %s; left pending", decision["id"])
                return
        if verdict is None:
            return
        try:
            await self.decide(
                decision["id"], verdict.action, choice=verdict.choice, text=verdict.text,
                rationale=verdict.rationale, decided_by=verdict.decided_by, confidence=verdict.confidence,
            )
        except DecideError as exc:
            log.warning("agents: gate verdict on decision %s not applied: %s", decision["id"], exc.message)

    async def decide(
        self,
        decision_id: int,
        action: str,
        *,
        choice: int | None = None,
        text: str | None = None,
        rationale: str | None = None,
        decided_by: str = "user",
        confidence: float | None = None,
    ) -> dict[str, Any]:
        """Answer decision ``decision_id``; returns the settled decision.

        ``prompt``/``question``: ``approve``, ``reject`` or ``choice`` send the CLI's keys after
        checking the same prompt instance is on screen. ``check``: ``approve`` = keep waiting,
        ``reject`` = end the agent (the stuck detector relaunches or blocks the task),
        ``answer`` = type ``text`` into the agent's composer (only when it is idle).
        ``escalate`` marks any open decision ``escalated`` (still answerable).

        Raises:
            DecideError: 404 unknown, 409 already decided / prompt gone / agent busy,
                422 an action or choice that does not fit.
        """
        decision = self.decisions.get(decision_id)
        if decision is None:
            raise DecideError(404, "not_found", f"decision {decision_id} not found")
        if decision["status"] not in ("pending", "escalated"):
            raise DecideError(409, "already_decided", f"decision {decision_id} is {decision['status']}")
        settle = {"decided_by": decided_by, "rationale": rationale, "confidence": confidence}
        if action == "escalate":
            return self._settled(self.decisions.settle(decision_id, "escalated", answer={"action": "escalate"}, **settle), decision_id)
        kind = decision["kind"]
        if kind in ("prompt", "question"):
            if action not in ("approve", "reject", "choice"):
                raise DecideError(422, "invalid_action", f"a {kind} decision takes approve, reject or choice")
            if action == "choice" and choice is None:
                raise DecideError(422, "invalid_action", "choice needs the option number")
            try:
                answer = await self.supervisor.answer(decision, action, choice=choice)
            except AnswerError as exc:
                status = 422 if exc.code in ("bad_choice", "not_answerable") else 409
                raise DecideError(status, exc.code, exc.message) from None
            status_name = {"approve": "approved", "reject": "rejected", "choice": "answered"}[action]
            return self._settled(self.decisions.settle(decision_id, status_name, answer=answer, **settle), decision_id)
        if kind == "check":
            return await self._decide_check(decision, action, text, settle)
        if action == "answer":
            return self._settled(self.decisions.settle(decision_id, "answered", answer={"action": "answer", "text": text}, **settle), decision_id)
        status_name = {"approve": "approved", "reject": "rejected"}.get(action)
        if status_name is None:
            raise DecideError(422, "invalid_action", f"a {kind} decision takes approve, reject or answer")
        return self._settled(self.decisions.settle(decision_id, status_name, answer={"action": action}, **settle), decision_id)

    async def _decide_check(self, decision: Mapping[str, Any], action: str, text: str | None, settle: dict[str, Any]) -> dict[str, Any]:
        did = decision["id"]
        name = decision.get("session")
        if action == "approve":
            return self._settled(self.decisions.settle(did, "approved", answer={"action": "approve"}, **settle), did)
        if action == "reject":
            row = self.sessions.by_name(name) if name else None
            if row is not None and row["state"] == "running":
                await self.tmux().kill(name)
            return self._settled(self.decisions.settle(did, "rejected", answer={"action": "reject", "ended": name}, **settle), did)
        if action == "answer" and text:
            pane = self.supervisor.panes.get(name or "")
            if pane is None:
                raise DecideError(409, "not_supervised", f"session {name!r} is not supervised now")
            async with pane.lock:
                _, c, _ = await self.supervisor.capture(pane)
                if c.state != "idle":
                    raise DecideError(409, "agent_busy", f"the agent's screen is {c.state}, not idle; not typing into it")
                await self.tmux().send_text(pane.target, text, verify=True)
            return self._settled(self.decisions.settle(did, "answered", answer={"action": "answer", "text": text}, **settle), did)
        raise DecideError(422, "invalid_action", "a check decision takes approve, reject or answer (with text)")

    def _settled(self, decision: dict[str, Any] | None, decision_id: int) -> dict[str, Any]:
        if decision is None:
            raise DecideError(409, "already_decided", f"decision {decision_id} was decided meanwhile")
        return decision

    # ------------------------------------------------------------------ terminal tickets

    def issue_ticket(self, session: str, *, input: bool, user_id: int) -> str:
        """A single-use ticket for the terminal WebSocket, valid ``ticket_ttl`` seconds."""
        now = time.monotonic()
        self._tickets = {k: t for k, t in self._tickets.items() if t.expires > now}
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = Ticket(session, input, now + self.config.ticket_ttl, user_id)
        return ticket

    def redeem_ticket(self, ticket: str, session: str) -> Ticket | None:
        """The ticket's grant if valid for ``session`` (it is consumed either way)."""
        grant = self._tickets.pop(ticket, None)
        if grant is None or grant.expires < time.monotonic() or grant.session != session:
            return None
        return grant


AUTH_HINTS: Mapping[str, str] = {
    "claude": (
        "Claude Code is not logged in: run `claude` once in a terminal and log in (/login), "
        "or set ANTHROPIC_API_KEY in the claude-code plugin's env; then reopen the task."
    ),
    "codex": (
        "Codex is not logged in: run `codex` once in a terminal and sign in, or configure a "
        "model provider and its API key (e.g. OPENAI_API_KEY in the codex plugin's env); "
        "then reopen the task."
    ),
}
"""Per-CLI resume note for a task blocked because its CLI is not logged in."""


def auth_note(provider: str) -> str:
    """The resume note for a task whose CLI ``provider`` (``claude``, ``codex``, …) shows it is
    not logged in / has no credentials."""
    return AUTH_HINTS.get(provider) or (
        f"{provider} is not logged in or has no API key: log in to it once in a terminal, or set its "
        f"credentials in the {provider} plugin's env; then reopen the task."
    )


def _missing_program(program: str, env: Mapping[str, str]) -> str | None:
    """``program`` if it cannot be found the way the pane's shell will look for it."""
    if "/" in program:
        return None if os.access(program, os.X_OK) else program
    return None if shutil.which(program, path=env.get("PATH") or os.environ.get("PATH")) else program


def _agent_data(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"task_id": row["task_id"], "session": row["session"], "attempt": row["attempt"], "provider": row["provider"]}

"""An agent's life from spawn to end: :class:`Lifecycle`.

* **Spawn** (:meth:`Lifecycle.launch`): the provider's one-time CLI set-up (:mod:`.stateinit`), the
  command line and environment from the provider
  (resume when possible), tmux session ``elowen-t<task>-a<attempt>``, ``agent.spawned``.
* **Re-adoption** (:meth:`Lifecycle.adopt`): live sessions recorded as running are taken back
  after a restart (never spawned twice), ``agent.adopted``; dead ones go to the stuck detector.
* **Liveness** (:meth:`Lifecycle.liveness`): pane death (``#{pane_dead}``), a CLI that fell back
  to a shell, and stalls (no screen change for ``stall_after`` seconds: one ``check`` decision
  per stall episode).
* **Stuck detector** (:meth:`Lifecycle.stuck`): an ``in_progress`` task whose agent is gone is
  reopened with a resume note while ``tasks.attempts <= max_relaunches``, then ``blocked``.
* **Janitor** (:meth:`Lifecycle.janitor`): ends sessions of closed/cancelled tasks, revokes
  their tokens.
* **Signals** (:meth:`Lifecycle.on_signal`): the deriver's ``signal`` events are recorded on the
  session row; ``auth_required`` blocks the task; a resumed CLI that ignores its command-line
  prompt gets it typed once it is idle.

Events: ``agent.spawned``, ``agent.adopted``, ``agent.exited`` (data ``{"task_id", "session",
"attempt", "provider", "reason"?}``), ``signal`` (``exited`` only; the deriver publishes the
others).
"""

from __future__ import annotations

import calendar
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from elowen_sdk.errors import SessionNotFoundError
from elowen_sdk.providers import Channels
from elowen_sdk.screen import screen_hash
from elowen_sdk.services import GitError, GitService, TasksService, TmuxService

from .activity import ActivityTracker
from .config import AgentsConfig, daemon_url
from .decide import Keys
from .decisions import DecisionStore
from .sandbox import SandboxUnavailable, choose_mode, elowen_secrets, plan_spawn
from .sessions import SessionStore
from .spawn import Launch, agent_env, render_prompt
from .stateinit import StateInit

__all__ = ["PERMISSION_PATH", "SHELLS", "Lifecycle", "agent_data"]

PERMISSION_PATH = "/agent/permission"
"""The route a CLI's permission channel posts to (:mod:`.api`)."""

log = logging.getLogger("elowen.plugin.agents")

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh"})
"""``pane_current_command`` values meaning the agent fell back to a shell (PITFALLS 13)."""


class Lifecycle:
    """Spawns, watches over and ends agent sessions.

    Args:
        ctx: the plugin context (``service:tmux``, ``service:tasks``, ``publish``).
        config: :class:`~.config.AgentsConfig`.
        sessions, decisions: the plugin's stores.
        keys: the key sender (its locks serialise typing with decision answers).
        provider: ``provider(name)`` → the executor provider (raises ``LookupError``).
        tokens: ``(create(task_id) -> str, revoke(task_id) -> int)`` for agent-scoped tokens,
            or ``None`` (agents then get no ``ELOWEN_TOKEN``).
        publish: ``publish(type, data, task_id)``.
        start: ``start(async_fn, *args)`` runs a guarded background task.
        wake: wakes the scheduler (a task was reopened).
    """

    def __init__(
        self,
        ctx: Any,
        config: AgentsConfig,
        sessions: SessionStore,
        decisions: DecisionStore,
        keys: Keys,
        *,
        provider: Callable[[str], Any],
        tokens: tuple[Callable[[int], str], Callable[[int], int]] | None,
        publish: Callable[[str, Mapping[str, Any], int | None], None],
        start: Callable[..., None],
        wake: Callable[[], None],
        state_init: StateInit | None = None,
    ) -> None:
        self.ctx = ctx
        self.state_init = state_init or StateInit()
        self.config = config
        self.sessions = sessions
        self.decisions = decisions
        self.keys = keys
        self._provider = provider
        self._tokens = tokens
        self._publish = publish
        self._start = start
        self._wake = wake
        self._git_writable: dict[str, tuple[Path, ...]] = {}  # session → the git folders its worktree writes
        self.live: dict[str, ActivityTracker] = {}
        """Sessions this enable spawned or adopted and still runs → their screen activity."""
        self.launching: set[str] = set()
        """Claimed sessions whose spawn is in progress (the stuck detector leaves them alone)."""
        self._pending_text: dict[str, str] = {}
        self._last_state: dict[str, str] = {}

    def tmux(self) -> Any:
        return self.ctx.service(TmuxService)

    def tasks(self) -> Any:
        return self.ctx.service(TasksService)

    def _track(self, name: str) -> None:
        self.live[name] = ActivityTracker(idle_after=self.config.idle_after, stall_after=self.config.stall_after, now=trio.current_time())

    def _drop(self, name: str) -> None:
        self.live.pop(name, None)
        self._pending_text.pop(name, None)
        self._last_state.pop(name, None)
        self.keys.forget(name)

    # ------------------------------------------------------------------ adopting

    async def adopt(self) -> list[str]:
        """Take back every recorded running session that is alive in tmux; returns their
        names. Sessions missing or dead are left to :meth:`stuck`; a session whose executor
        is not enabled is skipped and taken back when it is (the plugin calls this again on
        each ``plugin.enabled`` event of a plugin contributing executors)."""
        adopted = []
        tmux = self.tmux()
        for row in self.sessions.running():
            name = row["session"]
            if name in self.live or not row["pane_id"]:
                continue
            if not await tmux.is_alive(name) or name in self.live:  # adopted meanwhile by another call
                continue
            try:
                self._provider(row["provider"])
            except LookupError:
                log.warning("cannot supervise %s: executor %s is not enabled", name, row["provider"])
                continue
            self._track(name)
            adopted.append(name)
            self._publish("agent.adopted", agent_data(row), row["task_id"])
            log.info("re-adopted %s", name)
        return adopted

    # ------------------------------------------------------------------ spawning

    def build_launch(self, row: Mapping[str, Any], provider: Any, token: str | None) -> Launch:
        """The command line and environment for the session ``row`` (resume when enabled,
        valid and a previous session exists)."""
        task = self.tasks().get(int(row["task_id"]))
        workdir = row["workdir"]
        penv = provider.env_for()
        session_id: str | None = None
        resumed = False
        if row["attempt"] > 1 and provider.settings.resume_sessions:
            prev = self.sessions.previous(int(row["task_id"]), int(row["attempt"]))
            candidate = prev["cli_session_id"] if prev else None
            if candidate and provider.validate_session_id(candidate, workdir=workdir, env=penv):
                session_id, resumed = candidate, True
            elif candidate:
                log.info("%s: previous session id %r is not resumable; starting fresh", row["session"], candidate)
        if session_id is None and provider.chooses_session_id:
            session_id = provider.new_session_id()
        if self.config.preseed_trust:
            provider.preseed_trust(workdir, env=penv)
        note = task.get("resume_note") if row["attempt"] > 1 else None
        if note and self._infrastructure_note(row, provider, str(note)):
            note = None  # "Cannot start …", "not logged in": about the set-up, not for the agent
        prompt = render_prompt(task, resume_note=note)
        url = daemon_url(self.config)
        channels = self.channels(url, token)
        argv = provider.build_command(prompt, model=row["model"] or None, session_id=session_id, resume=resumed, channels=channels)
        wired = provider.channel_env(provider.wanted_channels(channels))  # e.g. an inline MCP config naming $ELOWEN_TOKEN
        env = agent_env({**penv, **wired}, url=url, task_id=int(row["task_id"]), token=token)
        return Launch(argv=argv, env=env, workdir=workdir, cli_session_id=session_id, resumed=resumed, prompt=prompt)

    def _infrastructure_note(self, row: Mapping[str, Any], provider: Any, note: str) -> bool:
        """Whether the task's resume ``note`` is one this plugin wrote when the previous attempt
        could not run at all — its program or sandbox missing (the session never got a pane),
        or the CLI not logged in (the provider's :meth:`auth_note`). Such a note told the
        *user* what to fix; once the task is reopened it is stale, and is not repeated to the
        relaunched agent. A note the user gave on reopening differs from it and is kept."""
        prev = self.sessions.previous(int(row["task_id"]), int(row["attempt"]))
        if prev is None or (prev.get("end_reason") or "") != note:
            return False
        if not prev.get("pane_id"):
            return True
        try:
            return bool(note == provider.auth_note())
        except Exception:
            return False

    def channels(self, url: str, token: str | None) -> Channels | None:
        """The structured channels offered to an agent (``None`` without an agent token:
        both need it): this plugin's permission route, and ``/mcp`` while the ``mcp`` plugin
        serves it. Each provider's settings (``mcp``, ``permission_channel``) decide what it
        uses."""
        if not token:
            return None
        try:
            mcp = "POST /mcp" in self.ctx.contributions("route")
        except Exception:  # a context without contributions
            mcp = False
        return Channels(permission_url=f"{url}{PERMISSION_PATH}", mcp_url=f"{url}/mcp" if mcp else None, wait=self.config.channel_wait)

    async def launch(self, row: dict[str, Any], provider: Any) -> bool:
        """Spawn the claimed session ``row``; ``False`` when it did not start (the task was
        reopened or blocked)."""
        self.launching.add(row["session"])
        try:
            return await self._spawn(row, provider)
        finally:
            self.launching.discard(row["session"])

    async def _task_workdir(self, row: dict[str, Any]) -> dict[str, Any]:
        """The claimed ``row`` with the folder its agent starts in: the task's own git worktree
        when the ``git`` plugin offers one (recorded in the session row), else unchanged (the
        project folder). A worktree that cannot be made is noted on the task and the agent
        works in the project folder."""
        try:
            git = self.ctx.service(GitService)
        except LookupError:
            return row
        try:
            wd = await git.workdir_for(int(row["task_id"]), str(row["workdir"]))
        except GitError as exc:
            log.warning("task %s: no worktree (%s); the agent works in the project folder", row["task_id"], exc)
            try:
                self.tasks().progress(int(row["task_id"]), f"No git worktree: {exc}. The agent works in the project folder.", author="elowen:agents")
            except Exception:
                log.exception("cannot note the worktree failure on task %s", row["task_id"])
            return row
        self._git_writable[str(row["session"])] = tuple(Path(p) for p in wd.writable)
        if wd.path == row["workdir"]:
            return row
        self.ctx.store.execute("UPDATE agent_sessions SET workdir = ? WHERE session = ?", (wd.path, row["session"]))
        return {**row, "workdir": wd.path}

    async def _spawn(self, row: dict[str, Any], provider: Any) -> bool:
        name = row["session"]
        token = None
        try:
            if self._tokens is not None:
                token = self._tokens[0](int(row["task_id"]))
            row = await self._task_workdir(row)
            launch = self.build_launch(row, provider, token)
            missing = missing_program(launch.argv[0], launch.env)
            if missing:
                await self._cannot_start(row, provider, missing)
                return False
            try:
                argv = self.sandbox_argv(row, provider, launch)
            except SandboxUnavailable as exc:
                await self._cannot_start(row, provider, "", note=str(exc))
                return False
            if launch.cli_session_id:
                self.sessions.set_cli_session_id(name, launch.cli_session_id)
            await self.state_init.ensure(provider, launch.env)
            spawned = await self.tmux().spawn(name, argv, cwd=launch.workdir, env=launch.env)
        except Exception as exc:
            log.exception("spawning %s failed", name)
            # kill=False: a session of that name that we could not create is not ours to end
            await self._gone(self.sessions.by_name(name) or row, f"spawn failed: {exc}", None, kill=False)
            return False
        self.sessions.spawned(name, pane_id=spawned.pane_id, pid=spawned.pid, env=launch.public_env())
        row = self.sessions.by_name(name) or row
        self._track(name)
        if launch.resumed and getattr(provider, "types_prompt_on_resume", False):
            self._pending_text[name] = launch.prompt
        self._publish("agent.spawned", {**agent_data(row), "resumed": launch.resumed, "argv0": launch.argv[0]}, row["task_id"])
        log.info("task %s: spawned %s (%s%s)", row["task_id"], name, row["provider"], ", resumed" if launch.resumed else "")
        return True

    def sandbox_argv(self, row: Mapping[str, Any], provider: Any, launch: Launch) -> list[str]:
        """The pane's command line: ``launch.argv`` under bubblewrap (:mod:`.sandbox`; mode from
        the agents setting ``project_sandbox`` for the task's project, else the provider's
        ``sandbox``), or unchanged with a warning (log and a ``task.progress`` note).

        Raises:
            SandboxUnavailable: bubblewrap is required but missing or not working.
        """
        task_id = int(row["task_id"])
        tasks = self.tasks()
        task = tasks.exists(task_id)
        project = tasks.project(int(task["project_id"])) if task else None
        per_project = self.ctx.config.get("project_sandbox") or {}
        settings = provider.settings
        mode = choose_mode(getattr(settings, "sandbox", "auto"), per_project.get(project["name"]) if project else None)
        # every other project's folder is hidden
        others = [Path(p["path"]) for p in tasks.projects() if p["path"] != launch.workdir]
        state = provider.state_paths(env=launch.env) if hasattr(provider, "state_paths") else []
        state = [*state, *self._git_writable.pop(str(row["session"]), ())]  # a worktree's git directory
        argv, warning = plan_spawn(
            mode=mode,
            workdir=launch.workdir,
            argv=launch.argv,
            env=launch.env,
            state_paths=state,
            hidden=[*elowen_secrets(getattr(self.ctx, "data_dir", None)), *others],
            network=getattr(settings, "sandbox_network", True),
        )
        if warning:
            log.warning("task %s: %s", task_id, warning)
            try:
                self.tasks().progress(task_id, warning, author="elowen:agents")
            except Exception:
                log.exception("cannot note the sandbox warning on task %s", task_id)
        return argv

    async def _cannot_start(self, row: Mapping[str, Any], provider: Any, program: str, *, note: str = "") -> None:
        """The CLI's program is not installed (or the sandbox it must run in is missing):
        retrying cannot help, so the task is blocked at once with a note that says what to
        install or configure."""
        name, task_id = row["session"], int(row["task_id"])
        plugin = getattr(provider, "plugin", "") or str(row["provider"])
        note = note or (
            f"Cannot start {row['provider']}: the program {program!r} is not installed or not on the PATH. "
            f"Install it, or set its path with `elowen plugin config {plugin} binary=/path/to/{program.rsplit('/', 1)[-1]}`, "
            f"then reopen the task (`elowen task reopen {task_id}`)."
        )
        await self._end_session(name, task_id, "exited", note, kill=False)
        self.tasks().update(task_id, {"state": "blocked", "resume_note": note})
        log.warning("task %s blocked: %s", task_id, note)

    # ------------------------------------------------------------------ signals

    def on_signal(self, data: Mapping[str, Any]) -> None:
        """A ``signal`` event (from the deriver): record it; block a CLI that is not logged in;
        type a pending resume prompt into an idle composer."""
        name = str(data.get("session") or "")
        if name not in self.live or not data.get("signal"):
            return
        self.sessions.set_signal(name, str(data["signal"]))
        state = str(data.get("state") or "")
        self._last_state[name] = state
        if state == "auth_required":
            self._start(self._not_authenticated, name)
        elif state == "idle" and name in self._pending_text:
            self._start(self._type_pending, name)

    async def _type_pending(self, name: str) -> None:
        row = self.sessions.by_name(name)
        text = self._pending_text.get(name)
        if row is None or text is None:
            return
        async with self.keys.lock(name):
            if self._pending_text.pop(name, None) is None:
                return
            await self.tmux().send_text(row["pane_id"] or name, text)
        log.info("%s: typed the task prompt into the idle composer", name)

    async def _not_authenticated(self, name: str) -> None:
        """The CLI of session ``name`` shows it is not logged in / has no credentials
        (screen state ``auth_required``): no relaunch can fix that, so — like a missing
        program — the task is blocked at once with a note saying how to log in, and the
        session is ended. Events: ``agent.exited`` (reason = the note) and the task service's
        ``task.updated``."""
        row = self.sessions.by_name(name)
        if row is None or row["state"] != "running":
            return
        task_id = int(row["task_id"])
        try:
            note = self._provider(str(row["provider"])).auth_note()
        except LookupError:
            note = f"{row['provider']} is not logged in or has no API key: log in to it once in a terminal; then reopen the task."
        tasks = self.tasks()
        task = tasks.exists(task_id)
        # block first: with the task no longer in_progress the stuck detector leaves it alone
        # while the session is being ended
        if task is not None and task["state"] == "in_progress":
            tasks.update(task_id, {"state": "blocked", "resume_note": note})
        await self._end_session(name, task_id, "exited", note)
        self._publish("agent.exited", {**agent_data(row), "reason": note}, task_id)
        log.warning("task %s blocked: %s", task_id, note)

    # ------------------------------------------------------------------ sweeps

    async def liveness(self) -> None:
        """Pane death and stalls: a dead pane is recorded ``exited`` (the stuck detector then
        relaunches or blocks); a stalled pane raises one ``check`` decision per episode."""
        tmux = self.tmux()
        now = trio.current_time()
        for name in list(self.live):
            row = self.sessions.by_name(name)
            if row is None:
                self._drop(name)
                continue
            target = row["pane_id"] or name
            try:
                info = await tmux.pane_info(target)
                screen = None if info.dead else await tmux.capture(target)
            except SessionNotFoundError:
                await self._exited(name, "tmux session missing", None)
                continue
            if info.dead or info.current_command in SHELLS:
                reason = f"the CLI exited (status {info.dead_status})" if info.dead else f"the CLI fell back to a shell ({info.current_command})"
                await self._exited(name, reason, info.dead_status)
                continue
            activity = self.live.get(name)
            if activity is None or screen is None:
                continue
            activity.observe(screen_hash(screen), len(screen), now)
            if activity.new_stall(now) and not self.decisions.open_for_session(name):
                self.decisions.create(
                    "check",
                    task_id=int(row["task_id"]),
                    session=name,
                    payload={
                        "reason": "stalled",
                        "quiet_seconds": round(now - activity.last_change),
                        "signal": row["signal"],
                        "state": self._last_state.get(name),
                    },
                )

    async def _exited(self, name: str, reason: str, status: int | None) -> None:
        """Record that the agent of session ``name`` is gone. The dead pane is kept (its last
        screen is readable) while the task is ``in_progress``: the stuck detector ends it."""
        row = self.sessions.by_name(name)
        self._drop(name)
        if row is not None and self.sessions.finish(name, "exited", reason=reason, exit_status=status):
            self._capture_cli_session(row)
            self._publish("agent.exited", {**agent_data(row), "reason": reason}, row["task_id"])
            self._publish("signal", {"task_id": row["task_id"], "session": name, "signal": "exited", "state": "exited"}, row["task_id"])
            task = self.tasks().exists(int(row["task_id"]))
            if task is None or task["state"] != "in_progress":
                await self._end_session(name, int(row["task_id"]), "exited", reason)

    def _capture_cli_session(self, row: Mapping[str, Any]) -> None:
        """Remember the CLI's conversation id (from its own files) for a later resume."""
        if row.get("cli_session_id"):
            return
        try:
            provider = self._provider(row["provider"])
            found = provider.find_session_id(row["workdir"], env=row.get("env") or None, since=_epoch(row.get("started_at")))
        except Exception:
            log.exception("looking up the session id of %s failed", row["session"])
            return
        if found:
            self.sessions.set_cli_session_id(row["session"], found)

    async def stuck(self) -> None:
        """Reopen (or block) ``in_progress`` tasks whose agent is gone."""
        tmux = self.tmux()
        for task in self.tasks().list_tasks(state="in_progress", limit=100_000):
            row = self.sessions.latest_for_task(task["id"])
            if row is None or row["session"] in self.launching:
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
            elif row["session"] not in self.live:
                reason = "never started"
            if reason is not None:
                await self._gone(row, reason, status)

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
            log.info("task %s reopened: %s", task_id, reason)
            self._wake()
        else:
            note = f"{base} Blocked after {self.config.max_relaunches} relaunches; a human must look at it."
            tasks.update(task_id, {"state": "blocked", "resume_note": note})
            log.warning("task %s blocked: %s", task_id, reason)

    async def _end_session(self, name: str, task_id: int, state: str, reason: str, *, kill: bool = True) -> None:
        self._drop(name)
        self.sessions.finish(name, state, reason=reason)
        for d in self.decisions.open_for_session(name):
            self.decisions.settle(d["id"], "expired", decided_by="elowen:agents", rationale=f"the agent session ended: {reason}")
        if kill:
            try:
                await self.tmux().kill(name)
            except Exception:
                log.exception("killing %s failed", name)
        if self._tokens is not None:
            self._tokens[1](task_id)

    async def end_agent(self, name: str) -> None:
        """Kill the agent of session ``name`` (a rejected ``check``): liveness then records it
        exited and the stuck detector relaunches or blocks the task."""
        await self.tmux().kill(name)

    async def janitor(self) -> None:
        """End the sessions of closed, cancelled, deleted or reopened tasks and revoke their
        tokens. An ``open`` task never has a running agent of its own (the scheduler claims it
        and starts one in one transaction; a relaunch ends the old session first), so a running
        session of an open task is one left from before a close and a quick reopen: it is ended,
        and the scheduler then starts the task afresh (it never starts a second agent beside
        a running one)."""
        tasks = self.tasks()
        ended = False
        for row in self.sessions.running():
            task = tasks.exists(int(row["task_id"]))
            if task is not None and task["state"] not in ("closed", "cancelled", "open"):
                continue
            state = task["state"] if task else "deleted"
            why = "task reopened" if state == "open" else f"task {state}"
            self._capture_cli_session(row)
            await self._end_session(row["session"], int(row["task_id"]), "ended", why)
            self._publish("agent.exited", {**agent_data(row), "reason": why}, row["task_id"])
            ended = ended or state == "open"
        if ended:
            self._wake()


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return calendar.timegm(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def missing_program(program: str, env: Mapping[str, str]) -> str | None:
    """``program`` if it cannot be found the way the pane's shell will look for it."""
    if "/" in program:
        return None if os.access(program, os.X_OK) else program
    return None if shutil.which(program, path=env.get("PATH") or os.environ.get("PATH")) else program


def agent_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """The common data of ``agent.*`` events."""
    return {"task_id": row["task_id"], "session": row["session"], "attempt": row["attempt"], "provider": row["provider"]}

"""The parked-agent path: one overseer coding-agent CLI per active mission, in tmux.

Set ``overseer_exec`` (an executor spec: ``sonnet``, ``opencode:provider/model``…) and every
``active`` mission above L0 gets an overseer agent started with ``prompts/overseer.md``. It
runs ``elowen overseer poll`` (``GET /overseer/poll``: blocks until a decision of its mission is
queued, then returns it as JSON) and answers with ``elowen overseer decide …``
(``POST /overseer/decide``). Its answers go through the same policy as the relay path
(thresholds, level read at apply time); destructive requests never reach it.

Identity: each mission's overseer runs as the member user ``overseer-m<id>`` (no projects:
it can see nothing else through the API) with a full-scope token passed in ``ELOWEN_TOKEN``
through the tmux environment (never typed); the token is replaced at each spawn.

Permission prompts of the overseer's own CLI are skipped (``skip_permissions``: it only runs
``elowen`` commands). Kilo 7 cannot skip them and so cannot be the overseer.

Liveness (no per-decision timeout, PITFALLS 15): a pane that died, fell back to a shell, or
has not changed for ``overseer_silence`` seconds while a decision waits for it, marks the
agent ``dead``; every decision queued for it escalates to a human; it is restarted, at most
``max_overseer_restarts`` times, then the mission stalls until a human resumes it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import trio

from elowen.core.store import utc_iso

from .policy import Proposal

__all__ = ["OVERSEER_USER", "ParkedOverseers", "render_overseer_prompt"]


async def _last_words(tmux: Any, target: str) -> str:
    """``": <the dead pane's last non-empty line>"`` (what the CLI said before it exited, e.g.
    Claude Code's refusal to skip permissions as root), or ``""``."""
    lines: list[str] = []
    for _ in range(10):  # tmux may notice the exit before it has drawn the last output: a moment
        try:
            screen = await tmux.capture(target, history=200)  # a dead pane's screen is scrolled into history
        except Exception:  # the pane went away meanwhile: the status alone says enough
            return ""
        lines = [ln.strip() for ln in screen.splitlines() if ln.strip() and not ln.strip().startswith("Pane is dead")]
        if lines:
            break
        await trio.sleep(0.1)
    return f": {lines[-1][:200]}" if lines else ""


log = logging.getLogger(__name__)

OVERSEER_USER = "overseer-m{mission_id}"
"""Name of the user a mission's overseer agent acts as."""

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh"})
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_WS_RE = re.compile(r"\s+")


@lru_cache(maxsize=1)
def _template() -> str:
    """``prompts/overseer.md`` (shipped as ``elowen.prompts``), comments removed."""
    from elowen.prompts import load

    return _COMMENT_RE.sub("", load("overseer"))


def render_overseer_prompt(mission: Mapping[str, Any], threshold: float) -> str:
    """The overseer's prompt for ``mission``, as one line."""
    values = {
        "mission_id": str(mission["id"]),
        "mission_name": _WS_RE.sub(" ", str(mission["name"])).strip().replace('"', "'"),
        "level": str(mission["level"]),
        "threshold": f"{threshold:.2f}",
    }
    text = _template()
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return _WS_RE.sub(" ", text).strip()


class ParkedOverseers:
    """Spawns, watches and serves the parked overseer agents.

    Args:
        autopilot: the :class:`~.autopilot.Autopilot` (its ctx, config, missions, store).
    """

    def __init__(self, autopilot: Any) -> None:
        self.autopilot = autopilot
        self.ctx = autopilot.ctx
        self.store = autopilot.store
        self.config = autopilot.config
        self.missions = autopilot.missions
        self._wake: dict[int, trio.Event] = {}
        self._activity: dict[str, tuple[str, float]] = {}  # session → (screen hash, last change)
        self._queued_at: dict[int, float] = {}  # decision id → trio.current_time() when queued

    # ------------------------------------------------------------------ the queue

    def enqueue(self, decision: Mapping[str, Any], mission: Mapping[str, Any]) -> None:
        """Hand ``decision`` to ``mission``'s overseer agent."""
        self.store.execute(
            "INSERT OR IGNORE INTO overseer_queue (decision_id, mission_id, queued_at) VALUES (?, ?, ?)",
            (decision["id"], mission["id"], utc_iso()),
        )
        self._queued_at.setdefault(int(decision["id"]), trio.current_time())
        self._wake.pop(int(mission["id"]), trio.Event()).set()

    def forget(self, decision_id: int) -> None:
        """The decision was settled elsewhere (a human, or its prompt expired)."""
        self.store.execute("DELETE FROM overseer_queue WHERE decision_id = ?", (decision_id,))
        self._queued_at.pop(decision_id, None)

    def queued(self, mission_id: int) -> list[int]:
        return [r["decision_id"] for r in self.store.query("SELECT decision_id FROM overseer_queue WHERE mission_id = ? ORDER BY decision_id", (mission_id,))]

    def _next(self, mission_id: int) -> dict[str, Any] | None:
        for decision_id in self.queued(mission_id):
            decision = self.autopilot.decisions().get(decision_id)
            if decision is None or decision["status"] != "pending":
                self.forget(decision_id)
                continue
            return decision
        return None

    def view(self, decision: Mapping[str, Any], mission: Mapping[str, Any]) -> dict[str, Any]:
        """What ``elowen overseer poll`` prints for one decision."""
        payload = {k: v for k, v in (decision.get("payload") or {}).items() if k not in ("fingerprint", "instance", "detected_at")}
        level = int(mission["level"])
        return {
            "id": decision["id"],
            "kind": decision["kind"],
            "created_at": decision["created_at"],
            "request": payload,
            **self.autopilot.context(decision, mission),
            "level": f"L{level}",
            "threshold": self.config.threshold(level),
        }

    async def poll(self, mission_id: int, wait: float, *, claimer: str) -> dict[str, Any] | None:
        """The oldest open decision queued for the mission (marked claimed by ``claimer``),
        waiting up to ``wait`` seconds for one; ``None`` when none came."""
        with trio.move_on_after(wait):
            while True:
                decision = self._next(mission_id)
                if decision is not None:
                    self.store.execute("UPDATE overseer_queue SET claimed_at = ?, claimed_by = ? WHERE decision_id = ?", (utc_iso(), claimer, decision["id"]))
                    return self.view(decision, self.missions.get(mission_id))
                event = self._wake.setdefault(mission_id, trio.Event())
                with trio.move_on_after(1.0):
                    await event.wait()
        return None

    def mission_of_queued(self, decision_id: int) -> int | None:
        row = self.store.query_one("SELECT mission_id FROM overseer_queue WHERE decision_id = ?", (decision_id,))
        return int(row["mission_id"]) if row else None

    async def decide(self, decision_id: int, proposal: Proposal) -> dict[str, Any] | None:
        """Apply the overseer agent's ``proposal`` through the policy; returns the decision."""
        result = await self.autopilot.apply(decision_id, proposal)
        self.forget(decision_id)
        return result

    async def escalate_queue(self, mission_id: int, reason: str) -> int:
        """Escalate every decision queued for the mission; returns how many."""
        count = 0
        for decision_id in self.queued(mission_id):
            if await self.autopilot.escalate(decision_id, reason, by="overseer:liveness") is not None:
                count += 1
            self.forget(decision_id)
        return count

    # ------------------------------------------------------------------ agents

    def running(self) -> list[dict[str, Any]]:
        return self.store.query("SELECT * FROM overseer_agents WHERE state = 'running' ORDER BY id")

    def list(self) -> list[dict[str, Any]]:
        """Every overseer agent row, newest first (for ``GET /overseer/agents``)."""
        return self.store.query("SELECT id, mission_id, session, provider, model, state, started_at, ended_at, end_reason FROM overseer_agents ORDER BY id DESC LIMIT 200")

    async def liveness(self) -> None:
        """One round: stop overseers of missions that no longer need one, detect dead or hung
        ones, start missing ones."""
        tmux = self.ctx.service("tmux")
        now = trio.current_time()
        for row in self.running():
            mission = self._mission(row["mission_id"])
            if mission is None or mission["state"] != "active" or mission["level"] == 0 or not self.config.overseer_exec:
                state = mission["state"] if mission else "deleted"
                await self._end(row, "stopped", f"mission {state}")
                await self.escalate_queue(row["mission_id"], f"the mission is {state}: a human decides")
                continue
            reason = await self._dead_reason(tmux, row, now)
            if reason is not None:
                await self._died(row, reason)
        for mission in self.missions.list(state="active", limit=10_000):
            if mission["level"] == 0 or self._running_for(mission["id"]):
                continue
            if mission["overseer_restarts"] > self.config.max_overseer_restarts:
                await self.escalate_queue(mission["id"], "the mission's overseer agent keeps dying")
                self.missions.stall(mission["id"], f"the overseer agent died {mission['overseer_restarts']} times")
                continue
            try:
                await self.spawn(mission)
            except Exception as exc:
                log.exception("overseer: starting the overseer of mission %s failed", mission["id"])
                self.missions.count_restart(mission["id"])
                await self.escalate_queue(mission["id"], f"the overseer agent could not start: {exc}")

    def _mission(self, mission_id: int) -> dict[str, Any] | None:
        try:
            return self.missions.get(mission_id)
        except LookupError:
            return None

    def _running_for(self, mission_id: int) -> bool:
        return self.store.query_one("SELECT 1 AS x FROM overseer_agents WHERE mission_id = ? AND state = 'running'", (mission_id,)) is not None

    async def _dead_reason(self, tmux: Any, row: Mapping[str, Any], now: float) -> str | None:
        from elowen_builtins.tmux import SessionNotFoundError

        name = row["session"]
        try:
            info = await tmux.pane_info(row["pane_id"] or name)
            if info.dead:
                for _ in range(20):  # tmux may mark the pane dead a moment before it has the status
                    if info.dead_status is not None:
                        break
                    await trio.sleep(0.1)
                    info = await tmux.pane_info(row["pane_id"] or name)
                status = "" if info.dead_status is None else f" (status {info.dead_status})"
                return f"the overseer CLI exited{status}" + await _last_words(tmux, row["pane_id"] or name)
            if info.current_command in SHELLS:
                return f"the overseer CLI fell back to a shell ({info.current_command})"
            screen = await tmux.capture(row["pane_id"] or name)
        except SessionNotFoundError:
            return "its tmux session is gone"
        digest = hashlib.sha256(screen.encode()).hexdigest()
        last = self._activity.get(name)
        if last is None or last[0] != digest:
            self._activity[name] = (digest, now)
            return None
        waiting = [self._queued_at.setdefault(d, now) for d in self.queued(row["mission_id"])]
        quiet = now - last[1]
        if waiting and quiet >= self.config.overseer_silence and now - min(waiting) >= self.config.overseer_silence:
            return f"its screen has not changed for {quiet:.0f} s while a decision waited"
        return None

    async def _died(self, row: Mapping[str, Any], reason: str) -> None:
        log.warning("overseer: the overseer agent %s of mission %s is gone: %s", row["session"], row["mission_id"], reason)
        await self._end(row, "dead", reason)
        count = await self.escalate_queue(row["mission_id"], f"the mission's overseer agent is gone ({reason}): a human decides")
        restarts = self.missions.count_restart(row["mission_id"])
        self.ctx.publish("overseer.agent_died", {"mission_id": row["mission_id"], "session": row["session"], "reason": reason, "escalated": count, "restarts": restarts})

    async def _end(self, row: Mapping[str, Any], state: str, reason: str) -> None:
        try:
            await self.ctx.service("tmux").kill(row["session"])
        except Exception:
            log.exception("overseer: killing %s failed", row["session"])
        self.store.execute("UPDATE overseer_agents SET state = ?, ended_at = ?, end_reason = ? WHERE id = ?", (state, utc_iso(), reason, row["id"]))
        self._activity.pop(row["session"], None)
        if row["user_id"] is not None:
            self.store.execute("DELETE FROM tokens WHERE user_id = ?", (row["user_id"],))

    async def stop_all(self, reason: str) -> None:
        """End every running overseer agent (the plugin is being disabled)."""
        for row in self.running():
            await self._end(row, "stopped", reason)

    # ------------------------------------------------------------------ spawning

    def _user(self, mission_id: int) -> tuple[int, str]:
        from elowen.daemon.auth import issue_token

        name = OVERSEER_USER.format(mission_id=mission_id)
        self.store.execute("INSERT OR IGNORE INTO users (name, role, tool_grants, created_at) VALUES (?, 'member', '[]', ?)", (name, utc_iso()))
        row = self.store.query_one("SELECT id FROM users WHERE name = ?", (name,))
        assert row is not None
        self.store.execute("DELETE FROM tokens WHERE user_id = ?", (row["id"],))
        return int(row["id"]), issue_token(self.store, int(row["id"]))

    def _url(self) -> str:
        from elowen_builtins.agents.config import AgentsConfig, daemon_url

        url = self.config.url or (((self.ctx.settings.get("plugins") or {}).get("agents") or {}).get("config") or {}).get("url") or ""
        return daemon_url(AgentsConfig(url=str(url)))

    async def spawn(self, mission: Mapping[str, Any]) -> dict[str, Any]:
        """Start the overseer agent of ``mission`` in tmux; returns its row.

        Raises:
            ExecSpecError: ``overseer_exec`` does not resolve; LookupError: its executor
            plugin is not enabled; tmux errors as :meth:`TmuxService.spawn`.
        """
        from elowen.daemon.execspec import resolve
        from elowen_builtins.agents.config import exec_settings, executor_provider
        from elowen_builtins.agents.spawn import elowen_bin_dir

        execs = exec_settings(self.ctx)
        resolved = resolve(self.config.overseer_exec, fallback=execs.get("fallback", "sonnet"), allow_plain=execs.get("plain") or ())
        provider = executor_provider(self.ctx, resolved.provider)
        threshold = self.config.threshold(int(mission["level"])) or 1.0
        workdir = self.ctx.data_dir / f"mission-{mission['id']}"
        workdir.mkdir(parents=True, exist_ok=True)
        penv = provider.env_for(skip_permissions=True)
        try:
            provider.preseed_trust(str(workdir), env=penv)
        except Exception:
            log.exception("overseer: pre-seeding trust for %s failed", workdir)
        argv = provider.build_command(render_overseer_prompt(mission, threshold), model=resolved.model or None, skip_permissions=True)
        user_id, token = self._user(int(mission["id"]))
        env = dict(penv)
        path = env.get("PATH") or os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        if elowen_bin_dir() not in path.split(os.pathsep):
            path = os.pathsep.join([elowen_bin_dir(), path])
        env.update(PATH=path, ELOWEN_URL=self._url(), ELOWEN_TOKEN=token, ELOWEN_MISSION=str(mission["id"]))
        count = self.store.query_one("SELECT COUNT(*) AS n FROM overseer_agents WHERE mission_id = ?", (mission["id"],))
        name = f"elowen-ov-m{mission['id']}-{int(count['n']) + 1 if count else 1}"
        spawned = await self.ctx.service("tmux").spawn(name, argv, cwd=str(workdir), env=env)
        row_id = self.store.execute(
            "INSERT INTO overseer_agents (mission_id, session, pane_id, provider, model, user_id, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (mission["id"], name, spawned.pane_id, resolved.provider, resolved.model, user_id, utc_iso()),
        )
        self.ctx.publish("overseer.agent_spawned", {"mission_id": mission["id"], "session": name, "provider": resolved.provider})
        log.info("overseer: mission %s: overseer agent %s started (%s)", mission["id"], name, resolved.spec)
        row = self.store.query_one("SELECT * FROM overseer_agents WHERE id = ?", (row_id,))
        assert row is not None
        return row

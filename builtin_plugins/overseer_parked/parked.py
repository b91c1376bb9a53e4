"""The parked-agent path: one overseer coding-agent CLI per active mission, in tmux.

With ``overseer_exec`` set (an executor spec: ``sonnet``, ``opencode:provider/model``…) every
``active`` mission above L0 gets an overseer agent started with ``prompts/overseer.md``
through the agents service's one spawn path (:meth:`AgentsService.spawn_session`). It runs
``elowen overseer poll`` (``GET /overseer/poll``: blocks until a decision of its mission is
queued, then returns it as JSON) and answers with ``elowen overseer decide …``
(``POST /overseer/decide``), which hands the answer to the overseer
(:meth:`MissionsService.submit`: thresholds, level read at apply time); destructive requests
never reach it (the overseer escalates them before any path is asked).

Identity: each mission's overseer runs as the users service's overseer principal of the
mission (no projects: it can see nothing else through the API) with a full-scope token passed
in ``ELOWEN_TOKEN`` through the tmux environment (never typed); the token is replaced at each
spawn and revoked when the agent ends.

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
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, cast

import trio

from elowen_sdk.services import TmuxService, UsersService
from elowen_sdk.services.agents import AgentsService
from elowen_sdk.services.missions import DecisionRequest, MissionsService, Proposal
from elowen_sdk.services.tmux import SessionNotFoundError
from elowen_sdk.store import utc_iso

__all__ = ["ParkedConfig", "ParkedOverseers", "render_overseer_prompt"]

log = logging.getLogger("elowen.plugin.overseer-parked")


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


@dataclass(frozen=True, slots=True)
class ParkedConfig:
    """``[plugins.overseer-parked.config]`` (schema in ``elowen-plugin.toml``); seconds."""

    overseer_exec: str = ""
    liveness_interval: float = 5.0
    overseer_silence: float = 300.0
    max_overseer_restarts: int = 3

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> ParkedConfig:
        cfg = dict(config or {})
        return cls(**{f.name: type(f.default)(cfg[f.name]) for f in fields(cls) if cfg.get(f.name) is not None})


class ParkedOverseers:
    """Spawns, watches and serves the parked overseer agents of one enable of the plugin.

    Args:
        ctx: the plugin context (store, services ``missions``, ``agents``, ``users``,
            ``tmux``).
        config: :class:`ParkedConfig`.
    """

    def __init__(self, ctx: Any, config: ParkedConfig) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.config = config
        self._wake: dict[int, trio.Event] = {}
        self._activity: dict[str, tuple[str, float]] = {}  # session → (screen hash, last change)
        self._queued_at: dict[int, float] = {}  # decision id → trio.current_time() when queued

    def missions(self) -> MissionsService:
        """The overseer's ``missions`` service (``LookupError`` while the overseer is off)."""
        return cast(MissionsService, self.ctx.service(MissionsService))

    # ------------------------------------------------------------------ the path

    @staticmethod
    def accepts(request: DecisionRequest) -> bool:
        """Only decisions of a mission have a parked overseer."""
        return request.mission is not None

    async def propose(self, request: DecisionRequest) -> None:
        """Queue ``request`` for its mission's overseer agent; it answers later."""
        assert request.mission is not None
        mission_id = int(request.mission["id"])
        self.store.execute(
            "INSERT OR IGNORE INTO overseer_queue (decision_id, mission_id, queued_at) VALUES (?, ?, ?)",
            (request.id, mission_id, utc_iso()),
        )
        self._queued_at.setdefault(request.id, trio.current_time())
        self._wake.pop(mission_id, trio.Event()).set()
        return None

    # ------------------------------------------------------------------ the queue

    def forget(self, decision_id: int) -> None:
        """The decision was settled elsewhere (a human, or its prompt expired)."""
        self.store.execute("DELETE FROM overseer_queue WHERE decision_id = ?", (decision_id,))
        self._queued_at.pop(decision_id, None)

    def queued(self, mission_id: int) -> list[int]:
        return [r["decision_id"] for r in self.store.query("SELECT decision_id FROM overseer_queue WHERE mission_id = ? ORDER BY decision_id", (mission_id,))]

    async def _next(self, mission_id: int) -> DecisionRequest | None:
        """The oldest queued decision still for this overseer. One that no longer is (decided
        meanwhile, or its mission went to L0 / out of the overseer's hands) leaves the queue;
        if it is still pending it goes to a human."""
        missions = self.missions()
        for decision_id in self.queued(mission_id):
            request = missions.request(decision_id)
            if request is not None and request.decision["status"] == "pending":
                return request
            self.forget(decision_id)
            if request is None:
                await missions.escalate(
                    decision_id, "the decision is no longer for the parked overseer (level or mission changed): a human decides", by="overseer:parked"
                )
        return None

    async def poll(self, mission_id: int, wait: float, *, claimer: str) -> dict[str, Any] | None:
        """The oldest open decision queued for the mission (marked claimed by ``claimer``) as
        :meth:`DecisionRequest.view` shows it, waiting up to ``wait`` seconds for one; ``None``
        when none came.

        Raises:
            LookupError: the overseer plugin is disabled.
        """
        with trio.move_on_after(wait):
            while True:
                request = await self._next(mission_id)
                if request is not None:
                    self.store.execute("UPDATE overseer_queue SET claimed_at = ?, claimed_by = ? WHERE decision_id = ?", (utc_iso(), claimer, request.id))
                    return request.view()
                event = self._wake.setdefault(mission_id, trio.Event())
                with trio.move_on_after(1.0):
                    await event.wait()
        return None

    def mission_of_queued(self, decision_id: int) -> int | None:
        row = self.store.query_one("SELECT mission_id FROM overseer_queue WHERE decision_id = ?", (decision_id,))
        return int(row["mission_id"]) if row else None

    async def decide(self, decision_id: int, proposal: Proposal) -> dict[str, Any] | None:
        """Hand the overseer agent's ``proposal`` to the overseer; returns the decision.

        Raises:
            LookupError: the overseer plugin is disabled.
        """
        result = await self.missions().submit(decision_id, proposal)
        self.forget(decision_id)
        return result

    async def escalate_queue(self, mission_id: int, reason: str) -> int:
        """Escalate every decision queued for the mission; returns how many."""
        count = 0
        try:
            missions = self.missions()
        except LookupError:
            return 0
        for decision_id in self.queued(mission_id):
            if await missions.escalate(decision_id, reason, by="overseer:liveness") is not None:
                count += 1
            self.forget(decision_id)
        return count

    # ------------------------------------------------------------------ agents

    def running(self) -> list[dict[str, Any]]:
        return self.store.query("SELECT * FROM overseer_agents WHERE state = 'running' ORDER BY id")

    def agents(self) -> list[dict[str, Any]]:
        """Every overseer agent row, newest first (for ``GET /overseer/agents``)."""
        return self.store.query(
            "SELECT id, mission_id, session, provider, model, state, started_at, ended_at, end_reason FROM overseer_agents ORDER BY id DESC LIMIT 200"
        )

    async def liveness(self) -> None:
        """One round: stop overseers of missions that no longer need one, detect dead or hung
        ones, start missing ones. Without the overseer plugin every agent is stopped."""
        try:
            missions = self.missions()
        except LookupError:
            await self.stop_all("the overseer plugin is disabled")
            return
        tmux = self.ctx.service(TmuxService)
        now = trio.current_time()
        for row in self.running():
            mission = self._mission(missions, row["mission_id"])
            if mission is None or mission["state"] != "active" or mission["level"] == 0:
                state = mission["state"] if mission else "deleted"
                await self._end(row, "stopped", f"mission {state}")
                await self.escalate_queue(row["mission_id"], f"the mission is {state}: a human decides")
                continue
            reason = await self._dead_reason(tmux, row, now)
            if reason is not None:
                await self._died(row, reason)
        for mission in missions.list_missions(state="active", limit=10_000):
            if mission["level"] == 0 or self._running_for(mission["id"]):
                continue
            if mission["overseer_restarts"] > self.config.max_overseer_restarts:
                await self.escalate_queue(mission["id"], "the mission's overseer agent keeps dying")
                missions.stall(mission["id"], f"the overseer agent died {mission['overseer_restarts']} times")
                continue
            try:
                await self.spawn(mission)
            except Exception as exc:
                log.exception("starting the overseer of mission %s failed", mission["id"])
                missions.count_restart(mission["id"])
                await self.escalate_queue(mission["id"], f"the overseer agent could not start: {exc}")

    @staticmethod
    def _mission(missions: MissionsService, mission_id: int) -> dict[str, Any] | None:
        try:
            return dict(missions.get(mission_id))
        except LookupError:
            return None

    def _running_for(self, mission_id: int) -> bool:
        return self.store.query_one("SELECT 1 AS x FROM overseer_agents WHERE mission_id = ? AND state = 'running'", (mission_id,)) is not None

    async def _dead_reason(self, tmux: Any, row: Mapping[str, Any], now: float) -> str | None:
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
        log.warning("the overseer agent %s of mission %s is gone: %s", row["session"], row["mission_id"], reason)
        await self._end(row, "dead", reason)
        count = await self.escalate_queue(row["mission_id"], f"the mission's overseer agent is gone ({reason}): a human decides")
        try:
            restarts = self.missions().count_restart(row["mission_id"])
        except LookupError:
            restarts = 0
        self.ctx.publish(
            "overseer.agent_died", {"mission_id": row["mission_id"], "session": row["session"], "reason": reason, "escalated": count, "restarts": restarts}
        )

    async def _end(self, row: Mapping[str, Any], state: str, reason: str) -> None:
        try:
            await self.ctx.service(TmuxService).kill(row["session"])
        except Exception:
            log.exception("killing %s failed", row["session"])
        self.store.execute("UPDATE overseer_agents SET state = ?, ended_at = ?, end_reason = ? WHERE id = ?", (state, utc_iso(), reason, row["id"]))
        self._activity.pop(row["session"], None)
        try:
            self.ctx.service(UsersService).revoke_overseer(int(row["mission_id"]))
        except LookupError:
            log.warning("the users service is gone: the token of %s could not be revoked", row["session"])

    async def stop_all(self, reason: str) -> None:
        """End every running overseer agent (the plugin is being disabled, or the overseer is)."""
        for row in self.running():
            await self._end(row, "stopped", reason)

    # ------------------------------------------------------------------ spawning

    async def spawn(self, mission: Mapping[str, Any]) -> dict[str, Any]:
        """Start the overseer agent of ``mission`` through the agents service; returns its row.

        Raises:
            LookupError: the agents, users or missions service is not offered;
            SpawnError: as :meth:`AgentsService.spawn_session`.
        """
        agents = self.ctx.service(AgentsService)
        users = self.ctx.service(UsersService)
        threshold = self.missions().threshold(int(mission["level"])) or 1.0
        workdir = self.ctx.data_dir / f"mission-{mission['id']}"
        workdir.mkdir(parents=True, exist_ok=True)
        user_id, token = users.overseer_token(int(mission["id"]))
        count = self.store.query_one("SELECT COUNT(*) AS n FROM overseer_agents WHERE mission_id = ?", (mission["id"],))
        name = f"elowen-ov-m{mission['id']}-{int(count['n']) + 1 if count else 1}"
        # the row first: a spawn cut short (the plugin disabled meanwhile) still has a row, so
        # stop_all kills its session and the next name is a new one
        row_id = self.store.execute(
            "INSERT INTO overseer_agents (mission_id, session, provider, user_id, started_at) VALUES (?, ?, '', ?, ?)",
            (mission["id"], name, user_id, utc_iso()),
        )
        try:
            spawned = await agents.spawn_session(
                name,
                self.config.overseer_exec,
                prompt=render_overseer_prompt(mission, threshold),
                cwd=str(workdir),
                env={"ELOWEN_TOKEN": token, "ELOWEN_MISSION": str(mission["id"])},
            )
        except BaseException as exc:
            users.revoke_overseer(int(mission["id"]))
            self.store.execute(
                "UPDATE overseer_agents SET state = 'dead', ended_at = ?, end_reason = ? WHERE id = ?",
                (utc_iso(), f"could not start: {exc}"[:500], row_id),
            )
            raise
        self.store.execute(
            "UPDATE overseer_agents SET pane_id = ?, provider = ?, model = ? WHERE id = ?",
            (spawned.get("pane_id") or "", spawned.get("provider") or "", spawned.get("model") or "", row_id),
        )
        self.ctx.publish("overseer.agent_spawned", {"mission_id": mission["id"], "session": name, "provider": spawned.get("provider")})
        log.info("mission %s: overseer agent %s started (%s)", mission["id"], name, spawned.get("spec") or self.config.overseer_exec)
        row = self.store.query_one("SELECT * FROM overseer_agents WHERE id = ?", (row_id,))
        assert row is not None
        return row

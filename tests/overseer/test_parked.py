"""The parked-agent path's mechanics with a real tmux pane: the overseer agent is spawned per
active mission through the agents service's spawn path (here the fake agent stands in for the
CLI; the real CLI end to end is in ``tests/e2e/test_overseer_e2e.py``), its queue is served by
poll/decide under the overseer's threshold rule,
and when its pane dies or goes silent its queued decisions escalate and it is restarted, at
most ``max_overseer_restarts`` times, then the mission stalls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elowen_sdk.services.missions import Proposal
from tests.overseer.conftest import until, world

PARKED = {"overseer_exec": "claude:overseer-model", "liveness_interval": 0.1}


def _running(w: Any, mission_id: int) -> Any:
    rows = w.store.query("SELECT * FROM overseer_agents WHERE mission_id = ? AND state = 'running' AND pane_id != ''", (mission_id,))
    return rows[0] if rows else None


async def _queued_review(w: Any, mission: dict[str, Any]) -> dict[str, Any]:
    task_id = w.task(mission, agent=False)
    w.tasks.close(task_id, "done", ["ok"])
    return await until(lambda: (q := w.parked.queued(mission["id"])) and w.decisions.get(q[-1]), what="a queued review")


async def test_parked_overseer_polls_and_decides_under_the_policy(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, parked=PARKED) as w:
        mission = w.mission(1)
        agent = await until(lambda: _running(w, mission["id"]), what="the overseer agent")
        assert agent["session"] == f"elowen-ov-m{mission['id']}-1" and agent["provider"] == "claude"
        assert w.tmux("has-session", "-t", f"={agent['session']}").returncode == 0
        user = w.store.query_one("SELECT name, role, kind, mission_id FROM users WHERE id = ?", (agent["user_id"],))
        assert user == {"name": f"overseer-m{mission['id']}", "role": "member", "kind": "overseer", "mission_id": mission["id"]}
        review = await _queued_review(w, mission)
        polled = await w.parked.poll(mission["id"], 2, claimer="overseer")
        assert polled["id"] == review["id"] and polled["kind"] == "review" and polled["threshold"] == 0.85
        assert polled["task"]["summary"] == "done"
        low = await w.parked.decide(review["id"], Proposal("approve", 0.8, "looks done", "agent:overseer"))
        assert low["status"] == "escalated" and "below the L1 threshold" in low["rationale"]
        second = await _queued_review(w, mission)
        ok = await w.parked.decide(second["id"], Proposal("approve", 0.9, "looks done", "agent:overseer"))
        assert ok["status"] == "approved" and ok["decided_by"] == "overseer:agent:overseer" and ok["confidence"] == 0.9
        assert await w.parked.poll(mission["id"], 0.2, claimer="overseer") is None


async def test_killing_the_overseer_escalates_its_decisions_and_restarts_it_bounded(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, parked={**PARKED, "max_overseer_restarts": 1}) as w:
        mission = w.mission(2)
        first = await until(lambda: _running(w, mission["id"]), what="the overseer agent")
        review = await _queued_review(w, mission)
        await w.parked.poll(mission["id"], 1, claimer="overseer")
        w.tmux("kill-session", "-t", f"={first['session']}")
        escalated = await until(lambda: (d := w.decisions.get(review["id"]))["status"] == "escalated" and d, what="escalation")
        assert "overseer agent is gone" in escalated["rationale"] and escalated["decided_by"] == "overseer:liveness"
        assert w.store.query_one("SELECT state FROM overseer_agents WHERE id = ?", (first["id"],))["state"] == "dead"
        second = await until(lambda: (r := _running(w, mission["id"])) and r["id"] != first["id"] and r, what="a restarted overseer")
        w.tmux("kill-session", "-t", f"={second['session']}")
        stalled = await until(lambda: (m := w.rt.missions.get(mission["id"]))["state"] == "stalled" and m, what="stalled mission")
        assert "died" in stalled["state_reason"]
        assert _running(w, mission["id"]) is None
        assert w.rt.missions.may_dispatch({"id": w.task(mission, agent=False)}) is False


async def test_a_silent_overseer_is_replaced(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, parked={**PARKED, "overseer_silence": 0.6}) as w:
        mission = w.mission(1)
        first = await until(lambda: _running(w, mission["id"]), what="the overseer agent")
        review = await _queued_review(w, mission)  # never polled: the fake screen stays still
        escalated = await until(lambda: (d := w.decisions.get(review["id"]))["status"] == "escalated" and d, what="escalation", timeout=20)
        assert "has not changed" in escalated["rationale"]
        assert w.store.query_one("SELECT state FROM overseer_agents WHERE id = ?", (first["id"],))["state"] == "dead"
        await until(lambda: (r := _running(w, mission["id"])) and r["id"] != first["id"], what="a new overseer")


async def test_pausing_the_mission_stops_its_overseer(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, parked=PARKED) as w:
        mission = w.mission(1)
        agent = await until(lambda: _running(w, mission["id"]), what="the overseer agent")
        w.rt.missions.transition(mission["id"], "pause")
        await until(lambda: _running(w, mission["id"]) is None, what="overseer stopped")
        assert w.store.query_one("SELECT state, end_reason FROM overseer_agents WHERE id = ?", (agent["id"],)) == {
            "state": "stopped",
            "end_reason": "mission paused",
        }
        assert w.tmux("has-session", "-t", f"={agent['session']}").returncode != 0
        assert w.store.query_one("SELECT COUNT(*) AS n FROM tokens WHERE user_id = ?", (agent["user_id"],))["n"] == 0


async def test_an_overseer_cli_that_refuses_to_start_is_reported_with_its_last_words(tmp_path: Path, socket_name: str) -> None:
    refusal = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
    async with world(tmp_path, socket_name, parked={**PARKED, "max_overseer_restarts": 0}, env={"FAKE_REFUSE": refusal}) as w:
        mission = w.mission(1)
        dead = await until(
            lambda: w.store.query_one("SELECT * FROM overseer_agents WHERE mission_id = ? AND state = 'dead'", (mission["id"],)),
            what="the overseer agent's death",
        )
        # tmux reports the exit status a moment after the death, and under load sometimes not
        # within the wait: the status is best effort, the last words are what this test is for
        assert dead["end_reason"] in (f"the overseer CLI exited (status 1): {refusal}", f"the overseer CLI exited: {refusal}"), dead["end_reason"]


async def test_a_queued_decision_whose_mission_went_to_l0_goes_to_a_human(tmp_path: Path, socket_name: str) -> None:
    # no liveness round meanwhile (it would stop the overseer and escalate its queue itself)
    async with world(tmp_path, socket_name, parked={**PARKED, "liveness_interval": 600}) as w:
        mission = w.mission(1)
        review = await _queued_review(w, mission)
        w.rt.missions.update(mission["id"], {"level": 0})
        assert await w.parked.poll(mission["id"], 0.3, claimer="overseer") is None
        escalated = w.decisions.get(review["id"])
        assert escalated["status"] == "escalated" and escalated["decided_by"] == "overseer:parked"
        assert w.parked.queued(mission["id"]) == []

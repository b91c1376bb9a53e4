"""Decision paths as plugins: with none enabled every decision waits for a human (and
``GET /missions`` says so); switching paths live — relay ⇄ parked, with decisions queued and
model calls in flight — loses no decision; disabling and re-enabling ``overseer``,
``overseer-relay`` and ``overseer-parked`` in a running kernel with a live agent works
without a restart. Real kernel, real SQLite, real tmux, the scripted model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.overseer.conftest import MODEL, until, world
from tests.support.model_server import ModelServer, ParsedRequest, Reply

PARKED = {"overseer_exec": "claude:overseer-model", "liveness_interval": 0.1}
APPROVE = json.dumps({"approve": True, "confidence": 0.9, "rationale": "harmless"})


def _chat(server: ModelServer) -> list[ParsedRequest]:
    return [r for r in server.requests if r.api == "chat"]


def _review(w: Any, mission: dict[str, Any]) -> int:
    """Close a new task of ``mission`` (no agent runs it); returns the task id."""
    task_id = w.task(mission, agent=False)
    w.tasks.close(task_id, "done", ["tests pass"])
    return task_id


async def _review_decision(w: Any, task_id: int) -> dict[str, Any]:
    return await until(lambda: (ds := w.decisions.list_decisions(task_id=task_id, kind="review")) and ds[0], what="the review decision")


async def test_no_path_leaves_decisions_pending_and_says_so(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, relay=False) as w:
        mission = w.mission(3)
        review = await _review_decision(w, _review(w, mission))
        prompt = w.decisions.create("prompt", task_id=w.task(mission, agent=False), payload={"request": {"tool": "Bash", "command": "ls"}})
        await w.rt.autopilot.sweep()
        await trio.sleep(0.5)
        assert w.decisions.get(review["id"])["status"] == "pending"
        assert w.decisions.get(prompt["id"])["status"] == "pending"
        status = w.rt.autopilot.status()
        assert status["active"] is None and status["paths"] == [] and status["waiting"] == 2
        assert w.rt.service.decision_path() is None
        # a destructive request still escalates: the rules do not need a path
        rm = w.decisions.create("prompt", task_id=w.task(mission, agent=False), payload={"request": {"tool": "Bash", "command": "rm -rf ~/projects"}})
        assert (await until(lambda: (d := w.decisions.get(rm["id"]))["status"] != "pending" and d, what="escalation"))["decided_by"] == "overseer:rules"
        # a path appears: what waited is decided (L3 with no model approves a review)
        await w.toggle("overseer-relay", True)
        approved = await until(lambda: (d := w.decisions.get(review["id"]))["status"] != "pending" and d, what="the review decided")
        assert approved["status"] == "approved" and approved["decided_by"] == "overseer:policy"
        assert w.rt.autopilot.status()["active"] == "relay"


async def test_switching_paths_with_decisions_in_flight_loses_none(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    slow = {"on": True}

    def script(request: ParsedRequest) -> Reply:
        return Reply(text=APPROVE, delay=30.0 if slow["on"] else 0.0)

    model_server.script = script
    async with world(tmp_path, socket_name, model=model_server, parked=PARKED) as w:
        assert w.rt.autopilot.active_path() == "parked"
        mission = w.mission(1)
        tasks = [_review(w, mission) for _ in range(2)]
        reviews = [await _review_decision(w, t) for t in tasks]
        ids = sorted(r["id"] for r in reviews)
        # parked (priority 10) holds both: queued for the mission's overseer, no model call
        await until(lambda: w.parked.queued(mission["id"]) == ids, what="both queued for the parked overseer")
        assert _chat(model_server) == []
        # parked goes away: both go to the relay, whose model calls hang in flight
        await w.toggle("overseer-parked", False)
        await until(lambda: len(_chat(model_server)) == 2, what="two relay calls in flight")
        assert all(w.decisions.get(i)["status"] == "pending" for i in ids)
        # the relay goes away mid-call: no path, the decisions wait (pending)
        await w.toggle("overseer-relay", False)
        await until(lambda: w.rt.autopilot.status()["waiting"] == 2, what="both waiting for a path")
        assert all(w.decisions.get(i)["status"] == "pending" for i in ids)
        # parked comes back: they are queued for it again
        await w.toggle("overseer-parked", True)
        await until(lambda: w.parked.queued(mission["id"]) == ids, what="both queued again")
        # the relay comes back (parked still wins), then parked leaves: the relay decides both
        slow["on"] = False
        await w.toggle("overseer-relay", True)
        await trio.sleep(0.3)
        assert all(w.decisions.get(i)["status"] == "pending" for i in ids)
        await w.toggle("overseer-parked", False)
        done = [await until(lambda i=i: (d := w.decisions.get(i))["status"] != "pending" and d, what=f"decision {i}") for i in ids]
        assert [d["status"] for d in done] == ["approved", "approved"]
        assert {d["decided_by"] for d in done} == {f"overseer:relay:{MODEL}"}
        assert len(w.decisions.list_decisions(kind="review")) == 2  # nothing duplicated either


async def test_toggling_overseer_and_relay_with_a_live_agent(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    calls = {"n": 0}

    def script(request: ParsedRequest) -> Reply:
        calls["n"] += 1
        return Reply(text=APPROVE, delay=30.0 if calls["n"] == 2 else 0.0)  # the 2nd call hangs

    model_server.script = script
    async with world(tmp_path, socket_name, model=model_server, env={"FAKE_PROMPTS": "3"}) as w:
        await w.toggle("overseer-relay", False)
        task_id = w.task(w.mission(1))
        first = await until(lambda: (ds := w.decisions.list_decisions(task_id=task_id, kind="prompt")) and ds[0], what="the first prompt")
        await trio.sleep(0.5)
        assert w.decisions.get(first["id"])["status"] == "pending" and w.keys() == []
        # relay on: the waiting prompt is approved and the agent gets its key
        await w.toggle("overseer-relay", True)
        await until(lambda: w.keys() == ["1"], what="key 1")
        # the second prompt's model call hangs; disabling the overseer cancels it, the prompt waits
        await until(lambda: calls["n"] == 2, what="the second model call")
        await w.toggle("overseer", False)
        second = [d for d in w.decisions.list_decisions(task_id=task_id, kind="prompt") if d["id"] != first["id"]]
        assert len(second) == 1 and second[0]["status"] == "pending"
        # overseer on again (no restart): its sweep picks the prompt up, the relay approves it
        await w.toggle("overseer", True)
        await until(lambda: w.keys() == ["1", "1"], what="key 2")
        await until(lambda: w.keys() == ["1", "1", "1"], what="key 3")
        assert all(d["status"] == "approved" for d in w.decisions.list_decisions(task_id=task_id, kind="prompt"))


async def test_toggling_parked_restarts_its_overseer_and_keeps_the_queue(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, relay=False, parked=PARKED) as w:
        mission = w.mission(1)
        running = lambda: w.store.query("SELECT * FROM overseer_agents WHERE mission_id = ? AND state = 'running' AND pane_id != ''", (mission["id"],))  # noqa: E731
        [first] = await until(running, what="the overseer agent")
        review = await _review_decision(w, _review(w, mission))
        await until(lambda: w.parked.queued(mission["id"]) == [review["id"]], what="queued")
        await w.toggle("overseer-parked", False)
        assert w.tmux("has-session", "-t", f"={first['session']}").returncode != 0
        assert w.store.query_one("SELECT state FROM overseer_agents WHERE id = ?", (first["id"],))["state"] == "stopped"
        assert w.store.query_one("SELECT COUNT(*) AS n FROM tokens WHERE user_id = ?", (first["user_id"],))["n"] == 0
        assert w.rt.autopilot.status()["waiting"] == 1 and w.decisions.get(review["id"])["status"] == "pending"
        await w.toggle("overseer-parked", True)
        [second] = await until(running, what="a new overseer agent")
        assert second["id"] != first["id"]
        polled = await w.parked.poll(mission["id"], 2, claimer="overseer")
        assert polled["id"] == review["id"] and polled["level"] == "L1"
        from elowen_sdk.services.missions import Proposal

        done = await w.parked.decide(review["id"], Proposal("approve", 0.95, "looks done", "agent:overseer"))
        assert done["status"] == "approved" and done["decided_by"] == "overseer:agent:overseer"


async def test_a_third_party_path_takes_precedence_by_priority(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    """The example plugin of docs/plugins.md ("Writing a decision path"): priority 5 wins over
    the relay (0); its proposals pass the same threshold and destructive rules."""
    async with world(tmp_path, socket_name, model=model_server, modules=("tests.overseer.allowlist_path.plugin",)) as w:
        assert [p["name"] for p in w.rt.autopilot.status()["paths"]] == ["allowlist", "relay"]
        task_id = w.task(w.mission(1), agent=False)
        listed = w.decisions.create("prompt", task_id=task_id, payload={"request": {"tool": "Bash", "command": "pytest -q"}})
        other = w.decisions.create("prompt", task_id=task_id, payload={"request": {"tool": "Bash", "command": "make deploy"}})
        rm = w.decisions.create("prompt", task_id=task_id, payload={"request": {"tool": "Bash", "command": "rm -rf ~/projects"}})
        first, second, third = [
            await until(lambda i=d["id"]: (x := w.decisions.get(i))["status"] != "pending" and x, what=f"decision {d['id']}") for d in (listed, other, rm)
        ]
        # approved by the path, but no agent pane to send keys to: escalated with its rationale recorded
        assert first["decided_by"] == "overseer:allowlist" and "could not be carried out" in first["rationale"]
        assert second["status"] == "escalated" and second["rationale"] == "not on the allow-list"
        assert third["decided_by"] == "overseer:rules"
        assert not _chat(model_server)
        await w.toggle("allowlist-path", False)
        assert w.rt.autopilot.active_path() == "relay"

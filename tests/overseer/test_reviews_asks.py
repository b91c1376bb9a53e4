"""Reviews of closed tasks (bounded reopenings) and agent Q&A, through the relay with the
scripted model server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elowen_builtins.overseer.asks import ask_record, create_ask
from tests.overseer.conftest import MODEL, until, verdict_script, world
from tests.support.model_server import ModelServer

REJECT = {"approve": False, "confidence": 0.9, "rationale": "no evidence", "note": "run the tests and attach their output"}


async def _review(w: Any, task_id: int, n: int) -> dict[str, Any]:
    reviews = await until(
        lambda: (r := w.decisions.list_decisions(task_id=task_id, kind="review")) and len(r) >= n and r[n - 1]["status"] != "pending" and r, what=f"review {n}"
    )
    return reviews[n - 1]


async def test_review_rejection_reopens_at_most_n_times(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    model_server.script = verdict_script(REJECT)
    async with world(tmp_path, socket_name, model=model_server, overseer={"max_review_rejections": 2}) as w:
        task_id = w.task(w.mission(2), agent=False)
        for n in (1, 2):
            w.tasks.close(task_id, f"done {n}", [])
            review = await _review(w, task_id, n)
            assert review["status"] == "rejected" and review["confidence"] == 0.9
            task = await until(lambda: (t := w.tasks.get(task_id))["state"] == "open" and t, what="reopened")
            assert "run the tests and attach their output" in task["resume_note"]
            assert w.rt.reviews.rejections(task_id) == n
        w.tasks.close(task_id, "done 3", [])
        third = await _review(w, task_id, 3)
        assert third["status"] == "escalated" and "used up" in third["rationale"]
        assert w.tasks.get(task_id)["state"] == "closed"
        # a human rejecting from the inbox still reopens it (a human is in the loop)
        await w.decisions.decide(third["id"], "reject", rationale="add a changelog entry", decided_by="user:1")
        task = await until(lambda: (t := w.tasks.get(task_id))["state"] == "open" and t, what="reopened by a human")
        assert "add a changelog entry" in task["resume_note"]
        payload = [r.body for r in model_server.requests if r.api == "chat"][0]
        assert "done 1" in payload["messages"][1]["content"]


async def test_review_that_cannot_complete_escalates_and_approval_keeps_it_closed(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    model_server.script = verdict_script("the model rambles without any object")
    async with world(tmp_path, socket_name, model=model_server) as w:
        mission = w.mission(1)
        task_id = w.task(mission, agent=False)
        w.tasks.close(task_id, "done", ["log.txt"])
        review = await _review(w, task_id, 1)
        assert review["status"] == "escalated" and w.rt.reviews.rejections(task_id) == 0
        assert w.tasks.get(task_id)["state"] == "closed"
        model_server.script = verdict_script({"approve": True, "confidence": 0.95, "rationale": "evidence shows it", "note": ""})
        other = w.task(mission, agent=False)
        w.tasks.close(other, "done", ["pytest: 12 passed"])
        approved = await _review(w, other, 1)
        assert approved["status"] == "approved" and approved["decided_by"] == f"overseer:relay:{MODEL}"
        assert w.tasks.get(other)["state"] == "closed"


async def test_ask_answered_by_the_autopilot_or_escalated_then_answered_by_a_human(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    model_server.script = verdict_script({"answer": "Use Python 3.11.", "confidence": 0.92, "rationale": "the project pins 3.11"})
    async with world(tmp_path, socket_name, model=model_server) as w:
        ap = w.rt.autopilot
        task_id = w.task(w.mission(1), agent=False)
        w.tasks.progress(task_id, "set up the venv", author="agent")
        ask = create_ask(ap, question="Which Python version?", task_id=task_id, asker="agent:task:1", history=True)
        assert ask["status"] == "pending"
        await ap.wait_decided(ask["id"], 10, lambda: w.decisions.get(ask["id"])["status"] == "pending")
        answered = ask_record(w.decisions.get(ask["id"]))
        assert answered["status"] == "answered" and answered["answer"] == "Use Python 3.11." and answered["confidence"] == 0.92
        assert "set up the venv" in model_server.requests[-1].body["messages"][1]["content"]
        # not sure enough → a human answers from the inbox
        model_server.script = verdict_script({"answer": "Maybe MIT?", "confidence": 0.4, "rationale": "guess"})
        ask2 = create_ask(ap, question="Which license?", task_id=task_id, asker="agent:task:1")
        escalated = await until(lambda: (d := w.decisions.get(ask2["id"]))["status"] == "escalated" and d, what="escalated ask")
        assert "below the L1 threshold" in escalated["rationale"]
        await w.decisions.decide(ask2["id"], "answer", text="Apache-2.0", decided_by="user:1")
        await ap.wait_decided(ask2["id"], 5, lambda: w.decisions.get(ask2["id"])["status"] == "escalated")
        assert ask_record(w.decisions.get(ask2["id"]))["answer"] == "Apache-2.0"

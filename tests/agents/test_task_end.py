"""An agent whose task is cancelled or deleted is ended at once (the ``task.cancelled`` /
``task.deleted`` event), not at the next janitor run (here an hour away)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.agents.test_agents_integration import world
from tests.support.fake_cli import private_tmux_socket
from tests.support.waiting import until

SLOW_JANITOR = {"janitor_interval": 3600.0}


@pytest.fixture
def socket_name() -> Any:
    with private_tmux_socket() as name:
        yield name


@pytest.mark.parametrize("how", ["cancel", "delete"])
async def test_agent_ends_when_its_task_is_cancelled_or_deleted(tmp_path: Path, socket_name: str, how: str) -> None:
    async with world(tmp_path, socket_name, agents=SLOW_JANITOR) as w:
        task_id = w.create_task()
        await until(lambda: w.agents.decisions.list_decisions(task_id=task_id, status="pending") or None, what="agent running")
        name = f"elowen-t{task_id}-a1"
        assert w.tmux("has-session", "-t", f"={name}").returncode == 0
        if how == "cancel":
            w.tasks.cancel(task_id)
        else:
            w.tasks.delete(task_id)
        with trio.fail_after(5):
            while w.tmux("has-session", "-t", f"={name}").returncode == 0:
                await trio.sleep(0.05)
        row = w.store.query_one("SELECT state, end_reason FROM agent_sessions WHERE session = ?", (name,))
        assert row["state"] == "ended" and row["end_reason"] == ("task cancelled" if how == "cancel" else "task deleted")
        assert w.store.query_one("SELECT COUNT(*) AS n FROM tokens WHERE scope = 'agent' AND task_id = ?", (task_id,))["n"] == 0


async def test_events_of_a_deleted_task_keep_its_project(tmp_path: Path, socket_name: str) -> None:
    """After a task is deleted, its agent's later events (``agent.exited``, the expired
    decision's ``decision.decided`` with the prompt in it) used to carry no project, so they
    reached every member; the project kept on the session and decision rows is used now."""
    async with world(tmp_path, socket_name, agents=SLOW_JANITOR) as w:
        task_id = w.create_task()
        [decision] = await until(lambda: w.agents.decisions.list_decisions(task_id=task_id, status="pending") or None, what="a decision")
        mark = w.store.query_one("SELECT MAX(id) AS n FROM events")["n"]
        w.tasks.delete(task_id)
        await until(lambda: w.agents.decisions.get(decision["id"])["status"] == "expired", what="decision expired")
        await until(lambda: w.store.query_one("SELECT 1 AS x FROM events WHERE id > ? AND type = 'agent.exited'", (mark,)), what="agent.exited")
        rows = w.store.query("SELECT type, project_id FROM events WHERE id > ? AND type IN ('agent.exited', 'decision.decided', 'signal')", (mark,))
        assert rows and {r["type"] for r in rows} >= {"agent.exited", "decision.decided"}
        assert all(r["project_id"] == w.project for r in rows), rows
        assert w.store.query_one("SELECT project_id FROM agent_sessions WHERE task_id = ?", (task_id,))["project_id"] == w.project
        assert w.store.query_one("SELECT project_id FROM decisions WHERE id = ?", (decision["id"],))["project_id"] == w.project

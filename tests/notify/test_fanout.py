"""Events → notifications, and who may be notified (RBAC). The decision and brain events are
published on the real event bus with the shapes the agents and brain plugins publish
(docs/plugins.md "Events"); tasks go through the daemon's real task service."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.notify.conftest import until, world


def _decision(did: int, task_id: int, status: str) -> dict[str, object]:
    return {"id": did, "kind": "prompt", "task_id": task_id, "status": status, "payload": {"request": {"tool": "Bash", "command": "rm -rf build"}}}


async def test_a_member_is_never_notified_of_another_members_escalation(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        shared = w.project("shared")
        ada = w.user("ada", projects=(shared,))
        bob = w.user("bob", projects=(shared,))  # sees the project, not ada's things
        root = w.user("root", "admin")
        task = w.task(shared, owner=ada)
        w.kernel.events.publish("decision.decided", {"decision": _decision(7, task["id"], "escalated")}, project_id=shared)
        mine = await until(lambda: w.mine(ada), "ada's notification")
        assert mine[0]["kind"] == "escalation" and mine[0]["title"] == "Decision 7 waits for you" and "rm -rf build" in mine[0]["body"]
        assert [(a["action"], a["command"]) for a in mine[0]["actions"]] == [("approve", None), ("reject", None)]
        await trio.sleep(0.2)
        assert w.mine(bob) == [] and w.mine(root) == []  # root is not in admin_recipients
        # the same escalation again (a replay): no second notification
        w.kernel.events.publish("decision.decided", {"decision": _decision(7, task["id"], "escalated")}, project_id=shared)
        await trio.sleep(0.2)
        assert len(w.mine(ada)) == 1


async def test_owner_who_lost_the_project_and_admin_recipients(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        p = w.project("p")
        ada = w.user("ada", projects=(p,))
        root = w.user("root", "admin")
        carol = w.user("carol")  # a member listed as admin recipient: ignored
        w.rt.fanout.admin_recipients = (root, carol)
        task = w.task(p, owner=ada)
        w.state.users.remove_project(ada, p)
        w.kernel.events.publish("decision.decided", {"decision": _decision(3, task["id"], "escalated")}, project_id=p)
        await until(lambda: w.mine(root), "root notified")
        await trio.sleep(0.2)
        assert w.mine(ada) == [] and w.mine(carol) == []


async def test_a_pending_decision_notifies_after_the_grace_unless_answered(tmp_path: Path) -> None:
    async with world(tmp_path, {"wait_grace": 0.3}) as w:
        p = w.project("p")
        ada = w.user("ada", projects=(p,))
        t = w.task(p, owner=ada)
        w.kernel.events.publish("decision.created", {"decision": _decision(1, t["id"], "pending")}, project_id=p)
        w.kernel.events.publish("decision.created", {"decision": _decision(2, t["id"], "pending")}, project_id=p)
        w.kernel.events.publish("decision.decided", {"decision": _decision(2, t["id"], "approved")}, project_id=p)  # answered in time
        got = await until(lambda: w.mine(ada), "the waiting one notified")
        await trio.sleep(1.5)
        assert [n["title"] for n in w.mine(ada)] == [got[0]["title"]] == ["Decision 1 waits for you"]


async def test_task_closed_blocked_goal_paused_and_approvals(tmp_path: Path) -> None:
    async with world(tmp_path, {"wait_grace": 0.2}) as w:
        p = w.project("p")
        ada = w.user("ada", projects=(p,))
        bob = w.user("bob", projects=(p,))
        t1, t2 = w.task(p, owner=ada, title="Ship it"), w.task(p, owner=ada, title="Fix it")
        w.state.tasks.close(t1["id"], "shipped", ["tests pass"])
        w.state.tasks.update(t2["id"], {"state": "blocked", "resume_note": "needs a key"})
        w.kernel.events.publish(
            "brain.goal",
            {
                "conversation_id": 1,
                "user_id": ada,
                "audience": [ada],
                "event": "paused",
                "goal": {"id": 4, "text": "refactor", "pause_reason": "budget_reached"},
            },
        )
        w.kernel.events.publish(
            "brain.goal", {"conversation_id": 1, "user_id": ada, "audience": [ada], "event": "paused", "goal": {"id": 5, "text": "x", "pause_reason": "user"}}
        )
        approval = {"id": 9, "kind": "approval", "tool": "shell", "arguments": {"command": "make"}, "state": "pending", "user_id": ada}
        w.kernel.events.publish("brain.approval", {"conversation_id": 1, "user_id": ada, "audience": [ada], "approval": approval})
        titles = await until(lambda: (ts := sorted(n["title"] for n in w.mine(ada))) and len(ts) == 4 and ts, "four notifications")
        assert titles == ["Allow shell?", "Goal paused (budget reached)", f"Task {t1['id']} closed: Ship it", f"Task {t2['id']} blocked: Fix it"]
        allow = next(n for n in w.mine(ada) if n["title"] == "Allow shell?")
        assert [a["command"] for a in allow["actions"]] == ["/allow 9", "/reject 9"]
        assert w.mine(bob) == []


async def test_a_plugin_going_to_error_tells_the_admin_recipients(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        root = w.user("root", "admin")
        other = w.user("other", "admin")
        w.rt.fanout.admin_recipients = (root,)
        w.kernel.events.publish("plugin.error", {"name": "discord", "from": "enabled", "error": "gateway closed: 4004 authentication failed"})
        got = await until(lambda: w.mine(root), "root notified")
        assert (got[0]["kind"], got[0]["title"]) == ("platform", "Plugin discord is down") and "4004" in got[0]["body"]
        w.kernel.events.publish("plugin.error", {"name": "discord", "from": "error", "error": "still"})  # already down: no repeat
        await trio.sleep(0.3)
        assert len(w.mine(root)) == 1 and w.mine(other) == []

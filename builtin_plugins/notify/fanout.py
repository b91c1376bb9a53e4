"""Which events notify whom: the proactive fan-out (``on_event``).

======================================  ==========================  ==============================
event                                   notifies (kind)             who
======================================  ==========================  ==============================
``decision.decided`` → ``escalated``    "decision N waits for you"  the task's owner, and each
                                        (``escalation``)            user of ``admin_recipients``
``decision.created``, still pending     same, after ``wait_grace``  same
after ``wait_grace`` s (no decision     seconds
path answered it)
``brain.approval``, still pending after a tool call or question     the conversation's user
``wait_grace`` s                        waits (``escalation``,
                                        Allow / Reject)
``task.closed``                         (``task``)                  the task's owner
``task.updated`` to ``blocked``         (``task``)                  the task's owner
``brain.goal`` ``paused`` (not by the   (``goal``)                  the conversation's user
user)
``plugin.error``                        (``platform``)              ``admin_recipients``
======================================  ==========================  ==============================

**Who may be notified** is checked at the moment of notifying, against the users service: a
person (never an overseer principal), and for a task's thing an admin or a member of the task's
project. A member is never notified of another member's task or decision, even in a shared
project (the owner is); ``admin_recipients`` names admins only (a member there is ignored, with
a warning). Each thing notifies once per user (the outbox's ``ref`` key), so a replayed or
repeated event does not notify twice.

Waiting decisions and approvals are held in memory for ``wait_grace`` seconds: a restart in
that window forgets them (the overseer's sweep escalates an old pending decision again, which
notifies then).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from elowen_sdk.services.notify import NotificationAction

__all__ = ["Fanout"]

log = logging.getLogger("elowen.plugin.notify.fanout")

Create = Callable[..., int]


def _clip(text: Any, n: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _decision_text(decision: Mapping[str, Any]) -> str:
    payload = decision.get("payload") or {}
    request = payload.get("request") if isinstance(payload, dict) else None
    if isinstance(request, dict):
        for key in ("command", "summary", "question", "path", "text"):
            if request.get(key):
                return _clip(request[key], 200)
    if isinstance(payload, dict):
        for key in ("question", "summary", "text"):
            if payload.get(key):
                return _clip(payload[key], 200)
    return _clip(decision.get("rationale") or decision.get("kind") or "", 200)


class Fanout:
    """Turns events into notifications.

    Args:
        create: the notifier's ``create(user_id, kind, title, body, *, url, urgency, actions,
            ref) -> id``.
        users: the users service (``UsersService``) or ``None`` when unavailable.
        tasks: the tasks service (``TasksService``) or ``None``.
        admin_recipients: user ids (admins) told of every escalation and plugin error.
        wait_grace: seconds a pending decision or approval may wait before it notifies.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        create: Create,
        users: Callable[[], Any],
        tasks: Callable[[], Any],
        *,
        admin_recipients: Iterable[int] = (),
        wait_grace: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.create = create
        self.users = users
        self.tasks = tasks
        self.admin_recipients = tuple(int(x) for x in admin_recipients)
        self.wait_grace = wait_grace
        self.clock = clock
        self.waiting: dict[str, tuple[float, Callable[[], None]]] = {}
        """ref → (due, notify): decisions and approvals held for ``wait_grace``."""

    # ------------------------------------------------------------------ who

    def _person(self, user_id: Any) -> dict[str, Any] | None:
        users = self.users()
        if users is None or not isinstance(user_id, int):
            return None
        user = users.user(user_id)
        if user is None or user.get("kind", "person") != "person":
            return None
        return dict(user)

    def may_see_project(self, user_id: Any, project_id: Any) -> bool:
        """Whether ``user_id`` is a person who may see things of ``project_id``."""
        user = self._person(user_id)
        if user is None:
            return False
        return user["role"] == "admin" or (project_id is not None and int(project_id) in (user.get("projects") or ()))

    def admins(self) -> list[int]:
        """``admin_recipients`` that are admins now."""
        out = []
        for uid in self.admin_recipients:
            user = self._person(uid)
            if user is not None and user["role"] == "admin":
                out.append(uid)
            else:
                log.warning("admin_recipients: user %s is not an admin person; not notified", uid)
        return out

    def task_people(self, task_id: Any) -> tuple[dict[str, Any] | None, list[int]]:
        """The task's summary (``{"id", "project_id", "state", "owner_id"}``) and its owner, if
        they may still see it."""
        tasks = self.tasks()
        if tasks is None or not isinstance(task_id, int):
            return None, []
        info = tasks.exists(task_id)
        if info is None:
            return None, []
        owner = info.get("owner_id")
        return info, [owner] if owner is not None and self.may_see_project(owner, info.get("project_id")) else []

    # ------------------------------------------------------------------ events

    def on_event(self, type_: str, data: Mapping[str, Any]) -> None:
        """Handle one event (see the module docstring)."""
        if type_ == "decision.created":
            decision = data.get("decision") or {}
            if decision.get("status") == "pending" and isinstance(decision.get("id"), int):
                ref = f"decision:{decision['id']}"
                self.waiting[ref] = (self.clock() + self.wait_grace, lambda: self.escalation(decision))
        elif type_ == "decision.decided":
            decision = data.get("decision") or {}
            self.waiting.pop(f"decision:{decision.get('id')}", None)
            if decision.get("status") == "escalated":
                self.escalation(decision)
        elif type_ == "brain.approval":
            record = data.get("approval") or {}
            if record.get("state", "pending") == "pending" and isinstance(record.get("id"), int):
                user = data.get("user_id", record.get("user_id"))
                self.waiting[f"approval:{record['id']}"] = (self.clock() + self.wait_grace, lambda: self.approval(user, record))
        elif type_ == "brain.approval_decided":
            self.waiting.pop(f"approval:{(data.get('approval') or {}).get('id')}", None)
        elif type_ == "task.closed":
            self.task_news(data.get("task") or {}, "closed")
        elif type_ == "task.updated":
            task = data.get("task") or {}
            if "state" in (data.get("changed") or ()) and task.get("state") == "blocked":
                self.task_news(task, "blocked")
        elif type_ == "brain.goal":
            if data.get("event") == "paused":
                self.goal_paused(data.get("user_id"), data.get("goal") or {})
        elif type_ == "plugin.error":
            self.plugin_error(data)

    def sweep(self) -> int:
        """Notify the held decisions and approvals whose grace ran out; returns how many."""
        now = self.clock()
        due = [ref for ref, (at, _) in self.waiting.items() if at <= now]
        for ref in due:
            _, fire = self.waiting.pop(ref)
            try:
                fire()
            except Exception:
                log.exception("notifying %s failed", ref)
        return len(due)

    # ------------------------------------------------------------------ what

    def escalation(self, decision: Mapping[str, Any]) -> None:
        did = decision.get("id")
        info, people = self.task_people(decision.get("task_id"))
        recipients = dict.fromkeys([*people, *self.admins()])
        what = _decision_text(decision)
        task = f"task {info['id']}" if info else "an agent"
        for uid in recipients:
            self.create(
                uid,
                "escalation",
                f"Decision {did} waits for you",
                f"{decision.get('kind', 'decision')} from {task}: {what}".strip(),
                url="/escalations",
                urgency="high",
                # no chat command answers an agent's decision: the buttons open the inbox
                actions=(NotificationAction("approve", "Allow"), NotificationAction("reject", "Reject")),
                ref=f"decision:{did}",
            )

    def approval(self, user_id: Any, record: Mapping[str, Any]) -> None:
        if self._person(user_id) is None:
            return
        aid = record.get("id")
        if record.get("kind") == "question":
            title, body = "Elowen asks you something", _clip(record.get("question"), 300)
            actions: tuple[NotificationAction, ...] = ()
        else:
            title = f"Allow {record.get('tool') or 'a tool call'}?"
            body = _clip(record.get("question") or record.get("arguments") or "", 300)
            actions = (NotificationAction("approve", "Allow", f"/allow {aid}"), NotificationAction("reject", "Reject", f"/reject {aid}"))
        self.create(user_id, "escalation", title, body, url="/escalations", urgency="high", actions=actions, ref=f"approval:{aid}")

    def task_news(self, task: Mapping[str, Any], what: str) -> None:
        tid = task.get("id")
        _, people = self.task_people(tid)
        if what == "closed":
            body = _clip(task.get("summary") or task.get("title"), 300)
        else:
            body = _clip(task.get("resume_note") or task.get("title"), 300)
        for uid in people:
            self.create(
                uid,
                "task",
                f"Task {tid} {what}: {_clip(task.get('title'), 60)}",
                body,
                url=f"/tasks/{tid}",
                urgency="normal" if what == "closed" else "high",
                ref=f"task:{tid}:{what}:{task.get('updated_at', '')}",
            )

    def goal_paused(self, user_id: Any, goal: Mapping[str, Any]) -> None:
        reason = goal.get("pause_reason") or ""
        if reason == "user" or self._person(user_id) is None:
            return  # the user paused it themselves
        extra = f": {goal['blocked_reason']}" if reason == "blocked" and goal.get("blocked_reason") else ""
        self.create(
            user_id,
            "goal",
            f"Goal paused ({reason.replace('_', ' ') or 'paused'})",
            _clip(f"{goal.get('text', '')}{extra}", 300) + " — /goal resume to go on.",
            url="/",
            urgency="normal",
            ref=f"goal:{goal.get('id')}:paused:{goal.get('updated_at', '')}",
        )

    def plugin_error(self, data: Mapping[str, Any]) -> None:
        name, error = data.get("name"), _clip(data.get("error"), 300)
        if data.get("from") == "error" or not name:
            return
        for uid in self.admins():
            self.create(uid, "platform", f"Plugin {name} is down", error or "it went to state error", url="/settings", urgency="normal", ref=None)

"""Missions: tasks grouped under one autonomy level, and the dispatch rule the agents
scheduler asks about.

A mission record::

    {"id", "name", "project_id", "level": 0..3, "state": "active"|"paused"|"stalled"|"disengaged",
     "state_reason", "max_sessions", "overseer_restarts", "owner_id", "created_at",
     "updated_at", "task_ids": [int], "running": int}

State changes (``POST /missions/{id}/<verb>``)::

    engage      paused | disengaged        -> active   (restart counter reset)
    resume      paused | stalled           -> active   (restart counter reset)
    pause       active | stalled           -> paused
    disengage   any but disengaged         -> disengaged
    (Elowen)    active                     -> stalled  (a task blocked, the overseer kept dying)

Every change publishes ``mission.created`` / ``mission.updated`` (data ``{"mission": {...}}``)
with the mission's project. All methods are synchronous (the store's trio-thread connection).

The overseer owns ``missions`` and ``mission_tasks``; what it needs of tasks and projects (does a
task exist, in which project, how many are running) it asks the daemon's ``tasks`` service.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from elowen_sdk import ElowenError
from elowen_sdk.services.tasks import TasksService
from elowen_sdk.store import utc_iso

__all__ = [
    "MAX_NAME",
    "MAX_REASON",
    "MAX_SESSIONS",
    "MISSION_STATES",
    "TRANSITIONS",
    "MissionConflict",
    "MissionError",
    "MissionNotFound",
    "MissionStore",
    "utc_iso",
]

log = logging.getLogger("elowen.plugin.overseer")

MAX_SESSIONS = 10_000
"""The largest ``max_sessions`` a mission may have (0 = no limit)."""
MAX_NAME = 200
"""Characters of a mission name at most."""
MAX_REASON = 2000
"""Characters of a state-change reason at most."""
MISSION_STATES = ("active", "stalled", "paused", "disengaged")
TRANSITIONS: Mapping[str, tuple[frozenset[str], str]] = {
    "engage": (frozenset({"paused", "disengaged"}), "active"),
    "resume": (frozenset({"paused", "stalled"}), "active"),
    "pause": (frozenset({"active", "stalled"}), "paused"),
    "disengage": (frozenset({"active", "stalled", "paused"}), "disengaged"),
}
"""verb → (states it applies to, the state it leads to)."""

_COLUMNS = "id, name, project_id, level, state, state_reason, max_sessions, overseer_restarts, owner_id, created_at, updated_at"


class MissionError(ElowenError):
    """Base of mission errors; ``status`` and ``code`` map to the HTTP answer."""

    status = 422
    code = "validation_error"


class MissionNotFound(MissionError, LookupError):
    status = 404
    code = "not_found"


class MissionConflict(MissionError):
    status = 409
    code = "conflict"


def _name(value: Any) -> str:
    """A mission name, stripped. Raises :class:`MissionError`: empty, longer than
    :data:`MAX_NAME`, or holding control characters."""
    name = str(value).strip()
    if not name:
        raise MissionError("name must not be empty")
    if len(name) > MAX_NAME:
        raise MissionError(f"name must be at most {MAX_NAME} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise MissionError("name must not contain control characters")
    return name


class MissionStore:
    """Reads and writes ``missions`` / ``mission_tasks``.

    Args:
        store: the kernel store.
        publish: ``publish(type, data, project_id)``.
        tasks: returns the ``tasks`` service (raises ``LookupError`` while it is not offered).
    """

    def __init__(self, store: Any, publish: Callable[..., Any], tasks: Callable[[], TasksService]) -> None:
        self.store = store
        self._publish = publish
        self._tasks = tasks

    def _ledger(self) -> TasksService:
        """The tasks service. Raises :class:`MissionConflict` (409) while it is not offered."""
        try:
            return self._tasks()
        except LookupError:
            raise MissionConflict("the tasks service is not available") from None

    # ------------------------------------------------------------------ reading

    def get(self, mission_id: int) -> dict[str, Any]:
        """The mission record. Raises :class:`MissionNotFound`."""
        row = self.store.query_one(f"SELECT {_COLUMNS} FROM missions WHERE id = ?", (mission_id,))
        if row is None:
            raise MissionNotFound(f"mission {mission_id} not found")
        return self._record(row)

    def list_missions(self, *, state: str | None = None, after: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Missions by ascending id."""
        where, params = ["1 = 1"], []
        if state is not None:
            where.append("state = ?")
            params.append(state)
        if after is not None:
            where.append("id > ?")
            params.append(after)
        params.append(limit)
        rows = self.store.query(f"SELECT {_COLUMNS} FROM missions WHERE {' AND '.join(where)} ORDER BY id LIMIT ?", params)
        return [self._record(r) for r in rows]

    def _record(self, row: dict[str, Any]) -> dict[str, Any]:
        row["task_ids"] = [r["task_id"] for r in self.store.query("SELECT task_id FROM mission_tasks WHERE mission_id = ? ORDER BY task_id", (row["id"],))]
        row["running"] = self.running(row["id"])
        return row

    def progress(self, mission: Mapping[str, Any]) -> dict[str, int] | None:
        """How far ``mission`` (a record, with ``task_ids``) is: ``{"total", "done" (closed),
        "cancelled", "open" (every other state)}`` task counts; ``None`` while the tasks
        service is not offered."""
        ids = [int(t) for t in mission.get("task_ids") or []]
        try:
            ledger = self._tasks()
        except LookupError:
            return None
        done = ledger.count(ids, state="closed") if ids else 0
        cancelled = ledger.count(ids, state="cancelled") if ids else 0
        return {"total": len(ids), "done": done, "cancelled": cancelled, "open": len(ids) - done - cancelled}

    def of_task(self, task_id: int | None) -> dict[str, Any] | None:
        """The mission ``task_id`` belongs to, or ``None``."""
        if task_id is None:
            return None
        row = self.store.query_one(
            f"SELECT {', '.join('m.' + c.strip() for c in _COLUMNS.split(','))} FROM missions m "
            "JOIN mission_tasks t ON t.mission_id = m.id WHERE t.task_id = ?",
            (task_id,),
        )
        return self._record(row) if row else None

    def running(self, mission_id: int) -> int:
        """Tasks of the mission that are ``in_progress`` now (the durable session count; 0
        while the tasks service is not offered: then no task runs)."""
        ids = [r["task_id"] for r in self.store.query("SELECT task_id FROM mission_tasks WHERE mission_id = ?", (mission_id,))]
        if not ids:
            return 0
        try:
            tasks = self._tasks()
        except LookupError:
            return 0
        return tasks.count(ids, state="in_progress")

    # ------------------------------------------------------------------ the dispatch rule

    def may_dispatch(self, task: Mapping[str, Any]) -> bool:
        """Whether the agents scheduler may start an agent on ``task`` (a task record, needs
        ``"id"``) now.

        A task in no mission, or in a ``disengaged`` one, is not the overseer's business:
        ``True``. Otherwise only an ``active`` mission above L0 dispatches, and only while fewer
        than ``max_sessions`` of its tasks are ``in_progress`` (0 = no limit). The count is
        asked of the tasks service, so it is exact across restarts.
        """
        mission = self.of_task(int(task["id"])) or self._from_label(task)
        if mission is None or mission["state"] == "disengaged":
            return True
        if mission["state"] != "active" or mission["level"] == 0:
            return False
        limit = int(mission["max_sessions"])
        return limit == 0 or mission["running"] < limit

    def _from_label(self, task: Mapping[str, Any]) -> dict[str, Any] | None:
        """A task created with the label ``mission:<id>`` joins that mission the first time the
        scheduler sees it — so a task is in its mission before it can ever be dispatched
        (creating it, then adding it with ``POST /missions/{id}/tasks``, leaves a moment in
        which an L1–L3 scheduler tick could start it)."""
        for label in task.get("labels") or ():
            if isinstance(label, str) and label.startswith("mission:") and label[8:].isdigit():
                try:
                    self.add_tasks(int(label[8:]), [int(task["id"])])
                except Exception as exc:  # unknown mission, other project: not a member
                    log.warning("task %s: label %s not applied: %s", task.get("id"), label, exc)
                    return None
                return self.of_task(int(task["id"]))
        return None

    # ------------------------------------------------------------------ writing

    def create(
        self,
        *,
        name: str,
        level: int,
        project_id: int | None = None,
        max_sessions: int = 0,
        task_ids: Iterable[int] = (),
        owner_id: int | None = None,
        engage: bool = False,
    ) -> dict[str, Any]:
        """Create a mission (``paused``, or ``active`` with ``engage``) holding ``task_ids``.

        Raises:
            MissionError: an empty name, one longer than :data:`MAX_NAME` or with control
                characters, a bad level or max_sessions.
            MissionNotFound: a task or the project does not exist.
            MissionConflict: a task already belongs to another mission, or is in another project.
        """
        name = _name(name)
        if level not in (0, 1, 2, 3) or not 0 <= max_sessions <= MAX_SESSIONS:
            raise MissionError(f"level must be 0..3 and max_sessions in 0..{MAX_SESSIONS}")
        now = utc_iso()
        with self.store.transaction():
            if project_id is not None and self._ledger().project(project_id) is None:
                raise MissionNotFound(f"project {project_id} not found")
            mission_id = self.store.execute(
                "INSERT INTO missions (name, project_id, level, state, max_sessions, owner_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (name.strip(), project_id, level, "active" if engage else "paused", max_sessions, owner_id, now, now),
            )
            self._add_tasks(mission_id, project_id, task_ids, now)
        mission = self.get(mission_id)
        self._publish("mission.created", {"mission": mission}, project_id)
        return mission

    def add_tasks(self, mission_id: int, task_ids: Iterable[int]) -> dict[str, Any]:
        """Add tasks to a mission. Raises like :meth:`create`."""
        mission = self.get(mission_id)
        with self.store.transaction():
            self._add_tasks(mission_id, mission["project_id"], task_ids, utc_iso())
        return self._changed(mission_id)

    def remove_task(self, mission_id: int, task_id: int) -> dict[str, Any]:
        """Take a task out of a mission. Raises :class:`MissionNotFound`."""
        self.get(mission_id)
        if not self.store.execute("DELETE FROM mission_tasks WHERE mission_id = ? AND task_id = ?", (mission_id, task_id)):
            raise MissionNotFound(f"task {task_id} is not in mission {mission_id}")
        return self._changed(mission_id)

    def _add_tasks(self, mission_id: int, project_id: int | None, task_ids: Iterable[int], now: str) -> None:
        for task_id in sorted(set(int(t) for t in task_ids)):
            task = self._ledger().exists(task_id)
            if task is None:
                raise MissionNotFound(f"task {task_id} not found")
            if project_id is not None and task["project_id"] != project_id:
                raise MissionConflict(f"task {task_id} is in project {task['project_id']}, not the mission's project {project_id}")
            other = self.store.query_one("SELECT mission_id FROM mission_tasks WHERE task_id = ?", (task_id,))
            if other is not None and other["mission_id"] != mission_id:
                raise MissionConflict(f"task {task_id} already belongs to mission {other['mission_id']}")
            self.store.execute("INSERT OR IGNORE INTO mission_tasks (task_id, mission_id, added_at) VALUES (?, ?, ?)", (task_id, mission_id, now))

    def update(self, mission_id: int, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change ``name``, ``level`` (0..3) or ``max_sessions``; takes effect at once.

        Raises:
            MissionNotFound, MissionError: an unknown field or a bad value.
        """
        unknown = set(changes) - {"name", "level", "max_sessions"}
        if unknown:
            raise MissionError(f"cannot change {', '.join(sorted(unknown))}")
        self.get(mission_id)
        sets: dict[str, Any] = {}
        if "name" in changes:
            sets["name"] = _name(changes["name"])
        if "level" in changes:
            if changes["level"] not in (0, 1, 2, 3) or isinstance(changes["level"], bool):
                raise MissionError("level must be 0..3")
            sets["level"] = changes["level"]
        if "max_sessions" in changes:
            value = changes["max_sessions"]
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SESSIONS:
                raise MissionError(f"max_sessions must be an integer in 0..{MAX_SESSIONS}")
            sets["max_sessions"] = value
        if sets:
            sets["updated_at"] = utc_iso()
            self.store.execute(f"UPDATE missions SET {', '.join(k + ' = ?' for k in sets)} WHERE id = ?", (*sets.values(), mission_id))
        return self._changed(mission_id, sorted(sets))

    def transition(self, mission_id: int, verb: str, *, reason: str | None = None) -> dict[str, Any]:
        """Apply ``verb`` (engage, resume, pause, disengage; see the module docstring).

        Raises:
            MissionNotFound, MissionError (unknown verb), MissionConflict (not from this state).
        """
        if verb not in TRANSITIONS:
            raise MissionError(f"unknown mission action {verb!r}")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
            raise MissionError(f"reason must be text of at most {MAX_REASON} characters")
        allowed, target = TRANSITIONS[verb]
        mission = self.get(mission_id)
        if mission["state"] not in allowed:
            raise MissionConflict(f"mission {mission_id} is {mission['state']}; cannot {verb} it")
        reset = ", overseer_restarts = 0" if target == "active" else ""
        self.store.execute(
            f"UPDATE missions SET state = ?, state_reason = ?, updated_at = ?{reset} WHERE id = ?",
            (target, reason, utc_iso(), mission_id),
        )
        return self._changed(mission_id, ["state"])

    def stall(self, mission_id: int, reason: str) -> dict[str, Any] | None:
        """``active`` → ``stalled`` (frozen until a human resumes it); ``None`` if it was not
        active. A reason longer than :data:`MAX_REASON` is cut."""
        reason = reason[:MAX_REASON]
        if not self.store.execute(
            "UPDATE missions SET state = 'stalled', state_reason = ?, updated_at = ? WHERE id = ? AND state = 'active'",
            (reason, utc_iso(), mission_id),
        ):
            return None
        log.warning("mission %s stalled: %s", mission_id, reason)
        return self._changed(mission_id, ["state"])

    def count_restart(self, mission_id: int) -> int:
        """Add one to the mission's overseer restart counter; returns the new value."""
        self.store.execute("UPDATE missions SET overseer_restarts = overseer_restarts + 1 WHERE id = ?", (mission_id,))
        row = self.store.query_one("SELECT overseer_restarts FROM missions WHERE id = ?", (mission_id,))
        return int(row["overseer_restarts"]) if row else 0

    def _changed(self, mission_id: int, changed: list[str] | None = None) -> dict[str, Any]:
        mission = self.get(mission_id)
        self._publish("mission.updated", {"mission": mission, "changed": changed or []}, mission["project_id"])
        return mission

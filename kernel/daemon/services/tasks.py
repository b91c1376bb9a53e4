"""Tasks: states, transitions, dependencies, labels, progress — and their events.

The service is the one place that changes tasks; the REST routes call it after checking who
may act, and plugins reach it as the kernel service ``"tasks"`` (``ctx.service(TasksService)``, capability
``service:tasks``; contract :class:`elowen_sdk.services.TasksService`). The errors are the
SDK's (:mod:`elowen_sdk.errors`), re-exported here.

States and allowed transitions (``PATCH state`` or the dedicated calls)::

    open        -> in_progress | blocked | closed | cancelled
    in_progress -> open | blocked | closed | cancelled
    blocked     -> open | in_progress | closed | cancelled
    closed      -> open            (reopen)
    cancelled   -> open            (reopen)

A task is *ready* when it is ``open`` and every task it depends on is ``closed``.
Dependencies form a DAG: an edge that would close a cycle is refused (:class:`TaskConflict`).

Every change publishes an event with the task's ``project_id``, after its transaction
committed: ``task.created``, ``task.updated``, ``task.closed``, ``task.cancelled`` (data
``{"id": N, "task": {...}, "changed": [field, ...]}``), ``task.progress`` (``{"id": N,
"progress": {...}}``) and ``task.deleted`` (``{"id": N}``).

All methods are synchronous and run on the trio thread (the store's connection).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from elowen.core.events import EventBus
from elowen.core.store import Store, utc_iso
from elowen_sdk.errors import TaskConflict, TaskError, TaskNotFound
from elowen_sdk.services.executors import ExecError, ExecutorsUnavailable, ResolvedExec

__all__ = [
    "STATES",
    "TRANSITIONS",
    "TaskConflict",
    "TaskError",
    "TaskNotFound",
    "TaskService",
]

STATES = ("open", "in_progress", "blocked", "closed", "cancelled")
TRANSITIONS: Mapping[str, frozenset[str]] = {
    "open": frozenset({"in_progress", "blocked", "closed", "cancelled"}),
    "in_progress": frozenset({"open", "blocked", "closed", "cancelled"}),
    "blocked": frozenset({"open", "in_progress", "closed", "cancelled"}),
    "closed": frozenset({"open"}),
    "cancelled": frozenset({"open"}),
}
EDITABLE = frozenset({"title", "description", "priority", "labels", "deps", "exec", "state", "resume_note", "attempts"})

_COLUMNS = (
    "id, title, description, project_id, state, priority, parent_id, exec, owner_id, attempts, "
    "resume_note, summary, evidence, created_at, updated_at, closed_at"
)


Resolver = Callable[[str | None], ResolvedExec]


class TaskService:
    """Create, read, change and delete tasks (implements
    :class:`elowen_sdk.services.TasksService`).

    Args:
        store: the kernel store.
        events: the event bus.
        resolve_exec: ``spec -> ResolvedExec`` (raises ``ExecError``; the daemon asks the
            ``executors`` service, :func:`elowen.daemon.state.executors_of`); it also fills
            ``exec_resolved`` in task records (``None`` when the spec does not resolve now, and
            ``exec_error`` ``{"code", "message"}`` then says why the task waits).
    """

    def __init__(self, store: Store, events: EventBus, resolve_exec: Resolver) -> None:
        self.store = store
        self.events = events
        self.resolve_exec = resolve_exec

    # ------------------------------------------------------------------ reading

    def get(self, task_id: int) -> dict[str, Any]:
        """The task record (see ``docs/api.md``).

        Raises:
            TaskNotFound: no such task.
        """
        rows = self._fetch(f"SELECT {_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        if not rows:
            raise TaskNotFound(f"task {task_id} not found")
        return rows[0]

    def exists(self, task_id: int) -> dict[str, Any] | None:
        """``{"id", "project_id", "state", "owner_id"}`` of a task, or ``None``."""
        return self.store.query_one("SELECT id, project_id, state, owner_id FROM tasks WHERE id = ?", (task_id,))

    def count(self, task_ids: Iterable[int], *, state: str | None = None) -> int:
        """How many of ``task_ids`` exist (in ``state`` when given). Raises ``ValueError``: an
        unknown state."""
        if state is not None and state not in STATES:
            raise ValueError(f"unknown state {state!r}")
        ids = sorted({int(t) for t in task_ids})
        total = 0
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            sql = f"SELECT COUNT(*) AS n FROM tasks WHERE id IN ({', '.join('?' * len(chunk))})"
            params: list[Any] = list(chunk)
            if state is not None:
                sql += " AND state = ?"
                params.append(state)
            row = self.store.query_one(sql, params)
            total += int(row["n"]) if row else 0
        return total

    def project(self, project_id: int) -> dict[str, Any] | None:
        """``{"id", "name", "path"}`` of a project, or ``None``."""
        return self.store.query_one("SELECT id, name, path FROM projects WHERE id = ?", (project_id,))

    def projects(self) -> list[dict[str, Any]]:
        """Every project ``{"id", "name", "path"}``, by id."""
        return self.store.query("SELECT id, name, path FROM projects ORDER BY id")

    def project_path(self, task_id: int) -> str | None:
        """The folder of the task's project, or ``None`` (no such task)."""
        row = self.store.query_one("SELECT p.path FROM tasks t JOIN projects p ON p.id = t.project_id WHERE t.id = ?", (task_id,))
        return str(row["path"]) if row else None

    def list_tasks(
        self,
        *,
        state: str | None = None,
        project_id: int | None = None,
        label: str | None = None,
        visible_projects: Collection[int] | None = None,
        after: int | None = None,
        limit: int = 50,
        descending: bool = False,
        **filters: Any,
    ) -> list[dict[str, Any]]:
        """Tasks by ascending id after id ``after`` (``descending``: newest first, ids below
        ``after``), at most ``limit``.

        ``state`` may also be ``"ready"``. ``visible_projects``: only tasks of these projects
        (``None``: all). ``filters``: ``priority``, ``owner_id``, ``mission`` (label
        ``mission:<id>``), ``q`` (text in title or description) — see :meth:`counts`.
        """
        where, params = ["1 = 1"], []
        if not self._filter(where, params, filters):
            return []
        if state == "ready":
            where.append(
                "state = 'open' AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks x ON x.id = d.dep_id WHERE d.task_id = tasks.id AND x.state <> 'closed')"
            )
        elif state is not None:
            where.append("state = ?")
            params.append(state)
        if project_id is not None:
            where.append("project_id = ?")
            params.append(project_id)
        if label is not None:
            where.append("EXISTS (SELECT 1 FROM task_labels l WHERE l.task_id = tasks.id AND l.label = ?)")
            params.append(label)
        if visible_projects is not None:
            ids = sorted(int(p) for p in visible_projects)
            if not ids:
                return []
            where.append(f"project_id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        if after is not None:
            where.append("id < ?" if descending else "id > ?")
            params.append(after)
        params.append(limit)
        order = "DESC" if descending else "ASC"
        return self._fetch(f"SELECT {_COLUMNS} FROM tasks WHERE {' AND '.join(where)} ORDER BY id {order} LIMIT ?", params)

    @staticmethod
    def _filter(where: list[str], params: list[Any], filters: Mapping[str, Any]) -> bool:
        """Add the optional filters to a query; ``False`` when one can match nothing."""
        unknown = set(filters) - {"priority", "owner_id", "mission", "q"}
        if unknown:
            raise TypeError(f"unknown task filters: {sorted(unknown)}")
        if filters.get("priority") is not None:
            where.append("priority = ?")
            params.append(int(filters["priority"]))
        if filters.get("owner_id") is not None:
            where.append("owner_id = ?")
            params.append(int(filters["owner_id"]))
        if filters.get("mission") is not None:
            where.append("EXISTS (SELECT 1 FROM task_labels l WHERE l.task_id = tasks.id AND l.label = ?)")
            params.append(f"mission:{int(filters['mission'])}")
        if filters.get("q"):
            text = str(filters["q"]).lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("(lower(title) LIKE ? ESCAPE '\\' OR lower(description) LIKE ? ESCAPE '\\')")
            params.extend([f"%{text}%", f"%{text}%"])
        return True

    def counts(
        self,
        *,
        project_id: int | None = None,
        label: str | None = None,
        visible_projects: Collection[int] | None = None,
        **filters: Any,
    ) -> dict[str, int]:
        """How many tasks are in each state (every state present, 0 included), with the same
        filters as :meth:`list_tasks` (``priority``, ``owner_id``, ``mission``, ``q``). One
        ``GROUP BY`` query over the ``tasks_state`` index."""
        out = dict.fromkeys(STATES, 0)
        where, params = ["1 = 1"], []
        self._filter(where, params, filters)
        if project_id is not None:
            where.append("project_id = ?")
            params.append(project_id)
        if label is not None:
            where.append("EXISTS (SELECT 1 FROM task_labels l WHERE l.task_id = tasks.id AND l.label = ?)")
            params.append(label)
        if visible_projects is not None:
            ids = sorted(int(p) for p in visible_projects)
            if not ids:
                return out
            where.append(f"project_id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        for row in self.store.query(f"SELECT state, COUNT(*) AS n FROM tasks WHERE {' AND '.join(where)} GROUP BY state", params):
            out[str(row["state"])] = int(row["n"])
        return out

    def ready(self, *, limit: int = 500) -> list[dict[str, Any]]:
        """Ready tasks (open, every dependency closed), highest priority (0) first, then oldest."""
        tasks = self.list_tasks(state="ready", limit=100_000)
        tasks.sort(key=lambda t: (t["priority"], t["id"]))
        return tasks[:limit]

    def progress_log(self, task_id: int, *, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` progress notes of a task, oldest first."""
        rows = self.store.query(
            "SELECT id, task_id, author, text, ts FROM task_progress WHERE task_id = ? ORDER BY id DESC LIMIT ?",
            (task_id, limit),
        )
        return rows[::-1]

    def _check_exec(self, spec: str) -> None:
        """Refuse a spec that does not resolve, unless no registry runs (the agents plugin is
        off): then the task is kept and waits (its ``exec_error`` says why)."""
        try:
            self.resolve_exec(spec)
        except ExecutorsUnavailable:
            pass

    def _fetch(self, sql: str, params: Sequence[Any] | tuple[Any, ...]) -> list[dict[str, Any]]:
        rows = self.store.query(sql, params)
        if not rows:
            return rows
        ids = [r["id"] for r in rows]
        marks = ",".join("?" * len(ids))
        deps: dict[int, list[int]] = {i: [] for i in ids}
        blocked: set[int] = set()
        for d in self.store.query(
            f"SELECT d.task_id, d.dep_id, x.state FROM task_deps d JOIN tasks x ON x.id = d.dep_id WHERE d.task_id IN ({marks}) ORDER BY d.dep_id",
            ids,
        ):
            deps[d["task_id"]].append(d["dep_id"])
            if d["state"] != "closed":
                blocked.add(d["task_id"])
        labels: dict[int, list[str]] = {i: [] for i in ids}
        for lab in self.store.query(f"SELECT task_id, label FROM task_labels WHERE task_id IN ({marks}) ORDER BY label", ids):
            labels[lab["task_id"]].append(lab["label"])
        for r in rows:
            r["deps"] = deps[r["id"]]
            r["labels"] = labels[r["id"]]
            r["evidence"] = json.loads(r["evidence"])
            r["ready"] = r["state"] == "open" and r["id"] not in blocked
            try:
                resolved = self.resolve_exec(r["exec"])
                r["exec_resolved"] = {"provider": resolved.provider, "model": resolved.model}
                r["exec_error"] = None
            except ExecError as exc:  # malformed, or its executor is not available now: it waits
                r["exec_resolved"] = None
                r["exec_error"] = {"code": exc.code, "message": exc.message}
        return rows

    # ------------------------------------------------------------------ writing

    def create(
        self,
        *,
        title: str,
        project_id: int,
        description: str = "",
        priority: int = 2,
        parent_id: int | None = None,
        deps: Iterable[int] = (),
        labels: Iterable[str] = (),
        exec: str | None = None,
        owner_id: int | None = None,
    ) -> dict[str, Any]:
        """Create an ``open`` task and publish ``task.created``.

        Raises:
            TaskNotFound: the project, the parent or a dependency does not exist.
            ExecError: ``exec`` does not resolve to an available executor (not raised while
                no registry runs: the task is kept).
            ValueError: priority outside 0–4 or an empty title.
        """
        if not title.strip():
            raise ValueError("title must not be empty")
        if not 0 <= priority <= 4:
            raise ValueError("priority must be 0..4")
        if exec is not None:
            self._check_exec(exec)
        deps = sorted(set(deps))
        now = utc_iso()
        with self.store.transaction():
            if self.store.query_one("SELECT 1 AS x FROM projects WHERE id = ?", (project_id,)) is None:
                raise TaskNotFound(f"project {project_id} not found")
            if parent_id is not None and self.exists(parent_id) is None:
                raise TaskNotFound(f"parent task {parent_id} not found")
            for dep in deps:
                if self.exists(dep) is None:
                    raise TaskNotFound(f"dependency task {dep} not found")
            task_id = self.store.execute(
                "INSERT INTO tasks (title, description, project_id, priority, parent_id, exec, owner_id, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (title, description, project_id, priority, parent_id, exec, owner_id, now, now),
            )
            self._set_deps(task_id, deps)
            self._set_labels(task_id, labels)
        task = self.get(task_id)
        self._publish("task.created", task, list(task))
        return task

    def update(self, task_id: int, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` (keys among title, description, priority, labels, deps, exec,
        state, resume_note, attempts) and publish ``task.updated`` — or ``task.closed`` /
        ``task.cancelled`` when the state changes to that.

        Raises:
            TaskNotFound: no such task or dependency.
            TaskConflict: a transition not allowed, or a dependency cycle.
            ExecError: ``exec`` does not resolve to an available executor (not raised while
                no registry runs: the task is kept).
            ValueError: an unknown field or a bad value.
        """
        unknown = set(changes) - EDITABLE
        if unknown:
            raise ValueError(f"cannot change {', '.join(sorted(unknown))}")
        if changes.get("exec") is not None:
            self._check_exec(changes["exec"])
        if "priority" in changes and not 0 <= int(changes["priority"]) <= 4:
            raise ValueError("priority must be 0..4")
        if "attempts" in changes and int(changes["attempts"]) < 0:
            raise ValueError("attempts must be ≥ 0")
        if "title" in changes and not str(changes["title"]).strip():
            raise ValueError("title must not be empty")
        now = utc_iso()
        with self.store.transaction():
            current = self.exists(task_id)
            if current is None:
                raise TaskNotFound(f"task {task_id} not found")
            sets: dict[str, Any] = {}
            for key in ("title", "description", "priority", "exec", "resume_note", "attempts"):
                if key in changes:
                    sets[key] = changes[key]
            state = changes.get("state")
            if state is not None and state != current["state"]:
                self._check_transition(task_id, current["state"], state)
                sets["state"] = state
                sets["closed_at"] = now if state in ("closed", "cancelled") else None
            if "deps" in changes:
                self._set_deps(task_id, sorted(set(changes["deps"])), replace=True)
            if "labels" in changes:
                self._set_labels(task_id, changes["labels"], replace=True)
            sets["updated_at"] = now
            assignments = ", ".join(f"{k} = ?" for k in sets)
            self.store.execute(f"UPDATE tasks SET {assignments} WHERE id = ?", (*sets.values(), task_id))
        task = self.get(task_id)
        kind = {"closed": "task.closed", "cancelled": "task.cancelled"}.get(sets.get("state", ""), "task.updated")
        self._publish(kind, task, sorted(changes))
        return task

    def close(self, task_id: int, summary: str, evidence: Sequence[str] = ()) -> dict[str, Any]:
        """Close a task with a summary and evidence; publishes ``task.closed``.

        Raises:
            TaskNotFound, TaskConflict: already closed or cancelled.
        """
        now = utc_iso()
        with self.store.transaction():
            current = self.exists(task_id)
            if current is None:
                raise TaskNotFound(f"task {task_id} not found")
            self._check_transition(task_id, current["state"], "closed")
            self.store.execute(
                "UPDATE tasks SET state = 'closed', summary = ?, evidence = ?, closed_at = ?, updated_at = ? WHERE id = ?",
                (summary, json.dumps(list(evidence), ensure_ascii=False), now, now, task_id),
            )
        task = self.get(task_id)
        self._publish("task.closed", task, ["state", "summary", "evidence"])
        return task

    def cancel(self, task_id: int) -> dict[str, Any]:
        """Cancel a task; publishes ``task.cancelled``.

        Raises:
            TaskNotFound, TaskConflict: already closed or cancelled.
        """
        current = self.exists(task_id)
        if current is None:
            raise TaskNotFound(f"task {task_id} not found")
        self._check_transition(task_id, current["state"], "cancelled")
        return self.update(task_id, {"state": "cancelled"})

    def progress(self, task_id: int, text: str, *, author: str) -> dict[str, Any]:
        """Record a progress note; publishes ``task.progress``. Returns the note
        ``{"id", "task_id", "author", "text", "ts"}``.

        Raises:
            TaskNotFound.
        """
        current = self.exists(task_id)
        if current is None:
            raise TaskNotFound(f"task {task_id} not found")
        ts = utc_iso()
        note_id = self.store.execute("INSERT INTO task_progress (task_id, author, text, ts) VALUES (?, ?, ?, ?)", (task_id, author, text, ts))
        note = {"id": note_id, "task_id": task_id, "author": author, "text": text, "ts": ts}
        self.events.publish("task.progress", {"id": task_id, "progress": note}, current["project_id"])
        return note

    def delete(self, task_id: int) -> None:
        """Delete a task (its dependency edges, labels, progress and agent tokens go with it;
        children keep living without a parent); publishes ``task.deleted``.

        Raises:
            TaskNotFound.
        """
        with self.store.transaction():
            current = self.exists(task_id)
            if current is None:
                raise TaskNotFound(f"task {task_id} not found")
            self.store.execute("DELETE FROM tasks WHERE id = ?", (task_id,))
        self.events.publish("task.deleted", {"id": task_id}, current["project_id"])

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _check_transition(task_id: int, old: str, new: str) -> None:
        if new not in TRANSITIONS:
            raise ValueError(f"unknown state {new!r}; states: {', '.join(STATES)}")
        if new not in TRANSITIONS[old]:
            allowed = ", ".join(sorted(TRANSITIONS[old]))
            raise TaskConflict(f"task {task_id} is {old}; it can become: {allowed}")

    def _set_deps(self, task_id: int, deps: Sequence[int], *, replace: bool = False) -> None:
        for dep in deps:
            if dep == task_id:
                raise TaskConflict(f"task {task_id} cannot depend on itself")
            if self.exists(dep) is None:
                raise TaskNotFound(f"dependency task {dep} not found")
            if self._reaches(dep, task_id):
                raise TaskConflict(f"task {task_id} cannot depend on task {dep}: that would make a dependency cycle")
        if replace:
            self.store.execute("DELETE FROM task_deps WHERE task_id = ?", (task_id,))
        self.store.executemany("INSERT INTO task_deps (task_id, dep_id) VALUES (?, ?)", [(task_id, d) for d in deps])

    def _reaches(self, start: int, target: int) -> bool:
        """Whether ``target`` is among ``start``'s transitive dependencies (or is ``start``)."""
        row = self.store.query_one(
            "WITH RECURSIVE reach(id) AS (SELECT ? UNION SELECT d.dep_id FROM task_deps d JOIN reach r ON d.task_id = r.id) "
            "SELECT 1 AS x FROM reach WHERE id = ? LIMIT 1",
            (start, target),
        )
        return row is not None

    def _set_labels(self, task_id: int, labels: Iterable[str], *, replace: bool = False) -> None:
        if replace:
            self.store.execute("DELETE FROM task_labels WHERE task_id = ?", (task_id,))
        self.store.executemany("INSERT OR IGNORE INTO task_labels (task_id, label) VALUES (?, ?)", [(task_id, lab) for lab in labels])

    def _publish(self, kind: str, task: dict[str, Any], changed: list[str]) -> None:
        self.events.publish(kind, {"id": task["id"], "task": task, "changed": changed}, task["project_id"])

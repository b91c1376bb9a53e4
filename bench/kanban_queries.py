"""The kanban board's daemon queries at 100,000 tasks: ``GET /tasks/counts`` (one ``GROUP BY``
over the ``tasks_state`` index) and one column's first page newest first (``state=… order=desc
limit=51``), with and without a text filter. Prints the median of 20 runs of each.

Run: ``.venv/bin/python bench/kanban_queries.py [N]`` (default 100000).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from elowen.core.store import Store, utc_iso
from elowen.daemon.services.tasks import STATES, TaskService
from elowen_sdk.services.executors import ResolvedExec


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "elowen.db")
        now = utc_iso()
        store.execute("INSERT INTO projects (id, name, path, created_at) VALUES (1, 'bench', ?, ?)", (tmp, now))
        t0 = time.perf_counter()
        with store.transaction():
            store.executemany(
                "INSERT INTO tasks (title, description, project_id, state, priority, created_at, updated_at) VALUES (?, '', 1, ?, ?, ?, ?)",
                ((f"task {i}", STATES[i % 20 % 5] if i % 20 < 5 else ("closed" if i % 20 < 15 else "cancelled"), i % 5, now, now) for i in range(n)),
            )
        print(f"{n} tasks inserted in {time.perf_counter() - t0:.1f} s")
        fixed = ResolvedExec(provider="claude", model="", spec="claude")  # reads only: no events, one executor
        tasks = TaskService(store, None, lambda spec: fixed)  # type: ignore[arg-type]

        def timed(label: str, fn: object) -> None:
            runs = []
            for _ in range(20):
                t = time.perf_counter()
                fn()  # type: ignore[operator]
                runs.append((time.perf_counter() - t) * 1000)
            print(f"{label}: median {statistics.median(runs):.1f} ms, max {max(runs):.1f} ms")

        timed("counts (all states)", lambda: tasks.counts())
        timed("counts, q='task 99'", lambda: tasks.counts(q="task 99"))
        for state in ("open", "closed"):
            timed(f"{state}: first page newest first (51 rows)", lambda s=state: tasks.list_tasks(state=s, descending=True, limit=51))
        timed("closed, q='task 99', first page", lambda: tasks.list_tasks(state="closed", descending=True, limit=51, q="task 99"))
        store.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)

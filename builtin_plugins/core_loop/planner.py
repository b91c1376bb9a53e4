"""The planner: a work request → a :class:`Plan` (a model call through the inference relay).

The model is asked for structured output against :data:`PLAN_SCHEMA`. Its answer is parsed as
one JSON object (code fences around it are tolerated); when that fails — a provider that cannot
force structure — the *strict text form* is tried::

    PLAN: <project title>
    1. [high] <task title>
       Acceptance: <criterion>; <criterion>
       After: 2, 3
       <more description lines>

Anything else fails closed with :class:`PlanError` (the project is marked ``failed`` with the
reason; nothing is written to the ledger).

Dependencies are *positions in the plan* (1-based). :func:`clean_edges` drops bad edges — out of
range, self, and every edge that would close a cycle — and reports each; a bad edge is never
fatal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from elowen_sdk import ElowenError

__all__ = ["PLAN_SCHEMA", "PRIORITIES", "Plan", "PlanError", "PlannedTask", "clean_edges", "parse_plan", "planner_messages"]

PRIORITIES: dict[str, int] = {"critical": 0, "high": 1, "medium": 2, "low": 3}
"""Plan priority → ledger priority (0 highest … 4). The ledger's 4 is not used by plans."""

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "tasks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "acceptance_criteria": {"type": "array", "items": {"type": "string"}},
                    "priority": {"type": "string", "enum": list(PRIORITIES)},
                    "depends_on": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["title", "description", "acceptance_criteria", "priority", "depends_on"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["title", "tasks"],
    "additionalProperties": False,
}
"""The JSON Schema the planner's answer must follow; ``depends_on`` holds 1-based positions."""

SYSTEM_PROMPT = """You plan software projects for a team of coding agents. Split the request into a
few small tasks (at most {max_tasks}), each one an agent can finish and prove in one session.
For every task give: a short imperative title, a description, acceptance criteria that can be
checked by running something (tests, a command and its output), a priority (critical, high,
medium or low) and the tasks it depends on, as 1-based positions in your list.
Answer with one JSON object: {{"title": ..., "tasks": [{{"title", "description",
"acceptance_criteria": [...], "priority", "depends_on": [...]}}]}}."""


class PlanError(ElowenError):
    """The planner's answer is not a plan (neither JSON nor the strict text form), or is empty."""


@dataclass(frozen=True, slots=True)
class PlannedTask:
    """One task of a plan. ``depends_on``: 1-based positions of other tasks in the plan."""

    title: str
    description: str = ""
    acceptance: tuple[str, ...] = ()
    priority: str = "medium"
    depends_on: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """A parsed plan. ``log``: what parsing dropped or changed (one sentence each)."""

    title: str
    tasks: tuple[PlannedTask, ...]
    log: tuple[str, ...] = field(default=())
    source: str = "json"


def planner_messages(request: str, *, max_tasks: int) -> list[tuple[str, str]]:
    """``[(role, content)]`` of the planner call for ``request``."""
    return [("system", SYSTEM_PROMPT.format(max_tasks=max_tasks)), ("user", request)]


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.S)
_ITEM = re.compile(r"^(\d+)\.\s+(?:\[(critical|high|medium|low)\]\s+)?(.+?)\s*$", re.I)


def _text(value: Any, limit: int) -> str:
    return str(value).strip()[:limit] if isinstance(value, (str, int, float)) else ""


def _task_from(raw: Any, log: list[str], position: int) -> PlannedTask | None:
    if not isinstance(raw, dict):
        log.append(f"task {position}: not an object, dropped")
        return None
    title = _text(raw.get("title"), 200)
    if not title:
        log.append(f"task {position}: no title, dropped")
        return None
    criteria = raw.get("acceptance_criteria", raw.get("acceptance", []))
    if isinstance(criteria, str):
        criteria = [criteria]
    acceptance = tuple(c for c in (_text(c, 500) for c in criteria or []) if c) if isinstance(criteria, list) else ()
    priority = _text(raw.get("priority"), 20).lower() or "medium"
    if priority not in PRIORITIES:
        log.append(f"task {position}: unknown priority {priority!r}, medium used")
        priority = "medium"
    deps_raw = raw.get("depends_on", [])
    deps: list[int] = []
    for dep in deps_raw if isinstance(deps_raw, list) else []:
        if isinstance(dep, bool) or not isinstance(dep, (int, str)) or not str(dep).strip().isdigit():
            log.append(f"task {position}: dependency {dep!r} is not a position, dropped")
            continue
        deps.append(int(dep))
    return PlannedTask(title, _text(raw.get("description"), 4000), acceptance, priority, tuple(deps))


def _from_json(data: Any, max_tasks: int) -> Plan:
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise PlanError("the plan is not an object with a 'tasks' list")
    log: list[str] = []
    tasks = [t for i, raw in enumerate(data["tasks"], 1) if (t := _task_from(raw, log, i)) is not None]
    return _finish(_text(data.get("title"), 200), tasks, log, max_tasks, "json")


def _from_text(text: str, max_tasks: int) -> Plan:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    if not lines or not lines[0].upper().startswith("PLAN:"):
        raise PlanError("the planner's answer is neither JSON nor a 'PLAN:' list")
    title = lines[0][5:].strip()
    raws: list[dict[str, Any]] = []
    for line in lines[1:]:
        item = _ITEM.match(line.strip())
        if item is not None and not line.startswith((" ", "\t")):
            if int(item.group(1)) != len(raws) + 1:
                raise PlanError(f"plan item {item.group(1)} is out of order")
            raws.append(
                {"title": item.group(3), "priority": (item.group(2) or "medium").lower(), "description": "", "acceptance_criteria": [], "depends_on": []}
            )
            continue
        if not raws or not line.startswith((" ", "\t")):
            raise PlanError(f"unexpected line in the plan: {line.strip()[:80]!r}")
        body = line.strip()
        key, _, rest = body.partition(":")
        if key.lower() == "acceptance":
            raws[-1]["acceptance_criteria"] += [c.strip() for c in rest.split(";") if c.strip()]
        elif key.lower() == "after":
            raws[-1]["depends_on"] += [p.strip() for p in rest.split(",") if p.strip()]
        else:
            raws[-1]["description"] = (raws[-1]["description"] + "\n" + body).strip()
    log: list[str] = []
    tasks = [t for i, raw in enumerate(raws, 1) if (t := _task_from(raw, log, i)) is not None]
    return _finish(title, tasks, log, max_tasks, "text")


def _finish(title: str, tasks: list[PlannedTask], log: list[str], max_tasks: int, source: str) -> Plan:
    if not tasks:
        raise PlanError("the plan has no tasks")
    if len(tasks) > max_tasks:
        log.append(f"the plan had {len(tasks)} tasks; only the first {max_tasks} were kept")
        tasks = tasks[:max_tasks]
    cleaned, edge_log = clean_edges([t.depends_on for t in tasks])
    log.extend(edge_log)
    tasks = [PlannedTask(t.title, t.description, t.acceptance, t.priority, deps) for t, deps in zip(tasks, cleaned, strict=True)]
    return Plan(title or tasks[0].title, tuple(tasks), tuple(log), source)


def parse_plan(text: str, *, max_tasks: int = 12) -> Plan:
    """Parse the planner's answer (JSON, else the strict text form; see the module docstring).

    Raises:
        PlanError: neither form, or no task.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    if body.startswith("{"):
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise PlanError(f"the plan is not valid JSON: {exc}") from None
        return _from_json(data, max_tasks)
    return _from_text(body, max_tasks)


def clean_edges(deps: list[tuple[int, ...]]) -> tuple[list[tuple[int, ...]], list[str]]:
    """Drop bad dependency edges of a plan (``deps[i]``: positions task ``i + 1`` depends on).

    Out-of-range and self edges are dropped; then edges are added in plan order and any edge
    that would close a cycle is dropped. Returns the cleaned lists and one log line per drop.
    """
    n = len(deps)
    log: list[str] = []
    kept: list[list[int]] = [[] for _ in range(n)]

    def reaches(start: int, goal: int) -> bool:  # does start depend (transitively) on goal?
        stack, seen = [start], set()
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            if node in seen:
                continue
            seen.add(node)
            stack.extend(kept[node - 1])
        return False

    for i, edges in enumerate(deps, 1):
        for dep in edges:
            if dep < 1 or dep > n:
                log.append(f"task {i}: dependency on {dep} is out of range (1..{n}), dropped")
            elif dep == i:
                log.append(f"task {i}: dependency on itself, dropped")
            elif dep in kept[i - 1]:
                continue
            elif reaches(dep, i):
                log.append(f"task {i}: dependency on {dep} would close a cycle, dropped")
            else:
                kept[i - 1].append(dep)
    return [tuple(k) for k in kept], log

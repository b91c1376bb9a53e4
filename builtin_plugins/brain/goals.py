"""Persistent goals: the rules that decide, after each goal turn, whether the goal goes on,
finishes, or pauses — and the prompt text each goal turn gets.

Rules (Elowen issue 6, "Persistent goals"):

* each turn taken while a goal is active counts (``turns_total``, and ``turns_run`` since the
  last start/resume) and its tokens count (``tokens_run``);
* sentinels are applied in this order: ``SUBGOAL_DONE``, ``PROGRESS``, ``GOAL_BLOCKED`` (pauses
  with ``blocked``), ``GOAL_DONE`` (finishes with the evidence — rejected while a subgoal is
  open: the goal stays active and the next turn is told why);
* supervised: at ``turn_budget`` turns (the goal's own, else the setting, default 8) the goal
  pauses with ``budget_reached``; YOLO: budget ignored, the absolute ceiling ``goal_max_turns``
  (default 64) pauses it with ``ceiling_reached``; both count since the last resume;
* ``tokens_run`` at or above ``goal_token_budget`` pauses it with ``token_budget``;
* a goal never resumes by itself: only ``/goal resume`` (or a new ``/goal``) does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .sentinels import Sentinels
from .store import BrainStore

__all__ = ["GoalLimits", "GoalOutcome", "apply_turn", "goal_prompt", "open_subgoals", "status_text"]

PROMPTS = resources.files("elowen.prompts")  # the prompts/ folder, shipped in the wheel
_PROTOCOL_FILE = "goal_protocol.md"
_FALLBACK_PROTOCOL = (
    "You are working toward a persistent goal.\n\nGoal: {goal}\n{subgoals}\n{progress}\n{note}\n"
    "Report with lines: PROGRESS: <text>, SUBGOAL_DONE: <n>, GOAL_BLOCKED: <reason>, GOAL_DONE: <evidence>."
)


@dataclass(frozen=True, slots=True)
class GoalLimits:
    """The goal settings: ``turn_budget`` (1–50), ``max_turns`` (the ceiling, 8–500),
    ``token_budget`` (tokens between resumes)."""

    turn_budget: int = 8
    max_turns: int = 64
    token_budget: int = 400_000

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> GoalLimits:
        return cls(int(config.get("goal_turn_budget", 8)), int(config.get("goal_max_turns", 64)), int(config.get("goal_token_budget", 400_000)))


@dataclass(frozen=True, slots=True)
class GoalOutcome:
    """What :func:`apply_turn` decided: the goal record after it, and ``event`` — one of
    ``continue``, ``done``, ``done_rejected``, ``paused``."""

    goal: dict[str, Any]
    event: str


def open_subgoals(goal: Mapping[str, Any]) -> list[int]:
    """1-based numbers of the goal's subgoals not yet done."""
    return [i + 1 for i, s in enumerate(goal["subgoals"]) if not s.get("done")]


def apply_turn(db: BrainStore, goal: Mapping[str, Any], found: Sentinels, *, tokens: int, yolo: bool, limits: GoalLimits) -> GoalOutcome:
    """Count one goal turn and apply its sentinels and limits (see the module docstring)."""
    gid = goal["id"]
    subgoals = [dict(s) for s in goal["subgoals"]]
    for n in found.subgoals_done:
        if 1 <= n <= len(subgoals):
            subgoals[n - 1]["done"] = True
    fields: dict[str, Any] = {
        "turns_total": goal["turns_total"] + 1,
        "turns_run": goal["turns_run"] + 1,
        "tokens_run": goal["tokens_run"] + tokens,
        "subgoals": subgoals,
        "note": None,
    }
    if found.progress is not None:
        fields["last_progress"] = found.progress
    if found.blocked is not None:
        return GoalOutcome(db.update_goal(gid, state="paused", pause_reason="blocked", blocked_reason=found.blocked, **fields), "paused")
    event = "continue"
    if found.done is not None:
        still_open = [i + 1 for i, s in enumerate(subgoals) if not s.get("done")]
        if still_open:
            fields["note"] = (
                f"Your GOAL_DONE was rejected: subgoal(s) {', '.join(map(str, still_open))} are still open. "
                "Finish them (report each with SUBGOAL_DONE: <n>) or remove them with the user first."
            )
            event = "done_rejected"
        else:
            return GoalOutcome(db.update_goal(gid, state="done", evidence=found.done, pause_reason=None, **fields), "done")
    budget = goal["turn_budget"] or limits.turn_budget
    reason = None
    if fields["tokens_run"] >= limits.token_budget:
        reason = "token_budget"
    elif fields["turns_run"] >= limits.max_turns:
        reason = "ceiling_reached"
    elif not yolo and fields["turns_run"] >= budget:
        reason = "budget_reached"
    if reason is not None:
        return GoalOutcome(db.update_goal(gid, state="paused", pause_reason=reason, **fields), "paused")
    return GoalOutcome(db.update_goal(gid, **fields), event)


def _protocol_template() -> str:
    try:
        return (PROMPTS / _PROTOCOL_FILE).read_text(encoding="utf-8")
    except OSError:
        return _FALLBACK_PROTOCOL


def goal_prompt(goal: Mapping[str, Any]) -> str:
    """The system-prompt section of a goal turn: the protocol with the goal filled in."""
    subs = goal["subgoals"]
    sub_text = "\n".join(f"  {i + 1}. [{'x' if s.get('done') else ' '}] {s['text']}" for i, s in enumerate(subs))
    contract = goal.get("contract") or {}
    contract_text = "\n".join(f"  {k}: {v}" for k, v in contract.items())
    return _protocol_template().format(
        goal=goal["text"],
        subgoals=f"Subgoals:\n{sub_text}" if subs else "Subgoals: none",
        progress=f"Your last PROGRESS: {goal['last_progress']}" if goal.get("last_progress") else "No PROGRESS reported yet.",
        note=goal.get("note") or "",
        contract=f"Contract:\n{contract_text}" if contract_text else "",
    )


def status_text(goal: Mapping[str, Any] | None, limits: GoalLimits, *, yolo: bool) -> str:
    """A short human status of a goal (``/goal status``)."""
    if goal is None:
        return "No goal. Start one with /goal <text> (or /goal draft <text>)."
    budget = goal["turn_budget"] or limits.turn_budget
    lines = [
        f"Goal #{goal['id']} [{goal['state']}"
        + (f": {goal['pause_reason']}" if goal.get("pause_reason") and goal["state"] == "paused" else "")
        + f"] {goal['text']}"
    ]
    for i, s in enumerate(goal["subgoals"]):
        lines.append(f"  {i + 1}. [{'x' if s.get('done') else ' '}] {s['text']}")
    if goal.get("contract"):
        lines.extend(f"  {k}: {v}" for k, v in goal["contract"].items())
    lines.append(
        f"Turns: {goal['turns_run']} since resume ({goal['turns_total']} total); "
        + (f"ceiling {limits.max_turns} (YOLO)" if yolo else f"budget {budget}")
        + f"; tokens {goal['tokens_run']}/{limits.token_budget}"
    )
    if goal.get("last_progress"):
        lines.append(f"Last progress: {goal['last_progress']}")
    if goal.get("blocked_reason") and goal.get("pause_reason") == "blocked":
        lines.append(f"Blocked: {goal['blocked_reason']}")
    if goal.get("evidence"):
        lines.append(f"Evidence: {goal['evidence']}")
    return "\n".join(lines)

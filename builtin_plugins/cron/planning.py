"""What to do with a job whose fires are due: the pure rule the ticker applies before it
claims anything (no I/O, so every case is a unit test).

Rules (see docs/schedules.md, "Missed fires"):

* every due fire gets exactly one record;
* a fire at most ``grace`` seconds late is on time and runs (trigger ``schedule``);
* a later one is *missed* unless the job's catch-up policy runs it: ``skip`` runs none,
  ``once`` runs the latest (when no on-time fire is due with it), ``all`` runs the latest
  ``cap`` (trigger ``catchup``); the rest are recorded ``missed``;
* a paused job records each due fire as ``missed`` (``the job was paused``);
* a job with a run still open (claimed or running) records the fires it would run as
  ``skipped``: runs of one job never overlap;
* at most ``max_records`` fires are recorded per job and pass; beyond that the job jumps to its
  next fire after ``now`` and one ``missed`` record says how many were not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .schedule import Schedule
from .store import iso, parse_iso

__all__ = ["POLICIES", "Plan", "plan_fires"]

POLICIES = ("skip", "once", "all")
"""Catch-up policies, in the order of how much they run after downtime."""

MAX_COUNT = 10_000
"""The most fires beyond ``max_records`` counted one by one (bounds a pass's time: croniter takes
tens of µs per step)."""

Record = tuple[str, str, str, str | None]  # (scheduled_for, trigger, status, error)


@dataclass(slots=True)
class Plan:
    """The records to write for one job and where its schedule continues.

    Attributes:
        records: ``(scheduled_for, trigger, status, error)``; ``status`` ``claimed`` for the
            fires that run (in this order), else ``missed`` / ``skipped``.
        next_fire: the job's next fire after these (UTC text), ``None``: no more.
        done: a one-shot with nothing left.
    """

    records: list[Record] = field(default_factory=list)
    next_fire: str | None = None
    done: bool = False

    @property
    def runs(self) -> int:
        """How many records run."""
        return sum(1 for r in self.records if r[2] == "claimed")


def plan_fires(
    schedule: Schedule,
    next_fire: str,
    now: datetime,
    *,
    paused: bool,
    policy: str,
    cap: int,
    grace: float,
    open_run: int | None,
    max_records: int = 1000,
) -> Plan:
    """The :class:`Plan` for a job whose ``next_fire`` (UTC text) is at or before ``now``.

    Args:
        open_run: the id of a run of the job still open, or ``None``.
        grace: seconds a fire may be late and still count as on time.
        cap: the most fires policy ``all`` runs after downtime.
    """
    due: list[datetime] = []
    t: datetime | None = parse_iso(next_fire)
    while t is not None and t <= now and len(due) < max_records:
        due.append(t)
        t = schedule.next_after(t)
    dropped, more = 0, False
    if t is not None and t <= now:  # more than max_records due: count them (bounded) without keeping them
        if schedule.kind == "every" and schedule.interval:
            dropped = int((now - t).total_seconds() // schedule.interval) + 1
        else:
            probe: datetime | None = t
            while probe is not None and probe <= now and dropped < MAX_COUNT:
                dropped += 1
                probe = schedule.next_after(probe)
            more = probe is not None and probe <= now
        t = schedule.next_after(now)
    plan = Plan(next_fire=iso(t) if t is not None else None, done=t is None)
    if dropped:
        count = f"at least {dropped}" if more else str(dropped)
        plan.records.append((iso(due[-1]) + "+", "schedule", "missed", f"{count} more fires were due while the daemon was down; not recorded one by one"))
    if paused:
        plan.records[:0] = [(iso(d), "schedule", "missed", "the job was paused") for d in due]
        return plan
    on_time = [d for d in due if (now - d).total_seconds() <= grace]
    late = [d for d in due if (now - d).total_seconds() > grace]
    catch: list[datetime] = []
    if policy == "once" and late and not on_time:
        catch = late[-1:]
    elif policy == "all":
        catch = late[-max(0, cap) :] if cap > 0 else []
    chosen = set(catch)
    out: list[Record] = []
    for d in late:
        if d in chosen:
            continue
        late_by = int((now - d).total_seconds())
        out.append((iso(d), "schedule", "missed", f"the daemon was not running when this was due (noticed {late_by} s late; catch-up policy {policy})"))
    running = [(d, "catchup") for d in catch] + [(d, "schedule") for d in on_time]
    for d, trigger in running:
        if open_run is not None:
            out.append((iso(d), trigger, "skipped", f"run {open_run} of this job was still going"))
        else:
            out.append((iso(d), trigger, "claimed", None))
    plan.records[:0] = out
    return plan

"""The rule for due fires (builtin_plugins/cron/planning.py): one record per due fire, on time
within the grace, catch-up policies after downtime, paused jobs, no overlap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from elowen_builtins.cron.planning import plan_fires
from elowen_builtins.cron.schedule import parse_schedule
from elowen_builtins.cron.store import iso

T0 = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)
EVERY = parse_schedule("every 30m", "UTC", now=T0)  # fires 12:30, 13:00, 13:30, …


def plan(now: datetime, **kw: object):  # type: ignore[no-untyped-def]
    args: dict = {"paused": False, "policy": "skip", "cap": 10, "grace": 60.0, "open_run": None, **kw}
    return plan_fires(EVERY, iso(T0 + timedelta(minutes=30)), now, **args)


def statuses(p) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return [(r[0][11:16], r[1], r[2]) for r in p.records]


def test_on_time_fire_runs() -> None:
    p = plan(T0 + timedelta(minutes=30, seconds=5))
    assert statuses(p) == [("12:30", "schedule", "claimed")]
    assert p.next_fire == iso(T0 + timedelta(minutes=60)) and not p.done


def test_downtime_skip_records_every_missed_fire() -> None:
    p = plan(T0 + timedelta(hours=2, seconds=1))  # 12:30 … 14:00 due; 14:00 one second late
    assert statuses(p) == [("12:30", "schedule", "missed"), ("13:00", "schedule", "missed"), ("13:30", "schedule", "missed"), ("14:00", "schedule", "claimed")]
    assert "not running" in (p.records[0][3] or "")
    assert p.next_fire == iso(T0 + timedelta(hours=2, minutes=30))


def test_downtime_once_runs_one_catch_up() -> None:
    now = T0 + timedelta(hours=2, minutes=10)  # 12:30 … 14:00 due, all late
    p = plan(now, policy="once")
    assert statuses(p) == [("12:30", "schedule", "missed"), ("13:00", "schedule", "missed"), ("13:30", "schedule", "missed"), ("14:00", "catchup", "claimed")]
    # an on-time fire in the same pass covers the catch-up: no second run
    p = plan(T0 + timedelta(hours=2, seconds=1), policy="once")
    assert [s for s in statuses(p) if s[2] == "claimed"] == [("14:00", "schedule", "claimed")]


def test_downtime_all_runs_up_to_the_cap() -> None:
    p = plan(T0 + timedelta(hours=3, minutes=10), policy="all", cap=3)  # 6 late fires
    got = statuses(p)
    assert [s for s in got if s[2] == "missed"] == [("12:30", "schedule", "missed"), ("13:00", "schedule", "missed"), ("13:30", "schedule", "missed")]
    assert [s for s in got if s[2] == "claimed"] == [("14:00", "catchup", "claimed"), ("14:30", "catchup", "claimed"), ("15:00", "catchup", "claimed")]


def test_paused_job_records_missed() -> None:
    p = plan(T0 + timedelta(hours=1, seconds=1), paused=True, policy="all")
    assert statuses(p) == [("12:30", "schedule", "missed"), ("13:00", "schedule", "missed")]
    assert all(r[3] == "the job was paused" for r in p.records)


def test_open_run_means_skipped_not_overlap() -> None:
    p = plan(T0 + timedelta(minutes=30, seconds=1), open_run=7)
    assert statuses(p) == [("12:30", "schedule", "skipped")]
    assert p.records[0][3] == "run 7 of this job was still going"


def test_one_shot_done_after_its_fire() -> None:
    once = parse_schedule("in 20m", "UTC", now=T0)
    p = plan_fires(once, iso(T0 + timedelta(minutes=20)), T0 + timedelta(minutes=20, seconds=2), paused=False, policy="once", cap=1, grace=60, open_run=None)
    assert [r[2] for r in p.records] == ["claimed"] and p.done and p.next_fire is None
    late = plan_fires(once, iso(T0 + timedelta(minutes=20)), T0 + timedelta(hours=5), paused=False, policy="skip", cap=1, grace=60, open_run=None)
    assert [r[2] for r in late.records] == ["missed"] and late.done


def test_record_cap_after_long_downtime() -> None:
    p = plan(T0 + timedelta(days=30), max_records=50)  # 1440 fires due
    assert len(p.records) == 51 and p.runs == 0
    assert "more fires were due" in (p.records[-1][3] or "")
    assert p.next_fire is not None and p.next_fire > iso(T0 + timedelta(days=30))


def test_long_downtime_of_a_cron_job_is_counted_in_bounded_time() -> None:
    minutely = parse_schedule("* * * * *", "UTC", now=T0)
    p = plan_fires(
        minutely, iso(T0 + timedelta(minutes=1)), T0 + timedelta(days=365), paused=False, policy="skip", cap=1, grace=60, open_run=None, max_records=10
    )
    assert len(p.records) == 11 and "at least 10000 more fires" in (p.records[-1][3] or "")
    every = plan(T0 + timedelta(days=365), max_records=10)
    assert f"{365 * 48 - 10} more fires" in (every.records[-1][3] or "")

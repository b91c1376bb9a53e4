"""The schedule grammar (builtin_plugins/cron/schedule.py): every form people type, time
zones, daylight saving time, and the errors for what is not understood."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from elowen_builtins.cron.schedule import BadSchedule, Schedule, parse_schedule

NOW = datetime(2026, 6, 10, 12, 0, 0, tzinfo=UTC)  # a Wednesday; Berlin is UTC+2 (CEST)
BERLIN = ZoneInfo("Europe/Berlin")


def fires(schedule: Schedule, start: datetime, n: int) -> list[datetime]:
    out: list[datetime] = []
    t: datetime | None = start
    while len(out) < n:
        t = schedule.next_after(t)
        if t is None:
            break
        out.append(t)
    return out


def local(t: datetime, tz: ZoneInfo = BERLIN) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("every 30m", 1800),
        ("every 2h", 7200),
        ("every 90 minutes", 5400),
        ("every hour", 3600),
        ("every 2 days", 172800),
        ("EVERY 1w", 604800),
        ("every 45 s", 45),
    ],
)
def test_intervals_count_from_creation(text: str, seconds: int) -> None:
    s = parse_schedule(text, "Europe/Berlin", now=NOW)
    assert s.kind == "every" and s.interval == seconds
    assert fires(s, NOW, 3) == [NOW + timedelta(seconds=seconds * k) for k in (1, 2, 3)]
    # after a gap the schedule stays on its grid (anchor + k * interval)
    later = NOW + timedelta(seconds=seconds * 10 + 1)
    assert s.next_after(later) == NOW + timedelta(seconds=seconds * 11)


def test_every_day_at_is_wall_clock_in_the_zone() -> None:
    s = parse_schedule("every day at 18:30", "Europe/Berlin", now=NOW)
    assert s.expr == "30 18 * * *"
    assert [local(t) for t in fires(s, NOW, 2)] == ["2026-06-10 18:30 CEST", "2026-06-11 18:30 CEST"]
    ny = parse_schedule("every day at 18:30", "America/New_York", now=NOW)
    assert fires(ny, NOW, 1)[0] == datetime(2026, 6, 10, 22, 30, tzinfo=UTC)


def test_days_of_the_week() -> None:
    weekdays = parse_schedule("every weekday at 8:00", "Europe/Berlin", now=NOW)
    assert [local(t)[:10] for t in fires(weekdays, NOW, 4)] == ["2026-06-11", "2026-06-12", "2026-06-15", "2026-06-16"]
    weekend = parse_schedule("every sat,sun at 10:00", "UTC", now=NOW)
    assert [t.strftime("%a") for t in fires(weekend, NOW, 3)] == ["Sat", "Sun", "Sat"]
    monday = parse_schedule("every Monday at 09:15", "UTC", now=NOW)
    assert fires(monday, NOW, 1) == [datetime(2026, 6, 15, 9, 15, tzinfo=UTC)]


def test_at_time_is_the_next_one() -> None:
    later_today = parse_schedule("at 18:30", "Europe/Berlin", now=NOW)
    assert later_today.one_shot and local(later_today.anchor) == "2026-06-10 18:30 CEST"  # type: ignore[arg-type]
    tomorrow = parse_schedule("at 09:00", "Europe/Berlin", now=NOW)  # 09:00 CEST already passed
    assert local(tomorrow.anchor) == "2026-06-11 09:00 CEST"  # type: ignore[arg-type]
    assert fires(tomorrow, NOW, 3) == [tomorrow.anchor]  # once, then never again


def test_at_date_and_in() -> None:
    xmas = parse_schedule("at 2026-12-24 09:00", "Europe/Berlin", now=NOW)
    assert xmas.anchor == datetime(2026, 12, 24, 8, 0, tzinfo=UTC)  # CET, UTC+1 in December
    assert parse_schedule("at 2026-12-24T09:00", "UTC", now=NOW).anchor == datetime(2026, 12, 24, 9, 0, tzinfo=UTC)
    soon = parse_schedule("in 20m", "Europe/Berlin", now=NOW)
    assert soon.anchor == NOW + timedelta(minutes=20) and fires(soon, NOW, 2) == [soon.anchor]
    assert parse_schedule("in 2 hours", "UTC", now=NOW).anchor == NOW + timedelta(hours=2)


def test_cron_expressions() -> None:
    s = parse_schedule("*/15 9-17 * * mon-fri", "Europe/Berlin", now=NOW)
    assert [local(t) for t in fires(s, NOW, 3)] == ["2026-06-10 14:15 CEST", "2026-06-10 14:30 CEST", "2026-06-10 14:45 CEST"]
    assert s.min_gap(NOW) == 900


def test_a_stored_schedule_round_trips() -> None:
    for text in ("every 30m", "every day at 18:30", "in 20m", "0 9 * * 1"):
        s = parse_schedule(text, "Europe/Berlin", now=NOW)
        assert Schedule.from_json(s.to_json()) == s


# -- daylight saving time (Europe/Berlin 2026: forward 29 March 02:00→03:00, back 25 October 03:00→02:00)


def test_spring_forward_a_missing_time_fires_at_the_transition() -> None:
    start = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
    for text in ("every day at 02:30", "30 2 * * *"):
        s = parse_schedule(text, "Europe/Berlin", now=start)
        assert [local(t) for t in fires(s, start, 3)] == ["2026-03-28 02:30 CET", "2026-03-29 03:00 CEST", "2026-03-30 02:30 CEST"]
    once = parse_schedule("at 02:30", "Europe/Berlin", now=datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
    assert local(once.anchor) == "2026-03-29 03:00 CEST"  # type: ignore[arg-type]
    with pytest.raises(BadSchedule, match="does not exist"):
        parse_schedule("at 2026-03-29 02:30", "Europe/Berlin", now=start)


def test_fall_back_a_repeated_time_fires_once() -> None:
    start = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)
    for text in ("every day at 02:30", "30 2 * * *"):
        s = parse_schedule(text, "Europe/Berlin", now=start)
        got = fires(s, start, 3)
        assert [local(t) for t in got] == ["2026-10-25 02:30 CEST", "2026-10-26 02:30 CET", "2026-10-27 02:30 CET"]
        assert got[1] - got[0] == timedelta(hours=25)


def test_hourly_cron_counts_real_hours_across_fall_back() -> None:
    start = datetime(2026, 10, 24, 23, 30, tzinfo=UTC)  # 01:30 CEST on the 25th
    s = parse_schedule("0 * * * *", "Europe/Berlin", now=start)
    got = fires(s, start, 4)
    assert [local(t) for t in got] == ["2026-10-25 02:00 CEST", "2026-10-25 02:00 CET", "2026-10-25 03:00 CET", "2026-10-25 04:00 CET"]
    assert all(b - a == timedelta(hours=1) for a, b in zip(got, got[1:]))


def test_intervals_ignore_dst() -> None:
    start = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
    s = parse_schedule("every 1h", "Europe/Berlin", now=start)
    got = fires(s, start, 4)
    assert all(b - a == timedelta(hours=1) for a, b in zip(got, got[1:]))


# -- errors


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("every fortnight", "not an interval: 'fortnight'"),
        ("every 0m", "not an interval"),
        ("every day at 25:00", "not a time of day: '25:00'"),
        ("every funday at 10:00", "'funday'"),
        ("at noon", "not a time: 'noon'"),
        ("at 2026-02-30 10:00", "not a date"),
        ("in a while", "not a duration"),
        ("61 * * * *", "not a valid cron expression"),
        ("* * * * * *", "has 6 fields"),
        ("tomorrow morning please", "not understood: 'tomorrow morning please'"),
        ("0 0 31 2 *", "never fires"),
        ("@daily", "not understood"),
        ("every 1.5h", "not an interval"),
        ("every 400 days", "over a year"),
    ],
)
def test_bad_input_names_what_was_not_understood(text: str, words: str) -> None:
    with pytest.raises(BadSchedule, match=words.replace("(", r"\(")):
        parse_schedule(text, "Europe/Berlin", now=NOW)


def test_past_and_unknown_zone() -> None:
    with pytest.raises(BadSchedule, match="in the past"):
        parse_schedule("at 2025-01-01 10:00", "UTC", now=NOW)
    for tz in ("Mars/Olympus", "../etc/passwd", "", "America", "Europe/", "UTC\x00"):
        with pytest.raises(BadSchedule, match="unknown time zone"):
            parse_schedule("every 30m", tz, now=NOW)

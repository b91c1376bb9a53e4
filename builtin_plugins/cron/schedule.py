"""The schedule grammar of cron jobs: what people type, parsed into a :class:`Schedule` that
answers "when is the next fire after *t*".

Forms (case-insensitive, surrounding spaces ignored):

* ``every 30m``, ``every 2h``, ``every 90 minutes``, ``every hour``, ``every 2 days``: a fixed
  interval of real (elapsed) time, counted from the moment the job was created (its *anchor*);
  units ``s``/``sec``/``second(s)``, ``m``/``min``/``minute(s)``, ``h``/``hour(s)``,
  ``d``/``day(s)``, ``w``/``week(s)``.
* ``every day at 18:30``, ``every weekday at 8:00``, ``every monday at 09:15``,
  ``every sat,sun at 10:00``: wall-clock times in the job's time zone.
* ``at 18:30``: once, at the next 18:30 in the time zone (today or tomorrow).
* ``at 2026-12-24 09:00`` (also ``2026-12-24T09:00``): once, at that wall-clock time.
* ``in 20m``, ``in 2 hours``: once, that long after the job was created.
* a 5-field cron expression (``*/15 9-17 * * mon-fri``), read by croniter 7 (fields minute,
  hour, day of month, month, day of week; its extensions ``L``, ``#`` and ranges included; a
  6th seconds field is refused).

Time zones are IANA names (``Europe/Berlin``) read with :mod:`zoneinfo`. Daylight saving time:

* a wall-clock time that does not exist on the spring-forward day (02:30 in Berlin on the last
  Sunday of March) fires at the transition (03:00 local): croniter's rule, and ours for
  ``every day at``;
* a wall-clock time that occurs twice on the fall-back day fires **once**, at its first
  occurrence, whenever the schedule names its hours (``every day at 02:30``, ``30 2 * * *``,
  ``0 */2 * * *``). A cron expression with ``*`` as its hour field counts real hours and fires
  in both (``0 * * * *`` fires at 02:00 summer time and 02:00 winter time): an hourly job
  stays hourly.

All instants are timezone-aware :class:`datetime.datetime` objects; :meth:`Schedule.next_after`
returns UTC.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from elowen_sdk import ElowenError

__all__ = ["EXAMPLES", "BadSchedule", "Schedule", "parse_schedule", "zone"]

Kind = Literal["every", "cron", "once"]

EXAMPLES = ("every 30m", "every 2h", "every day at 18:30", "every monday at 09:00", "at 18:30", "at 2026-12-24 09:00", "in 20m", "*/15 9-17 * * mon-fri")
"""Schedules shown to a user whose input was not understood."""

_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_DAYS = {"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 0}
_DAY_NAMES = {
    **{k: v for k, v in _DAYS.items()},
    "monday": 1,
    "tuesday": 2,
    "wednesday": 3,
    "thursday": 4,
    "friday": 5,
    "saturday": 6,
    "sunday": 0,
    "tues": 2,
    "thur": 4,
    "thurs": 4,
}
_DURATION = re.compile(r"^(?:(\d{1,6})\s*)?([a-z]+)$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
_DATETIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ t](\d{1,2}):(\d{2})$")
_MAX_SECONDS = 366 * 86400


class BadSchedule(ElowenError, ValueError):
    """A schedule that was not understood, names an unknown time zone, lies in the past, or
    fires more often than allowed. The message names what was not understood; the API
    answers 422 ``bad_schedule`` with :data:`EXAMPLES`."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``.

    Raises:
        BadSchedule: an unknown or malformed name.
    """
    try:
        if not name or len(name) > 64 or ".." in name or name.startswith("/"):
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder of the database ("America")
        raise BadSchedule(f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC'") from None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule.

    Attributes:
        text: the schedule as typed (stripped).
        tz: the IANA time zone its wall-clock times are in.
        kind: ``every`` (fixed interval), ``cron`` (wall-clock, croniter) or ``once``.
        interval: seconds between fires (``every``).
        anchor: UTC instant the interval counts from (``every``), or the single fire (``once``).
        expr: the 5-field cron expression (``cron``; ``every day at 18:30`` is ``30 18 * * *``).
    """

    text: str
    tz: str
    kind: Kind
    interval: int | None = None
    anchor: datetime | None = None
    expr: str | None = None

    @property
    def one_shot(self) -> bool:
        """Fires at most once."""
        return self.kind == "once"

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after`` (aware), in UTC; ``None``: none (a one-shot
        whose time has passed)."""
        after = after.astimezone(UTC)
        if self.kind == "once":
            assert self.anchor is not None
            return self.anchor if self.anchor > after else None
        if self.kind == "every":
            assert self.anchor is not None and self.interval
            if after < self.anchor:
                return self.anchor
            steps = int((after - self.anchor).total_seconds() // self.interval) + 1
            return self.anchor + timedelta(seconds=steps * self.interval)
        assert self.expr is not None
        tz = ZoneInfo(self.tz)
        wall_hours = self.expr.split()[1] != "*"
        it = croniter(self.expr, after.astimezone(tz))
        for _ in range(16):
            try:
                fire: datetime = it.get_next(datetime).astimezone(UTC)
            except CroniterError:  # a date that never comes (30 February)
                return None
            if fire <= after:
                continue
            if wall_hours and _repeated_wall_time(fire, tz):
                continue
            return fire
        return None  # pragma: no cover - croniter always finds a later time within 16 steps

    def min_gap(self, start: datetime) -> float:
        """The shortest time between two consecutive fires in seconds, sampled over the next
        fires after ``start`` (``inf`` for a one-shot)."""
        if self.kind == "once":
            return float("inf")
        if self.kind == "every":
            assert self.interval is not None
            return float(self.interval)
        fires: list[datetime] = []
        t = start
        for _ in range(48):
            nxt = self.next_after(t)
            if nxt is None:
                break
            fires.append(nxt)
            t = nxt
        gaps = [(b - a).total_seconds() for a, b in zip(fires, fires[1:])]
        return min(gaps) if gaps else float("inf")

    def to_json(self) -> str:
        """The schedule as stored (``cron_jobs.spec``)."""
        return json.dumps(
            {
                "text": self.text,
                "tz": self.tz,
                "kind": self.kind,
                "interval": self.interval,
                "anchor": self.anchor.isoformat() if self.anchor else None,
                "expr": self.expr,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        """The inverse of :meth:`to_json`."""
        d: dict[str, Any] = json.loads(text)
        anchor = datetime.fromisoformat(d["anchor"]) if d.get("anchor") else None
        return cls(d["text"], d["tz"], d["kind"], d.get("interval"), anchor, d.get("expr"))

    def describe(self) -> str:
        """A short human description (``every 30 minutes``, ``30 18 * * * (Europe/Berlin)``)."""
        if self.kind == "every":
            assert self.interval is not None
            return "every " + _human(self.interval)
        if self.kind == "once":
            assert self.anchor is not None
            return "once at " + self.anchor.astimezone(ZoneInfo(self.tz)).strftime("%Y-%m-%d %H:%M %Z")
        return f"{self.expr} ({self.tz})"


def _repeated_wall_time(fire: datetime, tz: ZoneInfo) -> bool:
    """Whether ``fire``'s local wall time already happened earlier that day (the second
    occurrence of a fall-back hour)."""
    local = fire.astimezone(tz).replace(tzinfo=None)
    first = local.replace(tzinfo=tz, fold=0).astimezone(UTC)
    return first < fire


def _human(seconds: int) -> str:
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}" if n != 1 else unit
    return f"{seconds} seconds"


def _duration(text: str) -> int | None:
    """``30m`` / ``2 hours`` / ``hour`` → seconds, or ``None``."""
    m = _DURATION.match(text.replace(" ", "") if text[:1].isdigit() else text)
    if m is None:
        return None
    unit = _UNITS.get(m.group(2))
    if unit is None:
        return None
    n = int(m.group(1)) if m.group(1) else 1
    return n * unit if n > 0 else None


def _clock(text: str) -> tuple[int, int] | None:
    m = _CLOCK.match(text)
    if m is None:
        return None
    h, mi = int(m.group(1)), int(m.group(2))
    return (h, mi) if h < 24 and mi < 60 else None


def _days(text: str) -> str | None:
    """``day`` → ``*``; ``weekday`` → ``1-5``; ``mon,wed`` / ``monday`` → cron day-of-week."""
    if text in ("day", "days"):
        return "*"
    if text in ("weekday", "weekdays"):
        return "1-5"
    if text in ("weekend", "weekends"):
        return "0,6"
    out = []
    for part in re.split(r"\s*(?:,|\band\b)\s*", text):
        part = part.strip().removesuffix("s") if part.strip() not in ("tues", "thurs") else part.strip()
        if part not in _DAY_NAMES:
            return None
        out.append(str(_DAY_NAMES[part]))
    return ",".join(dict.fromkeys(out)) if out else None


def parse_schedule(text: str, tz: str, *, now: datetime | None = None) -> Schedule:
    """Parse ``text`` in time zone ``tz`` (an IANA name); ``now`` (aware, default the current
    time) anchors ``every`` and ``in``, and decides which ``at 18:30`` is next.

    Raises:
        BadSchedule: not understood (the message says which part), an unknown time zone, a
            one-shot time in the past or a wall-clock time that does not exist, an interval
            over a year.
    """
    raw = " ".join(str(text).split())
    low = raw.lower()
    zi = zone(tz)
    now = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    if not low:
        raise BadSchedule("the schedule is empty")
    if len(low) > 200:
        raise BadSchedule("the schedule is too long (over 200 characters)")
    if low.startswith("every "):
        rest = low[6:].strip()
        head, sep, clock = rest.partition(" at ")
        if sep:
            hm = _clock(clock.strip())
            if hm is None:
                raise BadSchedule(f"not a time of day: {clock.strip()!r} (use 24-hour HH:MM, e.g. 18:30)")
            dow = _days(head.strip())
            if dow is None:
                raise BadSchedule(f"not understood: {head.strip()!r} in {raw!r} (use 'day', 'weekday', 'weekend' or day names such as 'monday' or 'sat,sun')")
            return Schedule(raw, tz, "cron", expr=f"{hm[1]} {hm[0]} * * {dow}")
        seconds = _duration(rest)
        if seconds is None:
            raise BadSchedule(f"not an interval: {rest!r} (use a number and a unit, e.g. 'every 30m', 'every 2h', 'every 3 days')")
        if seconds > _MAX_SECONDS:
            raise BadSchedule(f"interval {rest!r} is over a year")
        return Schedule(raw, tz, "every", interval=seconds, anchor=now)
    if low.startswith("in "):
        seconds = _duration(low[3:].strip())
        if seconds is None:
            raise BadSchedule(f"not a duration: {low[3:].strip()!r} (use a number and a unit, e.g. 'in 20m', 'in 2 hours')")
        if seconds > _MAX_SECONDS:
            raise BadSchedule(f"{low[3:].strip()!r} is over a year away")
        return Schedule(raw, tz, "once", anchor=now + timedelta(seconds=seconds))
    if low.startswith("at "):
        rest = low[3:].strip()
        hm = _clock(rest)
        if hm is not None:
            local_now = now.astimezone(zi)
            day = local_now.date()
            for _ in range(3):
                fire = _wall(day, hm, zi)
                if fire > now:
                    return Schedule(raw, tz, "once", anchor=fire)
                day += timedelta(days=1)
        m = _DATETIME.match(rest)
        if m is None:
            raise BadSchedule(f"not a time: {rest!r} (use 'at 18:30' or 'at 2026-12-24 09:00')")
        y, mo, d, h, mi = (int(g) for g in m.groups())
        try:
            day = date(y, mo, d)
        except ValueError:
            raise BadSchedule(f"not a date: {m.group(1)}-{m.group(2)}-{m.group(3)}") from None
        if h > 23 or mi > 59:
            raise BadSchedule(f"not a time of day: {m.group(4)}:{m.group(5)}")
        local = datetime.combine(day, time(h, mi))
        try:
            fire = local.replace(tzinfo=zi).astimezone(UTC)
            back = fire.astimezone(zi).replace(tzinfo=None)
        except OverflowError:  # 9999-12-31 23:59 west of UTC is in the year 10000
            raise BadSchedule(f"{rest} ({tz}) is out of range: use a date before the year 9999") from None
        if back != local:
            raise BadSchedule(f"{rest} does not exist in {tz} (the clocks skip it for daylight saving time)")
        if fire <= now:
            raise BadSchedule(f"{rest} ({tz}) is in the past")
        return Schedule(raw, tz, "once", anchor=fire)
    fields = low.split()
    if len(fields) == 5 and all(re.fullmatch(r"[0-9a-z*/,#?l-]+", f) for f in fields):
        if not croniter.is_valid(low):
            raise BadSchedule(f"not a valid cron expression: {raw!r} (5 fields: minute hour day-of-month month day-of-week)")
        schedule = Schedule(raw, tz, "cron", expr=low)
        if schedule.next_after(now) is None:
            raise BadSchedule(f"{raw!r} never fires (no such date)")
        return schedule
    if len(fields) in (6, 7) and all(re.fullmatch(r"[0-9a-z*/,#?l-]+", f) for f in fields):
        raise BadSchedule(f"{raw!r} has {len(fields)} fields: cron expressions here have 5 (minute hour day-of-month month day-of-week)")
    raise BadSchedule(f"schedule not understood: {raw!r}")


def _wall(day: date, hm: tuple[int, int], zi: ZoneInfo) -> datetime:
    """The UTC instant of wall-clock ``hm`` on ``day``; a time skipped by a spring-forward
    moves to the transition (as croniter does)."""
    local = datetime.combine(day, time(*hm))
    fire = local.replace(tzinfo=zi).astimezone(UTC)
    if fire.astimezone(zi).replace(tzinfo=None) != local:  # in the gap: find the transition
        t = fire - timedelta(hours=3)
        base = t.astimezone(zi).utcoffset()
        while t.astimezone(zi).utcoffset() == base:
            t += timedelta(minutes=1)
        return t
    return fire

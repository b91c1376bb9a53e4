"""Creating and changing cron jobs for a caller: validation, limits and the job view the API
and the brain tools answer. Errors are :class:`JobError` (status, code, message), which the
routes turn into ``{"error": {...}}`` answers and the tools into messages for the model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from elowen_sdk import ElowenError

from .planning import POLICIES
from .runtime import Cron, lost_project
from .schedule import EXAMPLES, BadSchedule, Schedule, parse_schedule
from .store import iso, parse_iso

__all__ = ["DELIVERIES", "Caller", "JobError", "create_job", "job_view", "next_fires", "owned_job", "preview", "set_paused"]

DELIVERIES = ("notify", "none")
"""Where a run's result goes: the owner's notifications (web, push, linked platforms through the
``notify`` service; an owner-only ``cron.result`` event without it) or nowhere (the run record
and its conversation keep it either way)."""

MAX_PROMPT = 8000
MAX_NAME = 100


class JobError(ElowenError):
    """A refused job operation: ``status`` (403, 404, 409, 422), ``code``, message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Caller:
    """Who acts: ``user_id``, ``role``, ``project_ids`` (``None``: every project, admins)."""

    __slots__ = ("project_ids", "role", "user_id")

    def __init__(self, user_id: int, role: str, project_ids: frozenset[int] | None) -> None:
        self.user_id = user_id
        self.role = role
        self.project_ids = project_ids

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def _schedule(cron: Cron, text: Any, tz: Any, now: datetime) -> Schedule:
    if not isinstance(text, str) or not text.strip():
        raise JobError(422, "bad_schedule", "schedule: a non-empty string, e.g. " + ", ".join(repr(e) for e in EXAMPLES))
    if tz is not None and not isinstance(tz, str):
        raise JobError(422, "bad_schedule", "tz: an IANA time zone name such as 'Europe/Berlin'")
    try:
        schedule = parse_schedule(text, tz or cron.config.zone, now=now)
    except BadSchedule as exc:
        raise JobError(422, "bad_schedule", f"{exc}. Examples: " + ", ".join(repr(e) for e in EXAMPLES)) from None
    gap = schedule.min_gap(now)
    if gap < cron.config.min_interval:
        raise JobError(
            422,
            "schedule_too_frequent",
            f"{schedule.text!r} fires every {gap:g} s; the shortest allowed interval is {cron.config.min_interval:g} s ([plugins.cron.config] min_interval)",
        )
    return schedule


def preview(cron: Cron, text: Any, tz: Any, *, count: int = 5) -> dict[str, Any]:
    """``{"schedule", "tz", "description", "next_fires": [UTC text]}`` of a schedule, or
    :class:`JobError` 422."""
    now = datetime.now(UTC)
    schedule = _schedule(cron, text, tz, now)
    fires: list[str] = []
    t: datetime | None = now
    while t is not None and len(fires) < count:
        t = schedule.next_after(t)
        if t is not None:
            fires.append(iso(t))
    return {"schedule": schedule.text, "tz": schedule.tz, "description": schedule.describe(), "next_fires": fires}


def _str(body: dict[str, Any], key: str, default: str, limit: int) -> str:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str) or len(value) > limit:
        raise JobError(422, "validation_error", f"{key}: a string of at most {limit} characters")
    return value.strip()


def create_job(cron: Cron, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    """A new job of ``caller`` from ``body`` (``prompt``, ``schedule``; optional ``tz``,
    ``name``, ``project_id``, ``model``, ``deliver``, ``catchup``, ``catchup_cap``,
    ``paused``); returns :func:`job_view`.

    Raises:
        JobError: 422 ``validation_error`` / ``bad_schedule`` / ``schedule_too_frequent``,
            404 a project the caller cannot see, 409 ``too_many_jobs``.
    """
    unknown = set(body) - {"prompt", "schedule", "tz", "name", "project_id", "model", "deliver", "catchup", "catchup_cap", "paused"}
    if unknown:
        raise JobError(422, "validation_error", f"unknown fields: {', '.join(sorted(unknown))}")
    prompt = _str(body, "prompt", "", MAX_PROMPT)
    if not prompt:
        raise JobError(422, "validation_error", "prompt: what the job asks, a non-empty string")
    now = datetime.now(UTC)
    schedule = _schedule(cron, body.get("schedule"), body.get("tz"), now)
    project_id = body.get("project_id")
    if project_id is not None:
        if isinstance(project_id, bool) or not isinstance(project_id, int) or project_id < 1:
            raise JobError(422, "validation_error", "project_id: a project id or null")
        if caller.project_ids is not None and project_id not in caller.project_ids:
            raise JobError(404, "not_found", f"project {project_id} not found")
    deliver = _str(body, "deliver", "notify", 20)
    if deliver not in DELIVERIES:
        raise JobError(422, "validation_error", f"deliver: one of {', '.join(DELIVERIES)}")
    catchup = _str(body, "catchup", "once" if schedule.one_shot else "skip", 10)
    if catchup not in POLICIES:
        raise JobError(422, "validation_error", f"catchup: one of {', '.join(POLICIES)}")
    cap = body.get("catchup_cap", cron.config.catchup_cap)
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= 1000:
        raise JobError(422, "validation_error", "catchup_cap: a whole number from 1 to 1000")
    paused = body.get("paused", False)
    if not isinstance(paused, bool):
        raise JobError(422, "validation_error", "paused: true or false")
    count = cron.db.store.query_one("SELECT COUNT(*) AS n FROM cron_jobs WHERE owner_id = ? AND state IN ('active', 'paused')", (caller.user_id,))
    if count and count["n"] >= cron.config.max_jobs_per_user:
        raise JobError(409, "too_many_jobs", f"you have {count['n']} jobs; the most is {cron.config.max_jobs_per_user} (remove some with `elowen cron rm`)")
    first = schedule.next_after(now)
    job = cron.db.create_job(
        owner_id=caller.user_id,
        owner_role=caller.role,
        name=_str(body, "name", "", MAX_NAME),
        prompt=prompt,
        schedule=schedule.text,
        tz=schedule.tz,
        spec=schedule.to_json(),
        project_id=project_id,
        model=_str(body, "model", "", 200),
        deliver=deliver,
        catchup=catchup,
        catchup_cap=cap,
        state="paused" if paused else "active",
        next_fire=iso(first) if first else None,
    )
    cron.ctx.store.audit(f"user:{caller.user_id}", "cron.create", f"job:{job['id']}", "ok", {"schedule": schedule.text, "tz": schedule.tz})
    return job_view(cron, job)


def job_view(cron: Cron, job: dict[str, Any], *, last: dict[str, Any] | None = None, with_last: bool = True) -> dict[str, Any]:
    """The API's job record: the row's fields (``spec`` as ``description``) plus ``last_run``
    (the newest run row or ``None``) and ``running``."""
    try:
        description = Schedule.from_json(job["spec"]).describe()
    except (ValueError, KeyError):
        description = job["schedule"]
    out = {k: v for k, v in job.items() if k != "spec"}
    out["description"] = description
    if with_last:
        out["last_run"] = last if last is not None else cron.db.last_runs([job["id"]]).get(job["id"])
    out["running"] = job["id"] in cron.scopes
    return out


def next_fires(job: dict[str, Any], count: int = 5) -> list[str]:
    """The job's next ``count`` fires (UTC text) from its stored schedule, starting with its
    ``next_fire``; ``[]`` when it has none."""
    if not job["next_fire"]:
        return []
    try:
        schedule = Schedule.from_json(job["spec"])
    except (ValueError, KeyError):
        return [job["next_fire"]]
    fires = [job["next_fire"]]
    t: datetime | None = parse_iso(job["next_fire"])
    while t is not None and len(fires) < count:
        t = schedule.next_after(t)
        if t is not None:
            fires.append(iso(t))
    return fires


def owned_job(cron: Cron, caller: Caller, job_id: int) -> dict[str, Any]:
    """The job if the caller owns it (or is an admin).

    Raises:
        JobError: 404 otherwise (a member never learns another member's job exists).
    """
    job = cron.db.job(job_id)
    if job is None or (job["owner_id"] != caller.user_id and not caller.is_admin):
        raise JobError(404, "not_found", f"cron job {job_id} not found")
    return job


def set_paused(cron: Cron, caller: Caller, job_id: int, paused: bool) -> dict[str, Any]:
    """Pause or resume a job. Resuming a ``stopped`` job (its owner was demoted) re-stamps it
    with the owner's current role; a ``done`` one-shot cannot be resumed.

    Raises:
        JobError: 404 not the caller's; 409 ``job_done`` / ``owner_gone`` /
            ``owner_lost_project`` (a stopped job of a project its owner no longer has).
    """
    job = owned_job(cron, caller, job_id)
    if job["state"] == "done":
        raise JobError(409, "job_done", f"cron job {job_id} already fired its one time")
    if paused:
        if job["state"] == "active":
            cron.db.update_job(job_id, state="paused")
    elif job["state"] != "active":
        fields: dict[str, Any] = {"state": "active", "stop_reason": None}
        if job["state"] == "stopped":
            users = cron._users()
            user = users.user(int(job["owner_id"])) if users else {"role": job["owner_role"]}
            if user is None:
                raise JobError(409, "owner_gone", f"the owner of cron job {job_id} was deleted; remove the job")
            lost = lost_project(job, user)
            if lost is not None:
                raise JobError(409, "owner_lost_project", f"cron job {job_id} works in project {job['project_id']}, which its owner no longer has")
            fields["owner_role"] = user["role"]
        if job["next_fire"] is not None and parse_iso(job["next_fire"]) < datetime.now(UTC) and job["state"] == "stopped":
            schedule = Schedule.from_json(job["spec"])
            nxt = schedule.next_after(datetime.now(UTC))
            fields["next_fire"] = iso(nxt) if nxt else None  # fires while stopped are not owed
        cron.db.update_job(job_id, **fields)
    cron.ctx.store.audit(f"user:{caller.user_id}", "cron.pause" if paused else "cron.resume", f"job:{job_id}", "ok", None)
    updated = cron.db.job(job_id)
    assert updated is not None
    return job_view(cron, updated)

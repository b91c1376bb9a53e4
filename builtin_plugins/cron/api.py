"""HTTP routes of the ``cron`` plugin (builtin: mounted at these paths).

=================================  ===============================================================
``GET /cron/jobs``                 the caller's jobs (``?all=1``: every owner's, admins), page
                                   shape ``{"items", "next_cursor"}``, ``?limit=`` 1–200
``POST /cron/jobs``                ``{prompt, schedule, tz?, name?, project_id?, model?, deliver?,
                                   catchup?, catchup_cap?, paused?}`` → 201 the job
``GET /cron/jobs/{id}``            the job with ``next_fires`` (the next five)
``DELETE /cron/jobs/{id}``         remove the job and its runs (a running turn is cancelled)
``POST /cron/jobs/{id}/pause``     stop firing (due fires are recorded ``missed``)
``POST /cron/jobs/{id}/resume``    fire again
``POST /cron/jobs/{id}/run``       run now (202 the run); 409 ``run_in_progress``
``GET /cron/jobs/{id}/runs``       the job's runs, newest first (page shape)
``POST /cron/preview``             ``{schedule, tz?}`` → ``{description, next_fires}`` or 422
``GET /cron/status``               the ticker's heartbeat, gaps, the next fire (any user)
=================================  ===============================================================

A member sees and changes only their own jobs (another's answers 404); an admin may see and
manage every job (``?all=1``), but a job always runs with its **owner's** powers. Agent tokens
are refused (403). Errors: 422 ``bad_schedule`` (what was not understood, with examples),
422 ``schedule_too_frequent`` (below ``min_interval``), 422 ``validation_error``, 409
``too_many_jobs`` / ``job_done`` / ``run_in_progress``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from elowen_sdk import HTTPError, Request, Response, Route
from elowen_sdk.pagination import decode_cursor, encode_cursor, page

from .jobs import Caller, JobError, create_job, job_view, next_fires, owned_job, preview, set_paused
from .runtime import Cron

__all__ = ["routes"]

_DIGITS = re.compile(r"[0-9]{1,18}")


def _caller(request: Request) -> Caller:
    p = request.principal
    if p is None or p.user_id is None:
        raise HTTPError(401, "unauthorized", "a user token is needed")
    if p.scope != "full":
        raise HTTPError(403, "forbidden", "agent tokens cannot manage cron jobs")
    return Caller(p.user_id, p.role, p.project_ids)


def _id(request: Request) -> int:
    value = request.params.get("id", "")
    if not _DIGITS.fullmatch(value) or int(value) < 1:
        raise HTTPError(422, "validation_error", "id must be a positive integer")
    return int(value)


def _limit(request: Request, default: int = 50) -> int:
    value = request.query.get("limit")
    if value in (None, ""):
        return default
    if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= 200:
        raise HTTPError(422, "validation_error", "limit must be a whole number from 1 to 200")
    return int(value)


def _guard(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
    async def handler(request: Request) -> Any:
        try:
            result = fn(request)
            if hasattr(result, "__await__"):
                result = await result
            return result
        except JobError as exc:
            raise HTTPError(exc.status, exc.code, exc.message) from None

    handler.__name__ = fn.__name__
    return handler


def routes(runtime: Callable[[], Cron]) -> list[Route]:
    """The routes over the plugin's current :class:`Cron` runtime."""

    def list_jobs(request: Request) -> dict[str, Any]:
        caller = _caller(request)
        every = request.query.get("all") in ("1", "true", "yes")
        if every and not caller.is_admin:
            raise HTTPError(403, "forbidden", "only admins may list every owner's jobs")
        cron, limit = runtime(), _limit(request)
        rows = cron.db.jobs(owner_id=None if every else caller.user_id, after=decode_cursor(request.query.get("cursor")), limit=limit)
        last = cron.db.last_runs([r["id"] for r in rows[:limit]])
        return page([job_view(cron, r, last=last.get(r["id"])) for r in rows], limit)

    def create(request: Request) -> Response:
        body = request.json
        if not isinstance(body, dict):
            raise HTTPError(422, "validation_error", "the body must be a JSON object with prompt and schedule")
        return Response(create_job(runtime(), _caller(request), body), status=201)

    def show(request: Request) -> dict[str, Any]:
        cron = runtime()
        job = owned_job(cron, _caller(request), _id(request))
        view = job_view(cron, job)
        view["next_fires"] = next_fires(job) if job["state"] in ("active", "paused") else []
        return view

    def remove(request: Request) -> dict[str, Any]:
        cron, caller = runtime(), _caller(request)
        job = owned_job(cron, caller, _id(request))
        scope = cron.scopes.get(job["id"])
        if scope is not None:
            scope.cancel()
        cron.db.delete_job(job["id"])
        cron.ctx.store.audit(f"user:{caller.user_id}", "cron.delete", f"job:{job['id']}", "ok", None)
        return {"deleted": job["id"]}

    def pause(request: Request) -> dict[str, Any]:
        return set_paused(runtime(), _caller(request), _id(request), True)

    def resume(request: Request) -> dict[str, Any]:
        return set_paused(runtime(), _caller(request), _id(request), False)

    def run_now(request: Request) -> Response:
        cron, caller = runtime(), _caller(request)
        job = owned_job(cron, caller, _id(request))
        if job["state"] == "stopped":
            raise JobError(409, "job_stopped", f"cron job {job['id']} is stopped ({job['stop_reason']}); resume it first")
        run_id = cron.db.claim_manual(job["id"])
        if run_id is None:
            open_run = cron.db.open_run(job["id"])
            raise JobError(409, "run_in_progress", f"run {open_run['id'] if open_run else '?'} of cron job {job['id']} is still going")
        cron.ctx.store.audit(f"user:{caller.user_id}", "cron.run_now", f"job:{job['id']}", "ok", {"run_id": run_id})
        cron.start_batch(job["id"], [run_id])
        return Response(cron.db.run(run_id), status=202)

    def runs(request: Request) -> dict[str, Any]:
        cron = runtime()
        job = owned_job(cron, _caller(request), _id(request))
        limit = _limit(request)
        rows = cron.db.runs(job["id"], before=decode_cursor(request.query.get("cursor")), limit=limit)
        items = rows[:limit]
        return {"items": items, "next_cursor": encode_cursor(items[-1]["id"]) if len(rows) > limit and items else None}

    def preview_route(request: Request) -> dict[str, Any]:
        _caller(request)
        body = request.json if isinstance(request.json, dict) else {}
        return preview(runtime(), body.get("schedule"), body.get("tz"))

    def status(request: Request) -> dict[str, Any]:
        _caller(request)
        return runtime().status()

    return [
        Route("GET", "/cron/jobs", _guard(list_jobs), summary="The caller's cron jobs (?all=1: every owner's, admins)."),
        Route("POST", "/cron/jobs", _guard(create), summary="Add a cron job: a prompt run on a schedule as the caller."),
        Route("GET", "/cron/jobs/{id}", _guard(show), summary="One cron job with its next fires."),
        Route("DELETE", "/cron/jobs/{id}", _guard(remove), summary="Remove a cron job and its runs."),
        Route("POST", "/cron/jobs/{id}/pause", _guard(pause), summary="Pause a cron job."),
        Route("POST", "/cron/jobs/{id}/resume", _guard(resume), summary="Resume a cron job."),
        Route("POST", "/cron/jobs/{id}/run", _guard(run_now), summary="Run a cron job now."),
        Route("GET", "/cron/jobs/{id}/runs", _guard(runs), summary="A cron job's runs, newest first."),
        Route("POST", "/cron/preview", _guard(preview_route), summary="Parse a schedule and show its next fires."),
        Route("GET", "/cron/status", _guard(status), summary="The cron ticker's heartbeat and gaps."),
    ]

"""Cron jobs in a real kernel with the real brain and inference plugins and the scripted model
server: REST validation and access, runs as the owner's own conversation, delivery through the
notify service and without it, overlap, pause, owner demotion and deletion."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import trio

from elowen_builtins.cron.store import parse_iso
from elowen_sdk import Service
from tests.support.model_server import Reply
from tests.support.waiting import until

from .conftest import CronEnv


async def new_job(cron: CronEnv, user: int, schedule: str = "every 1m", prompt: str = "summarise my open tasks", **extra: Any) -> dict[str, Any]:
    cron.brain.script(fallback=Reply(text="Here is your summary."))
    response = await cron.api(
        "POST", "/cron/jobs", user, {"prompt": prompt, "schedule": schedule, **extra, **({"model": cron.brain.spec} if "model" not in extra else {})}
    )
    assert response.status == 201
    return response.body


def fire(cron: CronEnv, job: dict[str, Any], seconds: float = 1) -> int:
    """Tick as if the clock were ``seconds`` after the job's next fire."""
    row = cron.rt.db.job(job["id"])
    return cron.rt.tick(parse_iso(row["next_fire"]) + timedelta(seconds=seconds))


async def finished(cron: CronEnv, job_id: int, count: int = 1) -> list[dict[str, Any]]:
    def done() -> list[dict[str, Any]] | None:
        rows = cron.kernel.store.query("SELECT * FROM cron_runs WHERE job_id = ? ORDER BY id", (job_id,))
        return rows if len(rows) >= count and all(r["status"] not in ("claimed", "running") for r in rows) else None

    rows = await until(done, 20, f"{count} finished runs of job {job_id}")
    assert rows
    return rows


def events(cron: CronEnv, type_: str) -> list[dict[str, Any]]:
    return [json.loads(r["data"]) for r in cron.kernel.store.query("SELECT data FROM events WHERE type = ? ORDER BY id", (type_,))]


async def test_bad_schedules_are_422_with_examples(cron: CronEnv) -> None:
    admin = cron.brain.admin
    err = await cron.error("POST", "/cron/jobs", admin, {"prompt": "x", "schedule": "every fortnight"})
    assert (err.status, err.code) == (422, "bad_schedule")
    assert "'fortnight'" in err.message and "Examples:" in err.message and "every day at 18:30" in err.message
    err = await cron.error("POST", "/cron/jobs", admin, {"prompt": "x", "schedule": "every 10s"})
    assert (err.status, err.code) == (422, "schedule_too_frequent") and "30 s" in err.message
    err = await cron.error("POST", "/cron/jobs", admin, {"prompt": "x", "schedule": "* * * * *", "tz": "Nowhere/Land"})
    assert err.code == "bad_schedule" and "unknown time zone" in err.message
    for body, word in [
        ({"schedule": "every 1m"}, "prompt"),
        ({"prompt": "x", "schedule": "every 1m", "catchup": "maybe"}, "catchup"),
        ({"prompt": "x", "schedule": "every 1m", "colour": 1}, "colour"),
    ]:
        err = await cron.error("POST", "/cron/jobs", admin, body)
        assert err.status == 422 and word in err.message
    preview = await cron.api("POST", "/cron/preview", admin, {"schedule": "every day at 18:30", "tz": "Europe/Berlin"})
    assert preview["description"] == "30 18 * * * (Europe/Berlin)" and len(preview["next_fires"]) == 5


async def test_a_fire_is_a_turn_of_the_owners_own_conversation(cron: CronEnv) -> None:
    member = cron.brain.member
    job = await new_job(cron, member, name="tasks digest")
    assert job["owner_id"] == member and job["state"] == "active" and job["tz"] == "UTC" and job["catchup"] == "skip"
    assert fire(cron, job) == 1
    (run,) = await finished(cron, job["id"])
    assert run["status"] == "ran" and run["result"] == "Here is your summary." and run["trigger"] == "schedule"
    conv = cron.brain.service.conversation(member, run["conversation_id"])  # the member's own conversation
    assert conv["user_id"] == member and conv["title"].startswith("Scheduled: tasks digest")
    request = cron.brain.server.requests[-1]
    assert "summarise my open tasks" in request.prompt and f"Scheduled run {run['id']} of cron job {job['id']}" in request.prompt
    # no notify service: the result is an event for the owner only
    (result,) = events(cron, "cron.result")
    assert result["audience"] == [member] and result["body"] == "Here is your summary." and run["delivered"] == "event"
    # the schedule moved on by one interval and the job lists its last run
    listed = await cron.api("GET", "/cron/jobs", member)
    assert [j["id"] for j in listed["items"]] == [job["id"]] and listed["items"][0]["last_run"]["status"] == "ran"
    assert parse_iso(listed["items"][0]["next_fire"]) - parse_iso(job["next_fire"]) == timedelta(minutes=1)


class Notifications:
    """A stand-in for the ``notify`` plugin (built separately): records what it is asked."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str, str, str]] = []

    async def notify(self, user_id: int, title: str, body: str, *, url: str | None = None, urgency: str = "normal", kind: str = "message") -> int:
        assert kind == "cron"
        self.sent.append((user_id, title, body, urgency))
        return len(self.sent)

    def register_surface(self, surface: Any) -> None:
        raise AssertionError("cron registers no surface")

    def unregister_surface(self, name: str) -> None:
        raise AssertionError("cron registers no surface")


async def test_results_go_through_the_notify_service_when_offered(cron: CronEnv) -> None:
    notes = Notifications()
    cron.kernel.contributions.add("notify", "service", Service("notify", notes), [])
    job = await new_job(cron, cron.brain.member, name="digest")
    ran = await cron.api("POST", f"/cron/jobs/{job['id']}/run", cron.brain.member)
    assert ran.status == 202 and ran.body["trigger"] == "manual"
    (run,) = await finished(cron, job["id"])
    assert run["delivered"] == "notify:1" and notes.sent == [(cron.brain.member, "Scheduled: digest", "Here is your summary.", "normal")]
    assert events(cron, "cron.result") == []
    # a failed run is sent as urgent
    cron.brain.script(fallback=Reply(status=500, error_message="the model is down"))
    await cron.api("POST", f"/cron/jobs/{job['id']}/run", cron.brain.member)
    runs = await finished(cron, job["id"], 2)
    assert runs[1]["status"] == "failed" and "model call failed" in runs[1]["error"]
    assert notes.sent[1][1] == "Scheduled run failed: digest" and notes.sent[1][3] == "high"


async def test_no_overlap_a_fire_during_a_run_is_skipped(cron: CronEnv) -> None:
    admin = cron.brain.admin
    job = await new_job(cron, admin)
    cron.brain.script(fallback=Reply(text="slow", delay=3))
    await cron.api("POST", f"/cron/jobs/{job['id']}/run", admin)
    await until(lambda: cron.rt.db.open_run(job["id"]) and cron.rt.db.open_run(job["id"])["status"] == "running", 10, "the manual run to start")
    err = await cron.error("POST", f"/cron/jobs/{job['id']}/run", admin)
    assert (err.status, err.code) == (409, "run_in_progress")
    assert fire(cron, job) == 0
    runs = await finished(cron, job["id"], 2)
    assert [(r["trigger"], r["status"]) for r in runs] == [("manual", "ran"), ("schedule", "skipped")]
    assert "still going" in runs[1]["error"]


async def test_paused_fires_are_recorded_missed(cron: CronEnv) -> None:
    admin = cron.brain.admin
    job = await new_job(cron, admin)
    assert (await cron.api("POST", f"/cron/jobs/{job['id']}/pause", admin))["state"] == "paused"
    fire(cron, job, seconds=61)  # two fires due
    runs = await finished(cron, job["id"], 2)
    assert [(r["status"], r["error"]) for r in runs] == [("missed", "the job was paused")] * 2
    assert (await cron.api("POST", f"/cron/jobs/{job['id']}/resume", admin))["state"] == "active"
    fire(cron, job)
    runs = await finished(cron, job["id"], 3)
    assert runs[-1]["status"] == "ran"


async def test_members_see_only_their_own_jobs(cron: CronEnv) -> None:
    admin, member = cron.brain.admin, cron.brain.member
    job = await new_job(cron, admin)
    for method, path in [
        ("GET", f"/cron/jobs/{job['id']}"),
        ("POST", f"/cron/jobs/{job['id']}/run"),
        ("DELETE", f"/cron/jobs/{job['id']}"),
        ("GET", f"/cron/jobs/{job['id']}/runs"),
    ]:
        err = await cron.error(method, path, member)
        assert (err.status, err.code) == (404, "not_found"), path
    assert (await cron.api("GET", "/cron/jobs", member))["items"] == []
    assert (await cron.error("GET", "/cron/jobs", member, all="1")).status == 403
    assert [j["id"] for j in (await cron.api("GET", "/cron/jobs", admin, all="1"))["items"]] == [job["id"]]
    err = await cron.error("POST", "/cron/jobs", member, {"prompt": "x", "schedule": "every 1m", "project_id": cron.brain.project_id + 50})
    assert err.status == 404


async def test_demoted_or_deleted_owner_stops_their_jobs(cron: CronEnv) -> None:
    admin, member = cron.brain.admin, cron.brain.member
    admin_job = await new_job(cron, admin)
    member_job = await new_job(cron, member)
    store = cron.kernel.store
    # demotion, announced as the daemon does (user.updated)
    store.execute("UPDATE users SET role = 'member' WHERE id = ?", (admin,))
    cron.kernel.events.publish("user.updated", {"id": admin, "audience": []})
    await until(lambda: cron.rt.db.job(admin_job["id"])["state"] == "stopped", 5, "the demoted owner's job to stop")
    assert cron.rt.db.job(admin_job["id"])["stop_reason"] == "owner demoted (admin → member)"
    assert cron.rt.db.job(member_job["id"])["state"] == "active"
    fire(cron, admin_job)  # the member's job fires; the stopped one records nothing
    await finished(cron, member_job["id"])
    assert store.query("SELECT * FROM cron_runs WHERE job_id = ?", (admin_job["id"],)) == []
    # deletion
    store.execute("DELETE FROM users WHERE id = ?", (member,))
    cron.kernel.events.publish("user.removed", {"id": member, "audience": []})
    await until(lambda: cron.rt.db.job(member_job["id"])["state"] == "stopped", 5, "the deleted owner's job to stop")
    assert cron.rt.db.job(member_job["id"])["stop_reason"] == "owner deleted"


async def test_owner_is_rechecked_before_every_run(cron: CronEnv) -> None:
    admin = cron.brain.admin
    job = await new_job(cron, admin)
    cron.kernel.store.execute("UPDATE users SET role = 'member' WHERE id = ?", (admin,))  # no event
    fire(cron, job)
    (run,) = await finished(cron, job["id"])
    assert run["status"] == "failed" and run["error"] == "job stopped: owner demoted (admin → member)"
    assert run["conversation_id"] is None and cron.brain.server.requests == []
    assert cron.rt.db.job(job["id"])["state"] == "stopped"
    # resuming re-stamps the job with the owner's current powers
    resumed = await cron.api("POST", f"/cron/jobs/{job['id']}/resume", admin)
    assert resumed["state"] == "active" and resumed["owner_role"] == "member"


async def test_deleting_a_job_cancels_its_run(cron: CronEnv) -> None:
    admin = cron.brain.admin
    job = await new_job(cron, admin)
    cron.brain.script(fallback=Reply(text="slow", delay=30))
    await cron.api("POST", f"/cron/jobs/{job['id']}/run", admin)
    await until(lambda: job["id"] in cron.rt.scopes and cron.rt.db.open_run(job["id"]) and cron.rt.db.open_run(job["id"])["status"] == "running", 10, "the run")
    assert (await cron.api("DELETE", f"/cron/jobs/{job['id']}", admin)) == {"deleted": job["id"]}
    await until(lambda: job["id"] not in cron.rt.scopes, 10, "the run to be cancelled")
    assert cron.rt.db.job(job["id"]) is None
    with trio.move_on_after(0.2):
        await trio.sleep_forever()


async def test_a_failing_ticker_is_restarted_and_the_gap_recorded(cron: CronEnv) -> None:
    rt = cron.rt
    real = rt.tick
    calls = {"n": 0}

    def flaky(now: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("disk hiccup")
        return real(now)

    rt.tick = flaky
    rt.wake.set()
    await until(lambda: (rt.db.ticker() or {}).get("restarts") == 1, 10, "the ticker to be restarted")
    status = await cron.api("GET", "/cron/status", cron.brain.member)
    assert status["ticker"]["restarts"] == 1 and status["ticker"]["alive"]
    assert [g["reason"] for g in status["gaps"]] == ["ticker_restarted"]


async def test_disabling_the_plugin_stops_the_ticker_and_its_runs(cron: CronEnv) -> None:
    admin = cron.brain.admin
    job = await new_job(cron, admin)
    cron.brain.script(fallback=Reply(text="slow", delay=30))
    await cron.api("POST", f"/cron/jobs/{job['id']}/run", admin)
    await until(lambda: (cron.rt.db.open_run(job["id"]) or {}).get("status") == "running", 10, "the run")
    rt = cron.rt
    await cron.kernel.registry.disable("cron")
    assert cron.kernel.registry.get("cron").state == "disabled"
    (run,) = cron.kernel.store.query("SELECT * FROM cron_runs WHERE job_id = ?", (job["id"],))
    assert run["status"] == "failed" and run["error"].startswith("cancelled")
    beat = rt.db.ticker()["heartbeat"]
    rt.wake.set()
    await trio.sleep(0.3)
    assert rt.db.ticker()["heartbeat"] == beat  # no ticker left running


async def test_recovery_runs_claimed_fires_and_never_repeats_running_ones(cron: CronEnv) -> None:
    """What a restart finds (the daemon test kills a real process at random; this pins each case)."""
    admin = cron.brain.admin
    job = await new_job(cron, admin)
    store = cron.kernel.store
    claimed = store.execute(
        "INSERT INTO cron_runs (job_id, scheduled_for, trigger, status, claimed_at) VALUES (?, '2026-01-01T00:00:00.000Z', 'schedule', 'claimed', '2026-01-01T00:00:00.000Z')",
        (job["id"],),
    )
    running = store.execute(
        "INSERT INTO cron_runs (job_id, scheduled_for, trigger, status, claimed_at, started_at, conversation_id) "
        "VALUES (?, '2025-12-31T23:00:00.000Z', 'schedule', 'running', '2025-12-31T23:00:00.000Z', '2025-12-31T23:00:01.000Z', 99)",
        (job["id"],),
    )
    cron.rt.recover()
    await finished(cron, job["id"], 2)
    assert cron.rt.db.run(running)["status"] == "failed" and cron.rt.db.run(running)["error"].startswith("interrupted")
    assert cron.rt.db.run(claimed)["status"] == "ran"
    seen = [r.prompt for r in cron.brain.server.requests if "Scheduled run" in r.prompt]
    assert len(seen) == 1 and f"Scheduled run {claimed} " in seen[0]  # the running one was not run again


async def test_a_claim_is_compare_and_set(cron: CronEnv) -> None:
    job = await new_job(cron, cron.brain.admin)
    row = cron.rt.db.job(job["id"])
    records = [(row["next_fire"], "schedule", "missed", "x")]
    assert cron.rt.db.claim(row, records, "2099-01-01T00:00:00.000Z", done=False) == []
    # a second claim from the same (now stale) view of the job writes nothing
    assert cron.rt.db.claim(row, records, "2099-01-01T00:00:00.000Z", done=False) is None
    assert len(cron.kernel.store.query("SELECT id FROM cron_runs WHERE job_id = ?", (job["id"],))) == 1


async def test_show_lists_the_next_fires_of_the_stored_schedule(cron: CronEnv) -> None:
    admin = cron.brain.admin
    job = await new_job(cron, admin, schedule="every 2h")
    await trio.sleep(1.1)  # a re-parse now would shift an interval's grid: the stored anchor must be used
    shown = await cron.api("GET", f"/cron/jobs/{job['id']}", admin)
    fires = [parse_iso(f) for f in shown["next_fires"]]
    assert shown["next_fires"][0] == job["next_fire"] and len(fires) == 5
    assert all(b - a == timedelta(hours=2) for a, b in zip(fires, fires[1:]))
    once = await new_job(cron, admin, schedule="in 30m")
    assert (await cron.api("GET", f"/cron/jobs/{once['id']}", admin))["next_fires"] == [once["next_fire"]]

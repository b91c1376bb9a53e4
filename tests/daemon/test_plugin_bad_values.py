"""Values a careless (or hostile) client sends to the plugins' routes that once ended in a 500:
text with an unpaired surrogate (valid JSON ``"\\ud800"``, no UTF-8), integers beyond SQLite's
64 bits, path ids of 19+ digits or non-ASCII digits, a one-shot date whose UTC instant falls
outside the calendar. Each is now a clear 4xx with the API's error shape, and the daemon keeps
serving. Real daemon with the builtin plugins, HTTP on 127.0.0.1."""

from __future__ import annotations

import pytest

from .conftest import DaemonProc
from .helpers import assert_error_shape

JSON = {"Content-Type": "application/json"}
SURROGATE = '"\\ud800 oops"'
HUGE = "123456789012345678901234567890"


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/memories", '{"text": %s}'.replace("%s", SURROGATE)),
        ("/cron/jobs", '{"prompt": %s, "schedule": "every 2h"}'.replace("%s", SURROGATE)),
        ("/cron/jobs", '{"prompt": "ok", "schedule": "every 2h", "name": %s}'.replace("%s", SURROGATE)),
        ("/notifications/test", '{"title": %s}'.replace("%s", SURROGATE)),
        ("/memories", '{"text": "ok", "project_id": %s}'.replace("%s", HUGE)),
        ("/memories/purge", '{"user_id": %s}'.replace("%s", HUGE)),
        ("/cron/jobs", '{"prompt": "ok", "schedule": "every 2h", "project_id": %s}'.replace("%s", HUGE)),
        ("/cron/jobs", '{"prompt": "ok", "schedule": "every 2h", "catchup_cap": -%s}'.replace("%s", HUGE)),
    ],
)
def test_unstorable_json_values_are_refused_not_a_500(shared_daemon: DaemonProc, path: str, raw: str) -> None:
    with shared_daemon.admin() as admin:
        r = admin.post(path, content=raw, headers=JSON)
        error = assert_error_shape(r, 422)
        assert error["code"] == "validation_error"
        assert admin.get("/memories").status_code == 200  # still serving


@pytest.mark.parametrize(
    ("schedule", "tz"),
    [("at 9999-12-31 23:59", "America/New_York"), ("at 0001-01-01 00:00", "Asia/Tokyo")],
)
def test_a_one_shot_outside_the_calendar_is_a_bad_schedule(shared_daemon: DaemonProc, schedule: str, tz: str) -> None:
    with shared_daemon.admin() as admin:
        for path, body in (("/cron/preview", {"schedule": schedule, "tz": tz}), ("/cron/jobs", {"prompt": "x", "schedule": schedule, "tz": tz})):
            error = assert_error_shape(admin.post(path, json=body), 422)
            assert error["code"] == "bad_schedule", error


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", f"/tasks/{HUGE}/diff", 404),
        ("GET", f"/tasks/{HUGE}/worktree", 404),
        ("POST", f"/tasks/{HUGE}/merge", 404),
        ("GET", f"/core-loop/projects/{HUGE}", 400),
        ("POST", f"/core-loop/projects/{HUGE}/approve", 400),
        ("PATCH", f"/core-loop/tasks/{HUGE}", 400),
        ("GET", "/core-loop/projects/\u0663", 400),  # ARABIC-INDIC DIGIT THREE is not project 3
    ],
)
def test_path_ids_beyond_64_bits_or_not_ascii(shared_daemon: DaemonProc, method: str, path: str, status: int) -> None:
    with shared_daemon.admin() as admin:
        r = admin.request(method, path, json={} if method != "GET" else None)
        assert_error_shape(r, status)

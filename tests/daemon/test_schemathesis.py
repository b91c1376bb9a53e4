"""Property-based API test driven by the daemon's own /openapi.json (schemathesis): no
generated request, valid or not, gets a 5xx, and every error has the error shape.

``GET /events`` is left out here (a stream never ends; it has its own tests). Plugin routes
(``x-elowen-plugin`` in /openapi.json) are left out too: their bodies are opaque to the
daemon's document and each plugin tests its own routes; the daemon here runs without plugins,
and the skip keeps it so if that changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from .conftest import start_daemon
from .helpers import make_project

EXAMPLES_PER_OPERATION = 15


@pytest.mark.slow
def test_generated_requests_never_get_a_server_error(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "home", "--no-plugins")
    try:
        with d.admin() as admin:
            pid = make_project(admin, tmp_path / "proj", "proj")
            for i in range(3):
                admin.post("/tasks", json={"title": f"t{i}", "project_id": pid})
        schema = schemathesis.openapi.from_url(f"{d.url}/openapi.json")
        headers = {"Authorization": f"Bearer {d.admin_token}"}
        calls = 0
        operations = [r.ok() for r in schema.get_all_operations()]
        assert len(operations) >= 25
        for operation in operations:
            if operation.path == "/events" or "x-elowen-plugin" in operation.definition.raw:
                continue

            @settings(
                max_examples=EXAMPLES_PER_OPERATION,
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy())
            def check(case: schemathesis.Case) -> None:
                nonlocal calls
                calls += 1
                response = case.call(base_url=d.url, headers=headers, timeout=10)
                assert response.status_code < 500, (case.method, case.formatted_path, response.status_code, response.text)
                if response.status_code >= 400:
                    body = response.json()
                    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body

            check()
        assert calls >= 100
        print(f"schemathesis: {calls} generated requests over {len(operations) - 1} operations, no 5xx")
        assert "unhandled error" not in d.output()
    finally:
        d.stop()

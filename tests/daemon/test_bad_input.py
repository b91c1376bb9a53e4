"""Bad input on every endpoint (read from /openapi.json) gives a 4xx with the error shape,
never a 5xx."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import DaemonProc, start_daemon
from .helpers import assert_error_shape, make_project


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, dict]]:
    tmp = tmp_path_factory.mktemp("bad")
    d = start_daemon(tmp / "home", "--no-plugins")
    with d.admin() as admin:
        pid = make_project(admin, tmp / "proj", "proj")
        task = admin.post("/tasks", json={"title": "t", "project_id": pid}).json()["id"]
        doc = admin.get("/openapi.json").json()
    try:
        yield d, {"doc": doc, "project": pid, "task": task}
    finally:
        d.stop()


def _operations(doc: dict) -> list[tuple[str, str, dict]]:
    return [(m.upper(), path, op) for path, ops in doc["paths"].items() for m, op in ops.items()]


def _fill(path: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, path)


def _real(path: str, ctx: dict) -> str:
    return path.replace("{task_id}", str(ctx["task"])).replace("{user_id}", "1").replace("{project_id}", str(ctx["project"])).replace("{name}", "nope")


def test_every_body_endpoint_rejects_bad_bodies(env: tuple[DaemonProc, dict]) -> None:
    d, ctx = env
    ops = [(m, p, op) for m, p, op in _operations(ctx["doc"]) if "requestBody" in op]
    assert len(ops) >= 10
    with d.admin() as c:
        for method, path, _ in ops:
            url = _real(path, ctx)
            for content, status in (
                (b"{not json", 400),
                (b"\xff\xfe", 400),
                (b"[" * 100_000, 400),
                (b"NaN", 400),
                (b"[1, 2]", 422),
                (b'"text"', 422),
                (b'{"unknown_field": 1}', 422),
            ):
                r = c.request(method, url, content=content, headers={"Content-Type": "application/json"})
                err = assert_error_shape(r)
                assert r.status_code in (status, 404), (method, url, content[:20], r.status_code, r.text)
            r = c.request(method, url, content=b'{"x": "' + b"a" * (2 * 1024 * 1024) + b'"}')
            assert_error_shape(r, 413)
        # wrong types per field
        for method, url, body in (
            ("POST", "/tasks", {"title": 5, "project_id": ctx["project"]}),
            ("POST", "/tasks", {"title": "x", "project_id": "1"}),
            ("POST", "/tasks", {"title": "x", "project_id": ctx["project"], "priority": 9}),
            ("POST", "/tasks", {"title": "x", "project_id": ctx["project"], "priority": True}),
            ("POST", "/tasks", {"title": "x", "project_id": ctx["project"], "deps": "1"}),
            ("POST", "/tasks", {"title": "x", "project_id": ctx["project"], "labels": ["a b"]}),
            ("POST", "/tasks", {"title": "", "project_id": ctx["project"]}),
            ("POST", "/tasks", {"title": "x", "project_id": 10**30}),
            ("PATCH", f"/tasks/{ctx['task']}", {"state": "done"}),
            ("POST", "/users", {"name": "x", "role": "root"}),
            ("POST", "/projects", {"name": "x", "path": "relative/path"}),
            ("POST", "/projects", {"name": "x", "path": "/no/such/folder"}),
            ("POST", "/projects", {"name": "x", "path": "/tmp/\u0000x"}),
            ("PATCH", "/plugins/nope/config", {"values": "x"}),
        ):
            err = assert_error_shape(c.request(method, url, json=body), 422)
            assert err["code"] in ("validation_error", "invalid_path")


def test_every_path_endpoint_rejects_unknown_and_malformed_ids(env: tuple[DaemonProc, dict]) -> None:
    d, ctx = env
    ops = [(m, p, op) for m, p, op in _operations(ctx["doc"]) if "{" in p]
    with d.admin() as c:
        for method, path, op in ops:
            body = {} if "requestBody" in op else None
            for value in ("999999", "abc", "-1", "1.5", "99999999999999999999999", "%00"):
                try:
                    r = c.request(method, _fill(path, value), json=body)
                except httpx.TimeoutException as exc:
                    raise AssertionError(f"{method} {_fill(path, value)} timed out") from exc
                assert 400 <= r.status_code < 500, (method, path, value, r.status_code, r.text)
                assert_error_shape(r)


def test_list_endpoints_reject_bad_paging(env: tuple[DaemonProc, dict]) -> None:
    d, ctx = env
    with d.admin() as c:
        for path in ("/tasks", "/users", "/projects", "/audit"):
            assert_error_shape(c.get(path, params={"cursor": "garbage!"}), 400)
            assert_error_shape(c.get(path, params={"cursor": "djE6LTE"}), 400)  # "v1:-1"
            for limit in ("0", "501", "abc", "-3"):
                assert_error_shape(c.get(path, params={"limit": limit}), 422)
        assert_error_shape(c.get("/tasks", params={"state": "nope"}), 422)
        assert_error_shape(c.get("/events", params={"types": "bad type!"}), 422)
        assert_error_shape(c.get("/events", headers={"Last-Event-ID": "x"}), 400)
        assert_error_shape(c.get("/events", params={"project": 999}), 404)


def test_auth_header_variants(env: tuple[DaemonProc, dict]) -> None:
    d, _ = env
    for header in ("", "Bearer", "Basic abc", "Bearer elw_nope", "Bearer " + "x" * 5000, "Bearer a b", "elw_x"):
        r = httpx.get(f"{d.url}/tasks", headers={"Authorization": header} if header else {})
        assert_error_shape(r, 401)
        assert r.headers.get("WWW-Authenticate") == "Bearer"


def test_pagination_walks_every_item_once(env: tuple[DaemonProc, dict], tmp_path: Path) -> None:
    d, ctx = env
    with d.admin() as c:
        ids = {c.post("/tasks", json={"title": f"p{i}", "project_id": ctx["project"]}).json()["id"] for i in range(7)}
        seen: list[int] = []
        cursor = None
        while True:
            page = c.get("/tasks", params={"limit": 3, **({"cursor": cursor} if cursor else {})}).json()
            seen += [t["id"] for t in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) and ids <= set(seen)

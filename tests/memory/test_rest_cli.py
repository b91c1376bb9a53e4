"""The ``/memories`` routes and ``elowen memory …`` against a real daemon subprocess on a free
loopback port, with two users: every route and command keeps each user to their own
memories; an admin's purge returns a count, never text; bad input answers clear 4xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.conftest import Home, cleanup_home, make_home


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    h = make_home(tmp_path_factory.mktemp("memory-cli"))
    with open(h.path / "config.toml", "a") as f:
        f.write('\n[plugins.memory.config]\nembedding_provider = "none"\n')
    try:
        h.ok("daemon", "start")
        yield h
    finally:
        cleanup_home(h)


@pytest.fixture(scope="module")
def bob(daemon: Home) -> dict[str, Any]:
    created = daemon.json("user", "add", "bob")
    return {"token": created["token"], "id": created["user"]["id"] if "user" in created else created["id"]}


def _api(daemon: Home, token: str) -> httpx.Client:
    return httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_cli_add_list_search_edit_forget_history(daemon: Home) -> None:
    added = daemon.json("memory", "add", "My staging server is stg-2", "--kind", "project", "--importance", "0.9")
    assert added["text"] == "My staging server is stg-2" and added["kind"] == "project" and added["state"] == "current"
    assert [m["id"] for m in daemon.json("memory", "list")][:1] == [added["id"]]
    assert daemon.json("memory", "search", "staging server")[0]["id"] == added["id"]
    new = daemon.json("memory", "edit", str(added["id"]), "--text", "My staging server is stg-3")
    assert new["supersedes"] == added["id"]
    history = daemon.json("memory", "history", str(new["id"]))
    assert [(h["text"], h["state"]) for h in history] == [("My staging server is stg-2", "superseded"), ("My staging server is stg-3", "current")]
    assert history[0]["superseded_actor"] == history[1]["actor"] and history[1]["actor"].startswith("user:")
    assert daemon.json("memory", "forget", str(new["id"])) == {"forgotten": new["id"]}
    assert all(m["id"] != new["id"] for m in daemon.json("memory", "list"))
    assert {m["state"] for m in daemon.json("memory", "list", "--all") if m["id"] in (added["id"], new["id"])} == {"superseded", "forgotten"}
    assert daemon.ok("memory", "list").strip() == "(no memories)"
    assert daemon.ok("memory", "list", "--all").splitlines()[0].split()[:2] == ["ID", "KIND"]
    export = json.loads(daemon.ok("memory", "export"))
    assert {i["id"] for i in export["items"]} >= {added["id"], new["id"]}


def test_cli_errors_exit_non_zero(daemon: Home) -> None:
    proc = daemon.run("memory", "forget", "999999")
    assert proc.returncode == 1 and "no current memory" in proc.stderr
    proc = daemon.run("memory", "add", "")
    assert proc.returncode == 1 and "text" in proc.stderr
    proc = daemon.run("memory", "edit", "1")
    assert proc.returncode == 2
    proc = daemon.run("memory", "history", "abc")
    assert proc.returncode == 2
    proc = daemon.run("memory", "search", "  ")
    assert proc.returncode == 2 and "give the text to search for" in proc.stderr


def test_one_user_never_sees_anothers_memories(daemon: Home, bob: dict[str, Any]) -> None:
    admin = daemon.token()
    alices = daemon.json("memory", "add", "Alice keeps the deploy key in vault-7")
    env = {"ELOWEN_TOKEN": bob["token"]}
    bobs = daemon.json("memory", "add", "Bob prefers tabs over spaces", env=env)
    # the CLI, as bob: only his own
    for args in (("memory", "list"), ("memory", "list", "--all"), ("memory", "search", "vault deploy key tabs")):
        texts = [m["text"] for m in daemon.json(*args, env=env)]
        assert "Alice keeps the deploy key in vault-7" not in texts and "Bob prefers tabs over spaces" in texts, args
    assert "vault-7" not in daemon.ok("memory", "export", env=env)
    for args in (("memory", "forget", str(alices["id"])), ("memory", "history", str(alices["id"])), ("memory", "edit", str(alices["id"]), "--text", "x")):
        proc = daemon.run(*args, env=env)
        assert proc.returncode == 1 and "vault-7" not in proc.stdout + proc.stderr, args
    # every route, as bob, on alice's memory: 404, no text
    with _api(daemon, bob["token"]) as api:
        mid = alices["id"]
        for method, path, body in [
            ("GET", f"/memories/{mid}", None),
            ("PATCH", f"/memories/{mid}", {"text": "mine now"}),
            ("DELETE", f"/memories/{mid}", None),
            ("GET", f"/memories/{mid}/history", None),
        ]:
            r = api.request(method, path, json=body)
            assert r.status_code == 404 and "vault-7" not in r.text, (method, path, r.status_code)
        for path in ("/memories", "/memories?all=1", "/memories/search?q=vault", "/memories/export", "/memories/status"):
            r = api.get(path)
            assert r.status_code == 200 and "vault-7" not in r.text, path
        assert api.get("/memories/status").json()["memories"] == 1
        r = api.post("/memories/purge", json={"user_id": 1})
        assert r.status_code == 403
    # the admin sees only their own too; the purge answers a count
    with _api(daemon, admin) as api:
        assert "tabs over spaces" not in api.get("/memories?all=1").text
        assert api.get(f"/memories/{bobs['id']}").status_code == 404
        r = api.post("/memories/purge", json={"user_id": bob["id"]})
        assert r.status_code == 200 and r.json() == {"user_id": bob["id"], "deleted": 1}
    assert daemon.json("memory", "list", env=env) == []
    assert daemon.json("memory", "list")  # alice's are untouched


@pytest.mark.parametrize(
    "method, path, body, status",
    [
        ("POST", "/memories", {"text": ""}, 422),
        ("POST", "/memories", {"text": "a\u0000b"}, 422),
        ("POST", "/memories", {"text": "x" * 1_000_000}, None),  # 413 or 422: refused either way
        ("POST", "/memories", {"text": "ok", "importance": 2}, 422),
        ("POST", "/memories", {"text": "ok", "owner": 2}, 422),
        ("POST", "/memories", [1, 2], 400),
        ("POST", "/memories", None, 400),
        ("GET", "/memories/999999", None, 404),
        ("GET", "/memories/abc", None, 404),
        ("PATCH", "/memories/999999", {"text": "x"}, 404),
        ("GET", "/memories?limit=0", None, 422),
        ("GET", "/memories?limit=x", None, 422),
        ("GET", "/memories?cursor=garbage", None, 400),
        ("GET", "/memories/search", None, 422),
        ("GET", "/memories/search?q=%20", None, 422),
        ("GET", "/memories/search?q=x&limit=101", None, 422),
        ("POST", "/memories", {"text": "ok", "project_id": 999999}, 422),  # the admin may see any project, but this one does not exist
        ("POST", "/memories/purge", {"user_id": "x"}, 422),
    ],
)
def test_bad_input_answers_a_clear_4xx(daemon: Home, method: str, path: str, body: Any, status: int | None) -> None:
    with _api(daemon, daemon.token()) as api:
        r = api.request(method, path, json=body) if body is not None else api.request(method, path)
    if status is None:
        assert r.status_code in (413, 422), r.text[:300]
    else:
        assert r.status_code == status, r.text[:300]
    assert "error" in r.json() and r.json()["error"]["message"]


def test_a_memory_scoped_to_an_existing_project(daemon: Home, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    with _api(daemon, daemon.token()) as api:
        pid = api.post("/projects", json={"name": "memproj", "path": str(tmp_path / "repo")}).json()["id"]
        r = api.post("/memories", json={"text": "memproj deploys with make ship", "project_id": pid})
        assert r.status_code == 201 and r.json()["project_id"] == pid, r.text[:300]
        r = api.post("/memories", json={"text": "nowhere", "project_id": pid + 1000})
        assert r.status_code == 422 and "project_id" in r.json()["error"]["message"]


def test_unauthenticated_is_refused(daemon: Home) -> None:
    r = httpx.get(daemon.url + "/memories", timeout=10)
    assert r.status_code == 401


def test_openapi_lists_the_routes(daemon: Home) -> None:
    with _api(daemon, daemon.token()) as api:
        paths = api.get("/openapi.json").json()["paths"]
    assert {"/memories", "/memories/{id}", "/memories/{id}/history", "/memories/search"} <= set(paths)


def test_memory_help_lists_commands(daemon: Home, tmp_path: Path) -> None:
    out = daemon.ok("memory", "--help")
    for word in ("list", "search", "add", "edit", "forget", "history", "export", "purge"):
        assert word in out

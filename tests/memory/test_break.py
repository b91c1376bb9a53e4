"""Adversarial checks of the memory plugin against a real daemon subprocess (the fixtures of
``test_rest_cli.py``): malformed input answers a clear 4xx and stores nothing, a second member
never reaches another member's memory, a stalled export does not stall the daemon, and a
``kill -9`` during a burst of writes loses no acknowledged write."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.conftest import Home, cleanup_home, make_home, wait_for

from .embed_server import EmbedServer
from .test_rest_cli import _api, bob, daemon  # noqa: F401  (the shared fixtures)


@pytest.fixture(scope="module")
def carol(daemon: Home) -> dict[str, Any]:  # noqa: F811
    created = daemon.json("user", "add", "carol")
    return {"token": created["token"], "id": created["user"]["id"] if "user" in created else created["id"]}


def _count(daemon: Home, token: str) -> int:  # noqa: F811
    with _api(daemon, token) as api:
        return len(api.get("/memories/export").json()["items"])


def _raw(daemon: Home, token: str, method: str, path: str, body: bytes, ctype: str | None) -> httpx.Response:  # noqa: F811
    headers = {"Authorization": f"Bearer {token}"}
    if ctype is not None:
        headers["Content-Type"] = ctype
    return httpx.request(method, daemon.url + path, content=body, headers=headers, timeout=30)


BAD_BODIES = [
    (b'{"text": "   \\t\\n "}', "application/json", 422),
    (b'{"text": "a\\u0000b"}', "application/json", 422),
    (b'{"text": "lone \\ud800 surrogate"}', "application/json", 422),
    (b'{"text": "bad \xff\xfe utf8"}', "application/json", 400),
    (b'{"text": "ok", "importance": 1e999}', "application/json", 422),
    (b'{"text": "ok", "importance": NaN}', "application/json", None),
    (b'{"text": "ok", "importance": -Infinity}', "application/json", None),
    (b'{"text": "ok", "importance": -0.5}', "application/json", 422),
    (b'{"text": "ok", "importance": "0.5"}', "application/json", 422),
    (b'{"text": "ok", "kind": "Nope Kind"}', "application/json", 422),
    (b'{"text": "ok", "kind": 7}', "application/json", 422),
    (b'{"text": "ok", "kind": ""}', "application/json", 422),
    (b'{"text": 5}', "application/json", 422),
    (b'{"text": ["a"]}', "application/json", 422),
    (b'{"text": "ok", "project_id": 999999}', "application/json", 422),
    (b'{"text": "ok", "project_id": -1}', "application/json", 422),
    (b'{"text": "ok"', "application/json", 400),
    (b"", "application/json", 400),
    (b"text=ok", "application/x-www-form-urlencoded", None),
    (b'{"text": "ok"}', "text/plain", None),
    (b"\x00\x00\x00", "application/json", 400),
    (b'{"text": "' + b"x" * 1_000_000 + b'"}', "application/json", None),
    (b'{"text": "' + b"[" * 100_000 + b'"}', "application/json", None),
    (b"[" * 100_000, "application/json", 400),
]


@pytest.mark.parametrize("body, ctype, status", BAD_BODIES, ids=[f"body{i}" for i in range(len(BAD_BODIES))])
def test_bad_bodies_are_4xx_and_store_nothing(daemon: Home, carol: dict[str, Any], body: bytes, ctype: str, status: int | None) -> None:  # noqa: F811
    before = _count(daemon, carol["token"])
    r = _raw(daemon, carol["token"], "POST", "/memories", body, ctype)
    if status is None:
        assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    else:
        assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.json()["error"]["message"]
    assert _count(daemon, carol["token"]) == before


def test_bad_patch_bodies_are_4xx_and_change_nothing(daemon: Home, carol: dict[str, Any]) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        m = api.post("/memories", json={"text": "carol patch target"}).json()
        for body in (
            b'{"text": " "}',
            b'{"text": "x\\ud800"}',
            b'{"importance": 1e999}',
            b'{"importance": NaN}',
            b'{"kind": "BAD"}',
            b'{"text": null}',
            b'{"kind": null}',
            b'{"importance": null}',
            b"{}",
            b"[]",
            b"nope",
        ):
            r = _raw(daemon, carol["token"], "PATCH", f"/memories/{m['id']}", body, "application/json")
            assert 400 <= r.status_code < 500, (body, r.status_code, r.text[:300])
        hist = api.get(f"/memories/{m['id']}/history").json()["items"]
        assert [(h["text"], h["state"]) for h in hist] == [("carol patch target", "current")]


@pytest.mark.parametrize(
    "path",
    [
        "/memories/-1",
        "/memories/0",
        "/memories/99999999999999999999999999",
        "/memories/1.5",
        "/memories/%00",
        "/memories/%F0%9F%98%80",
        "/memories/1e3",
        "/memories/-1/history",
        "/memories/abc/history",
        "/memories/99999999999999999999999999/history",
    ],
)
def test_bad_ids_are_404(daemon: Home, carol: dict[str, Any], path: str) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        for method in ("GET", "PATCH", "DELETE"):
            r = api.request(method, path, json={"text": "x"} if method == "PATCH" else None)
            assert r.status_code in (404, 405), (method, path, r.status_code, r.text[:300])


@pytest.mark.parametrize(
    "query",
    [
        "limit=99999999999999999999999",
        "limit=-5",
        "limit=1e3",
        "limit=%00",
        "limit=abc",
        "cursor=" + "A" * 60_000,
        "cursor=%00%ff",
        "kind=" + "k" * 10_000,
        "kind=%00",
        "all=" + "1" * 10_000,
    ],
)
def test_bad_list_queries_are_4xx_or_empty(daemon: Home, carol: dict[str, Any], query: str) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        r = api.get("/memories?" + query)
    assert r.status_code < 500, (query, r.status_code, r.text[:300])


@pytest.mark.parametrize(
    "query",
    [
        "q=%00",
        "q=" + "word%20" * 8_000,
        "q=" + "x" * 60_000,
        "q=%22%22%22*NEAR()%5E",
        "q=ok&limit=99999999999999999999999",
        "q=ok&limit=0",
        "q=%ED%A0%80",  # a surrogate's UTF-8 (invalid)
        "q=%FF%FE",
        "q=%20%20%20",
    ],
)
def test_bad_search_queries_are_4xx_or_results(daemon: Home, carol: dict[str, Any], query: str) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        r = api.get("/memories/search?" + query)
    assert r.status_code < 500, (query, r.status_code, r.text[:300])


def test_cli_bad_input(daemon: Home, carol: dict[str, Any]) -> None:  # noqa: F811
    env = {"ELOWEN_TOKEN": carol["token"]}
    before = _count(daemon, carol["token"])
    for args in (
        ("memory", "add", "   "),
        ("memory", "add", "ok", "--importance", "5"),
        ("memory", "add", "ok", "--importance", "-1"),
        ("memory", "add", "ok", "--importance", "nan"),
        ("memory", "add", "ok", "--importance", "inf"),
        ("memory", "add", "ok", "--kind", "Bad Kind"),
        ("memory", "add", "x" * 100_000),
        ("memory", "add", "bad \udcff surrogate"),
        ("memory", "forget", "-1"),
        ("memory", "forget", "99999999999999999999999"),
        ("memory", "history", "-3"),
        ("memory", "edit", "abc", "--text", "x"),
        ("memory", "search", ""),
        ("memory", "search", "ok", "--limit", "100000"),
    ):
        try:
            proc = daemon.run(*args, env=env)
        except ValueError:  # the test harness cannot pass a lone surrogate in argv
            continue
        assert proc.returncode in (1, 2), (args[:4], proc.returncode, proc.stdout[:300], proc.stderr[:300])
        assert "Traceback" not in proc.stderr, (args[:4], proc.stderr[-800:])
    assert _count(daemon, carol["token"]) == before


def test_a_member_cannot_reach_another_members_memory(daemon: Home, bob: dict[str, Any], carol: dict[str, Any]) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        secret = api.post("/memories", json={"text": "Carol secret zebra-4411", "kind": "person"}).json()
        old = api.post("/memories", json={"text": "Carol old secret okapi-77"}).json()
        new = api.patch(f"/memories/{old['id']}", json={"text": "Carol new secret okapi-78"}).json()
        gone = api.post("/memories", json={"text": "Carol forgotten ibis-12"}).json()
        api.delete(f"/memories/{gone['id']}")
    secrets = ("zebra-4411", "okapi-77", "okapi-78", "ibis-12")
    with _api(daemon, bob["token"]) as api:
        for mid in (secret["id"], old["id"], new["id"], gone["id"]):
            for method, path, body in [
                ("GET", f"/memories/{mid}", None),
                ("PATCH", f"/memories/{mid}", {"text": "mine now"}),
                ("PATCH", f"/memories/{mid}", {"importance": 1}),
                ("DELETE", f"/memories/{mid}", None),
                ("GET", f"/memories/{mid}/history", None),
            ]:
                r = api.request(method, path, json=body)
                assert r.status_code == 404 and not any(s in r.text for s in secrets), (method, path, r.status_code, r.text)
        for path in ("/memories?all=1", "/memories?kind=person", "/memories/search?q=zebra+okapi+ibis+carol+secret", "/memories/export", "/memories/status"):
            r = api.get(path)
            assert r.status_code == 200 and not any(s in r.text for s in secrets), path
    env = {"ELOWEN_TOKEN": bob["token"]}
    for args in (("memory", "list", "--all"), ("memory", "search", "zebra okapi"), ("memory", "export")):
        out = daemon.ok(*args, env=env)
        assert not any(s in out for s in secrets), args
    for args in (("memory", "history", str(old["id"])), ("memory", "edit", str(new["id"]), "--text", "x"), ("memory", "forget", str(new["id"]))):
        proc = daemon.run(*args, env=env)
        assert proc.returncode == 1 and not any(s in proc.stdout + proc.stderr for s in secrets), args
    # the admin may not read them either
    with _api(daemon, daemon.token()) as api:
        for mid in (secret["id"], old["id"], new["id"], gone["id"]):
            for path in (f"/memories/{mid}", f"/memories/{mid}/history"):
                r = api.get(path)
                assert r.status_code == 404 and not any(s in r.text for s in secrets), path
        for path in ("/memories?all=1", "/memories/search?q=zebra+okapi", "/memories/export", "/audit", "/audit?limit=500"):
            r = api.get(path)
            assert not any(s in r.text for s in secrets), path
    with _api(daemon, carol["token"]) as api:  # nothing changed
        assert [h["text"] for h in api.get(f"/memories/{new['id']}/history").json()["items"]] == ["Carol old secret okapi-77", "Carol new secret okapi-78"]
        assert api.get(f"/memories/{secret['id']}").json()["state"] == "current"


def test_a_stalled_export_reader_does_not_stall_the_daemon(daemon: Home, carol: dict[str, Any]) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        for i in range(300):
            assert api.post("/memories", json={"text": f"filler {i} " + "y" * 3900}).status_code == 201
    socks = []
    try:
        for path in ("/memories/export", "/memories?all=1&limit=200") * 16:
            s = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {carol['token']}\r\n\r\n".encode())
            s.recv(100)  # read a little, then stall
            socks.append(s)
        t0 = time.monotonic()
        with _api(daemon, carol["token"]) as api:
            for _ in range(5):
                assert api.get("/memories/status").status_code == 200
                assert api.get("/memories?limit=5").status_code == 200
        assert time.monotonic() - t0 < 5
    finally:
        for s in socks:
            s.close()
    with _api(daemon, carol["token"]) as api:
        assert api.get("/memories/status").status_code == 200


@pytest.fixture
def embedding_daemon(tmp_path: Path) -> Iterator[tuple[Home, EmbedServer]]:
    with EmbedServer() as server:
        h = make_home(tmp_path)
        with open(h.path / "config.toml", "a") as f:
            f.write(
                f'\n[plugins.memory.config]\nembedding_provider = "openai"\nembedding_base_url = "{server.url}"\nembedding_model = "bag-64"\nembed_interval = 0.05\n'
            )
        try:
            h.ok("daemon", "start")
            yield h, server
        finally:
            cleanup_home(h)


def test_kill_9_during_a_write_burst_loses_no_acknowledged_write(embedding_daemon: tuple[Home, EmbedServer]) -> None:
    h, server = embedding_daemon
    token = h.token()
    acked: dict[int, str] = {}  # id → text acknowledged as current
    edits: dict[int, int] = {}  # new id → the id it superseded
    stop = threading.Event()
    lock = threading.Lock()

    def writer(n: int) -> None:
        with _api(h, token) as api:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    r = api.post("/memories", json={"text": f"writer {n} fact {i}"})
                    if r.status_code == 201:
                        with lock:
                            acked[r.json()["id"]] = r.json()["text"]
                        r2 = api.patch(f"/memories/{r.json()['id']}", json={"text": f"writer {n} fact {i} edited"})
                        if r2.status_code == 200:
                            with lock:
                                edits[r2.json()["id"]] = r.json()["id"]
                                acked[r2.json()["id"]] = r2.json()["text"]
                except httpx.HTTPError:
                    return

    server.hold.clear()  # the embedding queue stalls: the kill leaves memories waiting for vectors
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    wait_for(lambda: len(acked) > 150, timeout=60)
    pid = h.pid_info()["pid"]  # type: ignore[index]
    os.kill(pid, signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(30)
    wait_for(lambda: not _alive(pid), timeout=10)
    db = h.path / "elowen.db"
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    h.ok("daemon", "start")
    with _api(h, token) as api:
        rows = {r["id"]: r for r in api.get("/memories/export").json()["items"]}
        missing = set(acked) - set(rows)
        assert not missing, sorted(missing)[:20]
        for mid, text in acked.items():
            assert rows[mid]["text"] == text
        for new, old in edits.items():
            assert rows[old]["superseded_by"] == new and rows[new]["supersedes"] == old
        for r in rows.values():  # every chain is whole: nothing points at a missing row
            for k in ("supersedes", "superseded_by"):
                assert r[k] is None or r[k] in rows, (r["id"], k, r[k])
        assert api.get("/memories/status").json()["pending_embeddings"] > 0
        server.hold.set()
        wait_for(lambda: api.get("/memories/status").json()["pending_embeddings"] == 0, timeout=60)  # the queue resumed and drained
        con = sqlite3.connect(db)
        current = {r[0] for r in con.execute("SELECT id FROM memory_items WHERE superseded_by IS NULL")}
        vectors = {r[0] for r in con.execute("SELECT memory_id FROM memory_vectors")}
        con.close()
        assert current <= vectors, sorted(current - vectors)[:20]
        last = max(acked)  # the keyword index has the last acknowledged write too
        assert last in [m["id"] for m in api.get("/memories/search", params={"q": acked[last], "limit": 100}).json()["items"]]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("user_id", [10**30, -(10**30), 2**63, 1.5, None, "1", True])
def test_purge_with_an_out_of_range_user_id_is_422(daemon: Home, user_id: Any) -> None:  # noqa: F811
    with _api(daemon, daemon.token()) as api:
        r = api.post("/memories/purge", json={"user_id": user_id})
    assert r.status_code == 422, (r.status_code, r.text[:300])


@pytest.mark.parametrize("project_id", [10**30, 2**63, -(2**63) - 1])
def test_add_with_an_out_of_range_project_id_is_422(daemon: Home, carol: dict[str, Any], project_id: int) -> None:  # noqa: F811
    before = _count(daemon, carol["token"])
    with _api(daemon, carol["token"]) as api:
        r = api.post("/memories", json={"text": "ok", "project_id": project_id})
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert _count(daemon, carol["token"]) == before


def test_concurrent_edits_of_one_memory_keep_one_chain(daemon: Home, carol: dict[str, Any]) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        m = api.post("/memories", json={"text": "race target"}).json()
    codes: list[int] = []

    def edit(i: int) -> None:
        with _api(daemon, carol["token"]) as api:
            codes.append(api.patch(f"/memories/{m['id']}", json={"text": f"race {i}"}).status_code)

    threads = [threading.Thread(target=edit, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(codes) == [200] + [404] * 15, codes
    with _api(daemon, carol["token"]) as api:
        items = api.get("/memories/export").json()["items"]
    assert len([r for r in items if r["supersedes"] == m["id"]]) == 1


def test_editing_a_superseded_or_forgotten_version_is_404(daemon: Home, carol: dict[str, Any]) -> None:  # noqa: F811
    with _api(daemon, carol["token"]) as api:
        m = api.post("/memories", json={"text": "v1 of a chain"}).json()
        m2 = api.patch(f"/memories/{m['id']}", json={"text": "v2 of a chain"}).json()
        assert api.patch(f"/memories/{m['id']}", json={"text": "fork"}).status_code == 404
        assert api.delete(f"/memories/{m['id']}").status_code == 404
        assert api.delete(f"/memories/{m2['id']}").status_code == 200
        assert api.patch(f"/memories/{m2['id']}", json={"text": "revive"}).status_code == 404
        assert api.delete(f"/memories/{m2['id']}").status_code == 404
        assert [h["state"] for h in api.get(f"/memories/{m['id']}/history").json()["items"]] == ["superseded", "forgotten"]

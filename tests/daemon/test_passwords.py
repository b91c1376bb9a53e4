"""User passwords and user/password login: the hash format, the schema upgrade of a version-1
database, ``PUT``/``DELETE /users/{id}/password``, ``POST /auth/login`` (one 401 for every
failure, throttling with 429 + Retry-After, audit rows without the password),
``POST /auth/logout``, and who may call what — against a real daemon."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import apsw
import httpx
import pytest

from elowen.core.store import Store, parse_schema, utc_iso
from elowen.daemon.auth import LOGIN_TOKEN_TTL
from elowen.daemon.passwords import MAX_LENGTH, N, control_character_error, hash_password, needs_rehash, verify_password
from elowen.daemon.throttle import LoginThrottle

from .conftest import DaemonProc, start_daemon
from .helpers import agent_token, assert_error_shape, make_project, make_user

V1_SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "kernel-schema-v1.sql"
LOGIN_FAILED = {"error": {"code": "login_failed", "message": "wrong name or password"}}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- hashing and throttling


def test_hash_format_carries_its_parameters_and_a_fresh_salt() -> None:
    first, second = hash_password("correct horse battery"), hash_password("correct horse battery")
    m = re.fullmatch(r"scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)", first)
    assert m, first
    assert (int(m.group(1)), int(m.group(2)), int(m.group(3))) == (N, 8, 1)
    assert first != second and first.split("$")[4] != second.split("$")[4]  # per-password salt
    assert "correct horse" not in first
    assert verify_password("correct horse battery", first) and verify_password("correct horse battery", second)
    assert not verify_password("correct horse batterY", first)
    assert not needs_rehash(first)


def test_old_parameters_still_verify_and_ask_for_a_rehash() -> None:
    weak = hash_password("s3cret-passphrase", n=2**10)
    assert verify_password("s3cret-passphrase", weak)
    assert needs_rehash(weak)


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "",
        "plain",
        "scrypt$16384$8$1$abc",
        "scrypt$3$8$1$AAAA$AAAA",
        "scrypt$16384$8$1$!!$AAAA",
        "bcrypt$x$y$z$a$b",
        f"scrypt${2**30}$8$1$AAAAAAAAAAAAAAAAAAAAAA==$" + "A" * 44,
    ],
)
def test_missing_or_malformed_hashes_never_match(stored: str | None) -> None:
    assert not verify_password("anything at all", stored)


def test_throttle_window_and_reset() -> None:
    now = [1000.0]
    t = LoginThrottle(limit=5, window=60.0, clock=lambda: now[0])
    for _ in range(4):
        t.failed("bob")
        now[0] += 1
    assert t.retry_after("bob") is None
    t.failed("bob")  # 5th failure at t=1004; the first was at 1000
    assert t.retry_after("bob") == 56
    assert t.retry_after("alice") is None
    now[0] = 1059.5
    assert t.retry_after("bob") == 1
    now[0] = 1060.0  # the first failure left the window
    assert t.retry_after("bob") is None
    t.failed("bob")
    assert t.retry_after("bob") is not None
    t.succeeded("bob")
    assert t.retry_after("bob") is None and len(t) == 0


def test_throttle_tracks_a_bounded_number_of_names() -> None:
    t = LoginThrottle(limit=1, window=60.0, max_names=3)
    for name in ("a", "b", "c", "d"):
        t.failed(name)
    assert len(t) == 3
    assert t.retry_after("a") is None  # the oldest name was forgotten
    assert all(t.retry_after(n) is not None for n in ("b", "c", "d"))


def test_refusals_are_audited_once_per_window_and_the_rest_counted() -> None:
    now = [1000.0]
    t = LoginThrottle(limit=1, window=60.0, clock=lambda: now[0])
    assert t.refused("bob") == 1  # the first refusal is written
    for _ in range(41):
        now[0] += 1
        assert t.refused("bob") is None  # only counted
    assert t.refused("alice") == 1  # per name
    now[0] = 1060.0
    assert t.refused("bob") == 42  # a new window: one row standing for the 41 counted + this one
    assert t.refused("bob") is None
    assert t.take_unaudited("bob") == 1 and t.take_unaudited("bob") == 0
    assert t.take_unaudited("nobody") == 0


def test_refusal_records_are_bounded() -> None:
    t = LoginThrottle(limit=1, window=60.0, max_names=3)
    for name in ("a", "b", "c", "d"):
        t.refused(name)
    assert t.refused("a") == 1  # "a" was forgotten: written again
    assert t.refused("d") is None


def test_passwords_are_nfc_normalised() -> None:
    composed, decomposed = "caf\u00e9 au lait", "cafe\u0301 au lait"
    assert composed != decomposed
    stored = hash_password(decomposed)
    assert verify_password(composed, stored) and verify_password(decomposed, stored)
    assert not verify_password("cafe au lait", stored)


@pytest.mark.parametrize("password", ["nul\x00inside", "tab\tinside", "line\ninside", "unit\x1fsep"])
def test_control_characters_are_named_in_the_error(password: str) -> None:
    error = control_character_error(password)
    bad = next(ch for ch in password if ord(ch) < 0x20)
    assert error is not None and "control characters" in error and f"U+{ord(bad):04X}" in error
    assert password not in error
    assert control_character_error("plain \u00e9t\u00e9 \x7f password") is None


# ---------------------------------------------------------------- schema upgrade


def test_a_version_1_database_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = apsw.Connection(str(db))
    conn.execute(parse_schema(V1_SCHEMA.read_text()).base).fetchall()
    conn.execute("INSERT INTO users (name, role, created_at) VALUES ('old', 'admin', '2026-01-01T00:00:00.000Z')")
    conn.execute("INSERT INTO tokens (user_id, hash, scope, created_at) VALUES (1, 'h', 'full', '2026-01-01T00:00:00.000Z')")
    conn.execute("PRAGMA user_version = 1")
    assert "password_hash" not in {r[1] for r in conn.execute("PRAGMA table_info(users)")}
    conn.close()
    store = Store(db)
    try:
        assert store.schema_version == 5  # every upgrade since runs too (3: users.kind, 4: id_highwater, 5: projects in it)
        assert store.query_one("PRAGMA user_version") == {"user_version": 5}
        assert store.query("SELECT name, password_hash, kind FROM users") == [{"name": "old", "password_hash": None, "kind": "person"}]
        assert store.query("SELECT hash, origin FROM tokens") == [{"hash": "h", "origin": "issued"}]
        assert store.integrity_check() == "ok"
        fresh = Store(tmp_path / "fresh.db")
        try:

            def columns(s: Store, table: str) -> list[tuple[str, str]]:
                return [(r["name"], r["type"]) for r in s.query(f"PRAGMA table_info({table})")]

            for table in ("users", "tokens"):  # the upgrade gives the same columns as a fresh database
                assert columns(store, table) == columns(fresh, table)
        finally:
            fresh.close()
    finally:
        store.close()


# ---------------------------------------------------------------- the daemon


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    proc = start_daemon(tmp_path_factory.mktemp("passwords") / "home", "--no-plugins")
    try:
        yield proc
    finally:
        proc.stop()


def _login(d: DaemonProc, name: str, password: str) -> httpx.Response:
    return httpx.post(f"{d.url}/auth/login", json={"name": name, "password": password}, timeout=10)


def _audit(d: DaemonProc, **query: str) -> list[dict]:
    with d.admin() as a:
        r = a.get("/audit", params={"limit": 500, **query})
        assert r.status_code == 200, r.text
        return r.json()["items"]


def test_set_log_in_and_change_own_password(d: DaemonProc) -> None:
    name = _name("carol")
    with d.admin() as admin:
        uid, token = make_user(admin, name)
        assert admin.get("/users").json()["items"][-1]["has_password"] is False
        r = admin.put(f"/users/{uid}/password", json={"password": "first passphrase"})
        assert r.status_code == 200 and r.json() == {"id": uid, "has_password": True, "login_tokens_revoked": 0}
    r = _login(d, name, "first passphrase")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["user"]["id"] == uid and body["user"]["name"] == name and body["user"]["has_password"] is True
    assert body["token"].startswith("elw_") and body["token"] != token
    with d.client(body["token"]) as me:
        assert me.get("/users/me").json()["id"] == uid
        # changing one's own password needs the current one
        err = assert_error_shape(me.put(f"/users/{uid}/password", json={"password": "second passphrase"}), 403)
        assert err["code"] == "current_password_required"
        err = assert_error_shape(me.put(f"/users/{uid}/password", json={"password": "second passphrase", "current": "not it at all"}), 403)
        assert err["code"] == "wrong_password"
        ok = me.put(f"/users/{uid}/password", json={"password": "second passphrase", "current": "first passphrase"})
        assert ok.status_code == 200, ok.text
    assert _login(d, name, "first passphrase").status_code == 401
    assert _login(d, name, "second passphrase").status_code == 200


def test_a_user_without_a_password_sets_their_first_without_current(d: DaemonProc) -> None:
    name = _name("dan")
    with d.admin() as admin:
        uid, token = make_user(admin, name)
    with d.client(token) as me:
        assert me.put(f"/users/{uid}/password", json={"password": "my own words"}).status_code == 200
    assert _login(d, name, "my own words").status_code == 200


def test_every_login_failure_is_the_same_401(d: DaemonProc) -> None:
    with d.admin() as admin:
        with_pw = _name("erin")
        uid, _ = make_user(admin, with_pw)
        admin.put(f"/users/{uid}/password", json={"password": "erin's passphrase"})
        without_pw = _name("frank")
        make_user(admin, without_pw)
    answers = [_login(d, _name("nobody"), "whatever-pass"), _login(d, without_pw, "whatever-pass"), _login(d, with_pw, "whatever-pass")]
    for r in answers:
        assert r.status_code == 401 and r.json() == LOGIN_FAILED, r.text
    assert len({r.text for r in answers}) == 1


def test_five_failures_within_a_minute_answer_429_with_retry_after(d: DaemonProc) -> None:
    name = _name("gina")
    with d.admin() as admin:
        uid, _ = make_user(admin, name)
        admin.put(f"/users/{uid}/password", json={"password": "gina's passphrase"})
    for _ in range(5):
        assert _login(d, name, "wrong guess!").status_code == 401
    for password in ("wrong guess!", "gina's passphrase"):  # even the right one waits
        r = _login(d, name, password)
        err = assert_error_shape(r, 429)
        assert err["code"] == "too_many_attempts"
        assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert _login(d, _name("other"), "wrong guess!").status_code == 401  # per name
    audit = _audit(d, action="auth.login")
    throttled = [a for a in audit if a["detail"].get("name") == name and a["detail"].get("reason") == "throttled"]
    # one row per name per window; the second refusal is only counted
    assert len(throttled) == 1 and throttled[0]["outcome"] == "denied" and throttled[0]["detail"]["attempts"] == 1


def test_parallel_guesses_cannot_pass_the_limit(d: DaemonProc) -> None:
    name = _name("hal")
    statuses: list[int] = []
    lock = threading.Lock()

    def guess(i: int) -> None:
        status = _login(d, name, f"guess number {i}").status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(set(statuses)) == [401, 429] and statuses.count(401) == 5, statuses


def test_logins_are_audited_without_the_password(d: DaemonProc) -> None:
    name = _name("ivy")
    secret = f"pw-{uuid.uuid4().hex}"
    with d.admin() as admin:
        uid, _ = make_user(admin, name)
        admin.put(f"/users/{uid}/password", json={"password": secret})
    assert _login(d, name, secret + "x").status_code == 401
    assert _login(d, name, secret).status_code == 200
    rows = [a for a in _audit(d, action="auth.login") if a["detail"].get("name") == name]
    assert [(a["actor"], a["outcome"], a["detail"].get("reason")) for a in rows] == [(f"user:{uid}", "ok", None), ("anonymous", "denied", "wrong_password")]
    assert all(a["target"] == f"user:{uid}" for a in rows)
    sets = [a for a in _audit(d, action="user.password.set") if a["target"] == f"user:{uid}"]
    assert len(sets) == 1 and sets[0]["outcome"] == "ok"
    everything = json.dumps(_audit(d))
    assert secret not in everything
    assert secret not in d.output()
    store = Store(d.home / "elowen.db")
    try:
        assert store.query_one("SELECT password_hash FROM users WHERE id = ?", (uid,))["password_hash"].startswith("scrypt$")
    finally:
        store.close()
    db_bytes = b"".join(p.read_bytes() for p in d.home.glob("elowen.db*"))
    assert secret.encode() not in db_bytes


def test_a_hash_with_old_parameters_is_replaced_at_login(d: DaemonProc) -> None:
    name = _name("lea")
    with d.admin() as admin:
        uid, _ = make_user(admin, name)
    weak = hash_password("lea's passphrase", n=2**10)
    store = Store(d.home / "elowen.db")  # as an older Elowen would have left it
    try:
        store.execute("UPDATE users SET password_hash = ? WHERE id = ?", (weak, uid))
        assert _login(d, name, "lea's passphrase").status_code == 200
        stored = store.query_one("SELECT password_hash FROM users WHERE id = ?", (uid,))["password_hash"]
    finally:
        store.close()
    assert stored != weak and not needs_rehash(stored) and verify_password("lea's passphrase", stored)
    [row] = [a for a in _audit(d, action="auth.login") if a["detail"].get("name") == name]
    assert row["detail"]["rehashed"] is True


def test_logout_revokes_only_login_tokens(d: DaemonProc) -> None:
    name = _name("jack")
    with d.admin() as admin:
        uid, issued = make_user(admin, name)
        admin.put(f"/users/{uid}/password", json={"password": "jack's passphrase"})
    login_token = _login(d, name, "jack's passphrase").json()["token"]
    with d.client(login_token) as c:
        assert c.post("/auth/logout").json() == {"revoked": True}
        assert_error_shape(c.get("/users/me"), 401)
    with d.client(issued) as c:
        assert c.post("/auth/logout").json() == {"revoked": False}
        assert c.get("/users/me").status_code == 200
    assert [a["detail"] for a in _audit(d, action="auth.logout", actor=f"user:{uid}")] == [{"revoked": False}, {"revoked": True}]


def test_login_tokens_expire_and_are_pruned_at_the_next_login(d: DaemonProc) -> None:
    name = _name("noor")
    with d.admin() as admin:
        uid, issued = make_user(admin, name)
        admin.put(f"/users/{uid}/password", json={"password": "noor's passphrase"})
    old = _login(d, name, "noor's passphrase").json()["token"]
    store = Store(d.home / "elowen.db")
    try:
        stale = utc_iso(time.time() - LOGIN_TOKEN_TTL - 60)
        store.execute("UPDATE tokens SET created_at = ? WHERE user_id = ?", (stale, uid))  # the issued one too
        with d.client(old) as c:
            r = c.get("/users/me")
        assert "expired" in assert_error_shape(r, 401)["message"]
        with d.client(issued) as c:
            assert c.get("/users/me").status_code == 200  # issued tokens never expire
        assert _login(d, name, "noor's passphrase").status_code == 200
        origins = [row["origin"] for row in store.query("SELECT origin FROM tokens WHERE user_id = ? ORDER BY id", (uid,))]
    finally:
        store.close()
    assert origins == ["issued", "login"]  # the stale login token was pruned, the new one kept


def test_removing_a_password_ends_password_login(d: DaemonProc) -> None:
    name = _name("kim")
    with d.admin() as admin:
        uid, token = make_user(admin, name)
        admin.put(f"/users/{uid}/password", json={"password": "kim's passphrase"})
    with d.client(token) as me:
        assert_error_shape(me.request("DELETE", f"/users/{uid}/password", json={}), 403)
        r = me.request("DELETE", f"/users/{uid}/password", json={"current": "kim's passphrase"})
        assert r.status_code == 200 and r.json() == {"id": uid, "has_password": False, "login_tokens_revoked": 0}
    assert _login(d, name, "kim's passphrase").json() == LOGIN_FAILED


@pytest.mark.parametrize(
    "body",
    [{"password": "short"}, {"password": "x" * (MAX_LENGTH + 1)}, {"password": 12345678}, {"password": None}, {}, {"password": "long enough", "extra": 1}],
)
def test_bad_password_bodies_are_422(d: DaemonProc, body: dict) -> None:
    with d.admin() as admin:
        assert_error_shape(admin.put("/users/1/password", json=body), 422)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "admin"},
        {"password": "x"},
        {"name": "", "password": "x"},
        {"name": "admin", "password": ""},
        {"name": "a" * 101, "password": "x"},
        {"name": "admin", "password": "x" * (MAX_LENGTH + 1)},
        {"name": 1, "password": "x"},
    ],
)
def test_bad_login_bodies_are_422_and_not_counted(d: DaemonProc, body: dict) -> None:
    assert_error_shape(httpx.post(f"{d.url}/auth/login", json=body, timeout=10), 422)


def test_a_hammered_name_writes_one_throttled_row_per_window(d: DaemonProc) -> None:
    name = _name("hammer")
    for _ in range(5):
        assert _login(d, name, "wrong guess!").status_code == 401
    before = len(_audit(d))
    for _ in range(40):
        assert _login(d, name, "wrong guess!").status_code == 429
    rows = [a for a in _audit(d, action="auth.login") if a["detail"].get("name") == name]
    throttled = [a for a in rows if a["detail"].get("reason") == "throttled"]
    assert len(throttled) == 1 and throttled[0]["detail"]["attempts"] == 1, throttled
    assert len(_audit(d)) == before + 1  # the 39 others were only counted
    assert [a["detail"]["reason"] for a in rows].count("unknown_user") == 5  # checked failures: one row each


def _login_token(d: DaemonProc, name: str, password: str) -> str:
    r = _login(d, name, password)
    assert r.status_code == 200, r.text
    return r.json()["token"]


def _works(d: DaemonProc, token: str) -> bool:
    with d.client(token) as c:
        return c.get("/users/me").status_code == 200


def test_setting_or_removing_a_password_revokes_login_tokens(d: DaemonProc) -> None:
    name = _name("rev")
    with d.admin() as admin:
        uid, issued = make_user(admin, name)
        assert admin.put(f"/users/{uid}/password", json={"password": "rev passphrase 1"}).status_code == 200
        first, second = _login_token(d, name, "rev passphrase 1"), _login_token(d, name, "rev passphrase 1")
        # an admin sets it: every login token of the user goes, the issued token stays
        r = admin.put(f"/users/{uid}/password", json={"password": "rev passphrase 2"})
        assert r.json() == {"id": uid, "has_password": True, "login_tokens_revoked": 2}
    assert not _works(d, first) and not _works(d, second) and _works(d, issued)
    # the user changes their own from a login session: that session stays, the others go
    web, other = _login_token(d, name, "rev passphrase 2"), _login_token(d, name, "rev passphrase 2")
    with d.client(web) as me:
        r = me.put(f"/users/{uid}/password", json={"password": "rev passphrase 3", "current": "rev passphrase 2"})
        assert r.json() == {"id": uid, "has_password": True, "login_tokens_revoked": 1}
    assert _works(d, web) and not _works(d, other) and _works(d, issued)
    # removing it: the same rule
    third = _login_token(d, name, "rev passphrase 3")
    with d.client(web) as me:
        r = me.request("DELETE", f"/users/{uid}/password", json={"current": "rev passphrase 3"})
        assert r.json() == {"id": uid, "has_password": False, "login_tokens_revoked": 1}
    assert _works(d, web) and not _works(d, third) and _works(d, issued)
    with d.admin() as admin:
        assert admin.put(f"/users/{uid}/password", json={"password": "rev passphrase 4"}).json()["login_tokens_revoked"] == 1
        assert not _works(d, web)
        assert admin.request("DELETE", f"/users/{uid}/password", json={}).json()["login_tokens_revoked"] == 0
    assert _works(d, issued)
    sets = [a for a in _audit(d, action="user.password.set") if a["target"] == f"user:{uid}"]
    assert [a["detail"]["login_tokens_revoked"] for a in sets] == [1, 1, 2, 0]  # newest first


def test_a_password_is_compared_in_nfc(d: DaemonProc) -> None:
    name = _name("nfc")
    with d.admin() as admin:
        uid, _ = make_user(admin, name)
        assert admin.put(f"/users/{uid}/password", json={"password": "cre\u0300me bru\u0302le\u0301e"}).status_code == 200
    assert _login(d, name, "cr\u00e8me br\u00fbl\u00e9e").status_code == 200


@pytest.mark.parametrize("bad", ["\x00", "\t", "\n", "\r", "\x1b"])
def test_control_characters_in_passwords_are_422(d: DaemonProc, bad: str) -> None:
    with d.admin() as admin:
        err = assert_error_shape(admin.put("/users/1/password", json={"password": f"long{bad}enough"}), 422)
        assert "control characters" in err["message"], err
        err = assert_error_shape(admin.put("/users/1/password", json={"password": "long enough", "current": bad}), 422)
        assert "current" in err["message"] and "control characters" in err["message"], err
    err = assert_error_shape(httpx.post(f"{d.url}/auth/login", json={"name": "admin", "password": f"x{bad}"}, timeout=10), 422)
    assert "control characters" in err["message"], err


@pytest.mark.parametrize("raw", [b"null", b"[]", b"3", b'"text"'])
def test_a_body_that_is_not_an_object_reads_plainly(d: DaemonProc, raw: bytes) -> None:
    r = httpx.post(f"{d.url}/auth/login", content=raw, headers={"Content-Type": "application/json"}, timeout=10)
    err = assert_error_shape(r, 422)
    assert err["message"] == "the body must be a JSON object", err


def test_checking_ones_own_password(d: DaemonProc) -> None:
    name = _name("chk")
    with d.admin() as admin:
        uid, token = make_user(admin, name)
        other, _ = make_user(admin, _name("chk-other"))
    with d.client(token) as me:
        err = assert_error_shape(me.post(f"/users/{uid}/password/check", json={"current": "anything"}), 409)
        assert err["code"] == "no_password"
        assert me.put(f"/users/{uid}/password", json={"password": "check me please"}).status_code == 200
        r = me.post(f"/users/{uid}/password/check", json={"current": "check me please"})
        assert r.status_code == 200 and r.json() == {"id": uid, "ok": True}
        err = assert_error_shape(me.post(f"/users/{uid}/password/check", json={"current": "not it"}), 403)
        assert err["code"] == "wrong_password"
        assert_error_shape(me.post(f"/users/{uid}/password/check", json={}), 422)
        err = assert_error_shape(me.post(f"/users/{other}/password/check", json={"current": "x"}), 403)
        assert err["code"] == "own_only"
        for _ in range(4):  # with the failure above: 5, the login limit
            assert me.post(f"/users/{uid}/password/check", json={"current": "not it"}).status_code == 403
        r = me.post(f"/users/{uid}/password/check", json={"current": "check me please"})
        assert_error_shape(r, 429)
        assert "Retry-After" in r.headers
    rows = [a for a in _audit(d, action="user.password.check") if a["target"] == f"user:{uid}"]
    assert [a["detail"]["reason"] for a in rows] == ["throttled"] + ["wrong_password"] * 5


# ---------------------------------------------------------------- who may call what


@pytest.fixture(scope="module")
def people(d: DaemonProc, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    with d.admin() as admin:
        project = make_project(admin, tmp_path_factory.mktemp("proj"), "rbac")
        task = admin.post("/tasks", json={"title": "t", "project_id": project}).json()["id"]
        member = make_user(admin, _name("member"))
        other = make_user(admin, _name("other"))
    return {"member": member, "other": other, "agent": agent_token(d.home, task)}


PRINCIPALS = ("admin", "member", "agent", "none")


def _token(d: DaemonProc, people: dict, who: str) -> str | None:
    return {"admin": d.admin_token, "member": people["member"][1], "agent": people["agent"], "none": None}[who]


@pytest.mark.parametrize("who", PRINCIPALS)
def test_who_may_set_whose_password(d: DaemonProc, people: dict, who: str) -> None:
    other_id = people["other"][0]
    member_id = people["member"][0]
    expected_other = {"admin": 200, "member": 403, "agent": 403, "none": 401}[who]
    expected_admin = {"admin": 403, "member": 403, "agent": 403, "none": 401}[who]  # admin: own, current needed
    expected_self = {"admin": 200, "member": 200, "agent": 403, "none": 401}[who]
    with d.client(_token(d, people, who)) as c:
        r = c.put(f"/users/{other_id}/password", json={"password": "set by someone"})
        assert r.status_code == expected_other, (who, r.text)
        if who == "admin":
            # the admin's own password, once set, needs "current" to change
            first = c.put("/users/1/password", json={"password": "admin passphrase", "current": "admin passphrase"})
            assert first.status_code == 200, first.text
        r = c.put("/users/1/password", json={"password": "taken over!"})
        assert r.status_code == expected_admin, (who, r.text)
        # the member's own password: "current" is needed once one is set (and ignored for an admin)
        r = c.put(f"/users/{member_id}/password", json={"password": "member passphrase", "current": "member passphrase"})
        assert r.status_code == expected_self, (who, r.text)
        r = c.request("DELETE", f"/users/{other_id}/password", json={})
        assert r.status_code == expected_other, (who, r.text)
        unknown = c.put("/users/999999/password", json={"password": "nobody's pass"})
        assert_error_shape(unknown, {"admin": 404, "member": 403, "agent": 403, "none": 401}[who])
        logout = c.post("/auth/logout")
        assert logout.status_code == {"admin": 200, "member": 200, "agent": 403, "none": 401}[who]
    if who == "member":
        with d.client(people["member"][1]) as c:
            assert c.get("/users/me").status_code == 200  # logout left the issued token alone

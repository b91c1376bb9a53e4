"""The daemon's ``users`` host service (contract ``elowen_sdk.services.UsersService``): agent
tokens, overseer principals marked in the ``users`` table (never told by their name), and the
schema upgrade that adds the mark. A real kernel store; tokens checked with the daemon's own
``authenticate``."""

from __future__ import annotations

from pathlib import Path

import pytest

from elowen.core.kernel import Kernel
from elowen.core.store import Store
from elowen.daemon.auth import authenticate
from elowen.daemon.errors import Unauthorized
from elowen.daemon.server import build_state
from elowen_sdk.contracts import missing_members
from elowen_sdk.errors import UserNotFound
from elowen_sdk.services import UsersService


def bearer(token: str) -> str:
    return f"Bearer {token}"


async def test_users_is_a_host_service_and_conforms(tmp_path: Path) -> None:
    async with Kernel.open(tmp_path, discover_entry_points=False, watch_settings=False) as kernel:
        build_state(kernel)
        owned = kernel.contributions.get("service", "users")
        assert owned.plugin == "kernel"
        assert missing_members(owned.obj.obj, UsersService) == []


@pytest.fixture
async def env(tmp_path: Path):
    async with Kernel.open(tmp_path, discover_entry_points=False, watch_settings=False) as kernel:
        state = build_state(kernel)
        users = kernel.contributions.get("service", "users").obj.obj
        yield kernel.store, state, users


async def test_agent_tokens_are_bound_to_their_task_and_revoked(env) -> None:
    store, state, users = env
    owner, _ = state.users.create("ada", "member")
    store.execute("INSERT INTO projects (name, path, created_at) VALUES ('p', '/tmp', 'now')")
    task = state.tasks.create(title="t", project_id=1, owner_id=owner["id"])
    token = users.agent_token(task["id"])
    me = authenticate(store, bearer(token))
    assert (me.scope, me.task_id, me.user_id) == ("agent", task["id"], owner["id"])
    users.agent_token(task["id"])
    assert users.revoke_task_tokens(task["id"]) == 2
    assert users.revoke_task_tokens(task["id"]) == 0
    with pytest.raises(Unauthorized):
        authenticate(store, bearer(token))
    with pytest.raises(UserNotFound):
        users.agent_token(999)
    assert issubclass(UserNotFound, LookupError)


async def test_overseer_principal_is_created_once_marked_and_its_token_rotated(env) -> None:
    store, _state, users = env
    user_id, first = users.overseer_token(5)
    record = users.user(user_id)
    assert record is not None
    assert {k: record[k] for k in ("name", "role", "kind", "mission_id", "projects", "tool_grants")} == {
        "name": "overseer-m5",
        "role": "member",
        "kind": "overseer",
        "mission_id": 5,
        "projects": [],
        "tool_grants": [],
    }
    me = authenticate(store, bearer(first))
    assert (me.user_id, me.scope, me.role, me.is_admin) == (user_id, "full", "member", False)
    assert users.overseer_mission(user_id) == 5

    again, second = users.overseer_token(5)
    assert again == user_id and second != first
    with pytest.raises(Unauthorized):  # the earlier token is revoked
        authenticate(store, bearer(first))
    assert authenticate(store, bearer(second)).user_id == user_id
    assert store.query_one("SELECT count(*) AS n FROM users WHERE kind = 'overseer'") == {"n": 1}

    users.revoke_overseer(5)
    with pytest.raises(Unauthorized):
        authenticate(store, bearer(second))
    assert users.user(user_id) is not None  # the row stays for the audit trail
    users.revoke_overseer(77)  # no principal: nothing happens


async def test_a_name_makes_nobody_an_overseer(env) -> None:
    _store, state, users = env
    person, _ = state.users.create("overseer-m7", "member")
    assert state.users.get(person["id"])["kind"] == "person"
    assert users.overseer_mission(person["id"]) is None
    user_id, _token = users.overseer_token(7)
    assert user_id != person["id"]
    assert users.user(user_id)["name"] == "overseer-m7-2"
    assert users.overseer_mission(user_id) == 7
    assert users.overseer_mission(None) is None and users.overseer_mission(12345) is None
    assert users.user(12345) is None


@pytest.mark.parametrize("bad", [0, -3, True, "4", 2.0])
async def test_overseer_token_needs_a_positive_mission_id(env, bad) -> None:
    _store, _state, users = env
    with pytest.raises(ValueError):
        users.overseer_token(bad)


def test_a_kernel_schema_2_database_gains_the_overseer_mark(tmp_path: Path) -> None:
    db = tmp_path / "elowen.db"
    store = Store(db)
    assert store.schema_version >= 3
    # turn it back into a version-2 database (the columns of upgrade 3 removed), with a user
    store.execute("DROP INDEX users_overseer_mission")
    store.execute("ALTER TABLE users DROP COLUMN mission_id")
    store.execute("ALTER TABLE users DROP COLUMN kind")
    store.execute("INSERT INTO users (name, role, tool_grants, created_at) VALUES ('overseer-m3', 'member', '[]', 'now')")
    store.execute("PRAGMA user_version = 2")
    store.close()

    store = Store(db)
    try:
        assert store.query_one("PRAGMA user_version")["user_version"] == store.schema_version >= 3
        # an old name proves nothing: the user stays a person
        assert store.query_one("SELECT kind, mission_id FROM users WHERE name = 'overseer-m3'") == {"kind": "person", "mission_id": None}
        with pytest.raises(Exception, match="CHECK constraint failed"):
            store.execute("INSERT INTO users (name, role, created_at, kind) VALUES ('x', 'member', 'now', 'overseer')")
        store.execute("INSERT INTO users (name, role, created_at, kind, mission_id) VALUES ('a', 'member', 'now', 'overseer', 1)")
        with pytest.raises(Exception, match="UNIQUE"):
            store.execute("INSERT INTO users (name, role, created_at, kind, mission_id) VALUES ('b', 'member', 'now', 'overseer', 1)")
    finally:
        store.close()

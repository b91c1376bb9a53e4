"""Validation gaps found by the security review, each refused now:

* ``1e309`` / ``inf`` / ``nan`` as a number setting (it wrote ``inf`` into ``config.toml``);
* user names with white space at an end, control/format characters, look-alike (mixed-script,
  fullwidth) characters, or a name that looks like an existing user's;
* over-long mission names and state-change reasons;
* overseer identity by name: a member named ``overseer-m1`` is no overseer, and the overseer's
  set-up does not adopt that member or touch its tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from elowen.core.events import EventBus
from elowen.core.store import Store
from elowen.daemon.auth import Access, authenticate
from elowen.daemon.models import UserCreate
from elowen.daemon.names import InvalidUserName, check_user_name
from elowen.daemon.services.tasks import TaskService
from elowen.daemon.services.users import UserExists, UserService, UsersHostService
from elowen_builtins.overseer.missions import MAX_NAME, MAX_REASON, MissionError, MissionStore
from elowen_sdk.manifest import ConfigError, parse_manifest
from tests.support.executors import builtin_resolver

OVERSEER_SCHEMA = Path(__file__).resolve().parents[2] / "builtin_plugins" / "overseer" / "schema.sql"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store(tmp_path / "t.db")
    yield s
    s.close()


@pytest.mark.parametrize("value", ["1e309", "-1e309", "inf", "nan", float("inf"), float("nan")])
def test_infinite_numbers_are_refused_as_settings(value: Any) -> None:
    manifest = parse_manifest({"name": "p", "version": "0.1.0", "api": "1", "entry": "x", "config": {"n": {"type": "number", "default": 1}}})
    with pytest.raises(ConfigError, match="finite"):
        manifest.validate_config({"n": value})
    assert manifest.validate_config({"n": "1e300"})["n"] == 1e300


@pytest.mark.parametrize(
    "name",
    ["mia ", " mia", "mi\ta", "mi\u200ba", "mi\u202ea", "ｍia", "pаypal", "mia\u00a0x", "", "x" * 101],
    ids=["trailing", "leading", "tab", "zero-width", "bidi", "fullwidth", "cyrillic-a", "nbsp", "empty", "long"],
)
def test_confusing_user_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidUserName):
        check_user_name(name)
    with pytest.raises(ValidationError):
        UserCreate.model_validate({"name": name})


@pytest.mark.parametrize("name", ["mia", "Zoë Müller", "山田 Taro", "ivan-petrov_2", "Иван"])
def test_ordinary_names_pass(name: str) -> None:
    assert check_user_name(name) == name
    assert UserCreate.model_validate({"name": name}).name == name


def test_a_name_looking_like_an_existing_one_is_taken(store: Any) -> None:
    users = UserService(store, Access(store))
    users.create("paul", "member")
    for twin in ("Paul", "pauI", "PAUL"):
        with pytest.raises(UserExists, match="looks too much like"):
            users.create(twin, "member")
    with pytest.raises(InvalidUserName):
        users.create("paul ", "member")


def test_mission_names_and_reasons_have_limits(store: Any) -> None:
    store.apply_plugin_schema("overseer", OVERSEER_SCHEMA.read_text(), 1)
    tasks = TaskService(store, EventBus(store), builtin_resolver())
    missions = MissionStore(store, lambda *a, **k: None, lambda: tasks)
    with pytest.raises(MissionError, match="at most"):
        missions.create(name="m" * (MAX_NAME + 1), level=1)
    with pytest.raises(MissionError, match="control"):
        missions.create(name="a\nb", level=1)
    m = missions.create(name="m" * MAX_NAME, level=1)
    with pytest.raises(MissionError, match="at most"):
        missions.update(m["id"], {"name": "n" * (MAX_NAME + 1)})
    with pytest.raises(MissionError, match="reason"):
        missions.transition(m["id"], "engage", reason="r" * (MAX_REASON + 1))
    assert missions.transition(m["id"], "engage", reason="go")["state"] == "active"
    stalled = missions.stall(m["id"], "s" * (MAX_REASON * 3))
    assert stalled is not None and len(stalled["state_reason"]) == MAX_REASON


def test_a_member_named_like_an_overseer_is_not_one(store: Any) -> None:
    users = UserService(store, Access(store))
    host = UsersHostService(users)
    member, token = users.create("overseer-m1", "member")
    assert host.overseer_mission(member["id"]) is None
    overseer_id, overseer_token = host.overseer_token(1)
    assert overseer_id != member["id"]  # not adopted
    assert host.overseer_mission(overseer_id) == 1 and host.overseer_mission(member["id"]) is None
    assert authenticate(store, f"Bearer {token}").user_id == member["id"]  # its token still works
    assert authenticate(store, f"Bearer {overseer_token}").user_id == overseer_id
    assert host.user(member["id"])["kind"] == "person" and host.user(overseer_id)["kind"] == "overseer"

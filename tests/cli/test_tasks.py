"""Tasks, projects and users through the CLI against a real daemon; the agent's ``elowen close``;
error exit statuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import Home

pytestmark = pytest.mark.slow


def test_project_add_and_list(daemon: Home, project: dict[str, Any], tmp_path: Path) -> None:
    assert project["name"] == "demo" and Path(project["path"]).is_dir()
    listed = daemon.json("project", "list")
    assert [p["id"] for p in listed if p["name"] == "demo"] == [project["id"]]
    table = daemon.ok("project", "list").splitlines()
    assert table[0].split() == ["ID", "NAME", "PATH"]
    assert any(line.split()[:2] == [str(project["id"]), "demo"] for line in table[1:])

    # a relative path is resolved by the CLI, where the user typed it
    (tmp_path / "rel").mkdir()
    rel = daemon.json("project", "add", "rel", "rel", cwd=tmp_path)
    assert rel["path"] == str((tmp_path / "rel").resolve())


def test_task_round_trip(daemon: Home, project: dict[str, Any]) -> None:
    pid = str(project["id"])
    dep = daemon.json("task", "create", "first step", "--project", pid)
    created = daemon.json(
        "task",
        "create",
        "write the parser",
        "--project",
        pid,
        "--description",
        "use the grammar",
        "--priority",
        "1",
        "--dep",
        str(dep["id"]),
        "--label",
        "parser",
        "--label",
        "v1",
        "--exec",
        "sonnet",
    )
    assert created["title"] == "write the parser" and created["state"] == "open"
    assert created["priority"] == 1 and created["deps"] == [dep["id"]] and set(created["labels"]) == {"parser", "v1"}
    assert created["exec"] == "sonnet" and created["project_id"] == project["id"]

    ids = [t["id"] for t in daemon.json("task", "list", "--project", pid, "--all")]
    assert created["id"] in ids and dep["id"] in ids
    assert [t["id"] for t in daemon.json("task", "list", "--label", "parser")] == [created["id"]]

    shown = daemon.json("task", "show", str(created["id"]))
    assert shown["description"] == "use the grammar"
    human = daemon.ok("task", "show", str(created["id"]))
    assert "title:" in human and "write the parser" in human

    closed = daemon.json("task", "close", str(dep["id"]), "--summary", "done", "--evidence", "pytest: 3 passed", "--evidence", "commit abc")
    assert closed["state"] == "closed" and closed["summary"] == "done" and closed["evidence"] == ["pytest: 3 passed", "commit abc"]
    assert "cancelled" in daemon.ok("task", "cancel", str(created["id"]))
    assert daemon.json("task", "show", str(created["id"]))["state"] == "cancelled"
    assert created["id"] in [t["id"] for t in daemon.json("task", "list", "--state", "cancelled", "--all")]
    assert dep["id"] not in [t["id"] for t in daemon.json("task", "list", "--state", "open", "--all")]

    table = daemon.ok("task", "list", "--project", pid).splitlines()
    assert table[0].split() == ["ID", "STATE", "PRI", "PROJECT", "EXEC", "LABELS", "TITLE"]


def test_task_list_pages_and_all(daemon: Home, project: dict[str, Any]) -> None:
    for i in range(3):
        daemon.ok("task", "create", f"paged {i}", "--project", str(project["id"]), "--label", "paged")
    one = daemon.run("task", "list", "--label", "paged", "--limit", "2", "--json")
    assert one.returncode == 0 and len(json.loads(one.stdout)) == 2
    assert "use --all" in one.stderr
    every = daemon.json("task", "list", "--label", "paged", "--limit", "2", "--all")
    assert sorted(t["title"] for t in every) == ["paged 0", "paged 1", "paged 2"]


def test_task_create_uses_the_project_holding_the_cwd(daemon: Home, project: dict[str, Any]) -> None:
    sub = Path(project["path"]) / "src"
    sub.mkdir(exist_ok=True)
    created = daemon.json("task", "create", "from inside", cwd=sub)
    assert created["project_id"] == project["id"]
    proc = daemon.run("task", "create", "from nowhere", cwd=Path("/"))
    assert proc.returncode == 2 and "--project" in proc.stderr


def test_agent_closes_its_task_with_the_short_form(daemon: Home, project: dict[str, Any]) -> None:
    """The daemon gives a spawned agent an agent token in its environment; there is no API to
    mint one, so the test mints it with the daemon's own function on the same database file."""
    from elowen.core.store import Store
    from elowen.daemon.auth import create_agent_token

    mine = daemon.json("task", "create", "agent work", "--project", str(project["id"]))
    other = daemon.json("task", "create", "someone else's", "--project", str(project["id"]))
    store = Store(daemon.path / "elowen.db")
    try:
        agent_token = create_agent_token(store, mine["id"])
    finally:
        store.close()
    agent_env = {"ELOWEN_URL": daemon.url, "ELOWEN_TOKEN": agent_token, "ELOWEN_TASK": str(mine["id"]), "ELOWEN_HOME": "/nonexistent"}

    denied = daemon.run("close", str(other["id"]), "--summary", "not mine", env=agent_env)
    assert denied.returncode == 1 and denied.stderr.startswith("error: ") and "Traceback" not in denied.stderr

    out = daemon.ok("close", "--summary", "implemented", "--evidence", "tests pass", env=agent_env)
    assert f"task {mine['id']}: closed" in out
    shown = daemon.json("task", "show", str(mine["id"]))
    assert shown["state"] == "closed" and shown["evidence"] == ["tests pass"]

    no_id = daemon.run("close", "--summary", "x", env={**agent_env, "ELOWEN_TASK": ""})
    assert no_id.returncode == 2 and "ELOWEN_TASK" in no_id.stderr


def test_user_add_list_grant(daemon: Home, project: dict[str, Any]) -> None:
    proc = daemon.run("user", "add", "bob", "--role", "member", "--exec", "sonnet")
    assert proc.returncode == 0, proc.stderr
    token_lines = [line for line in proc.stdout.splitlines() if line.startswith("token: ")]
    assert len(token_lines) == 1 and "shown only once" in proc.stderr
    bob_token = token_lines[0].removeprefix("token: ")

    users = {u["name"]: u for u in daemon.json("user", "list")}
    assert users["bob"]["role"] == "member" and users["bob"]["allowed_execs"] == ["sonnet"]
    assert bob_token not in daemon.ok("user", "list") + daemon.ok("user", "list", "--json")

    # bob sees no project until granted one
    as_bob = {"ELOWEN_TOKEN": bob_token}
    assert daemon.json("project", "list", env=as_bob) == []
    daemon.ok("user", "grant", "bob", "--project", str(project["id"]), "--exec", "codex:gpt-5", "--tool", "files.read")
    assert [p["id"] for p in daemon.json("project", "list", env=as_bob)] == [project["id"]]
    bob = {u["name"]: u for u in daemon.json("user", "list")}["bob"]
    assert bob["allowed_execs"] == ["sonnet", "codex:gpt-5"] and bob["tool_grants"] == ["files.read"]

    # a member is not an admin
    denied = daemon.run("user", "list", env=as_bob)
    assert denied.returncode == 1 and denied.stderr.startswith("error: ")

    missing = daemon.run("user", "grant", "nobody", "--tool", "x")
    assert missing.returncode == 1 and "no user named 'nobody'" in missing.stderr
    assert daemon.run("user", "grant", "bob").returncode == 2


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("task", "show", "999999"), 1),
        (("task", "close", "999999", "--summary", "x"), 1),
        (
            (
                "task",
                "create",
            ),
            2,
        ),
        (("task", "list", "--state", "bogus"), 2),
        (("task", "create", "t", "--priority", "9", "--project", "1"), 2),
        (("no-such-command",), 2),
        (("plugin", "config", "tmux", "novalue"), 2),
    ],
)
def test_error_exit_statuses(daemon: Home, args: tuple[str, ...], code: int) -> None:
    proc = daemon.run(*args)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    if code == 1:
        assert proc.stderr.startswith("error: ")


def test_bad_token_is_an_api_error(daemon: Home) -> None:
    proc = daemon.run("task", "list", env={"ELOWEN_TOKEN": "elw_wrong"})
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "elw_wrong" not in proc.stderr
    assert "hint: the token comes from ELOWEN_TOKEN" in proc.stderr

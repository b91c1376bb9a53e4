"""The newcomer's CLI path, with the real ``elowen`` script against a real daemon (its agents
plugin off, so tasks stay where they are put): ``--project`` by name or id, ``--mission``,
``--no-start``, ``task reopen`` (with a note, refused on an open task), ``provider add
--default-model``, and non-zero exit statuses on every error (``chat -m`` without a default
model, ``executors`` without the agents plugin, an unknown project or mission)."""

from __future__ import annotations

import subprocess
from typing import Any

from .conftest import ELOWEN, Home


def test_project_by_name_or_id(daemon: Home, project: dict[str, Any]) -> None:
    by_name = daemon.json("task", "create", "named", "--project", "demo")
    by_id = daemon.json("task", "create", "numbered", "--project", str(project["id"]))
    assert by_name["project_id"] == by_id["project_id"] == project["id"]
    listed = {t["title"] for t in daemon.json("task", "list", "--project", "demo", "--all")}
    assert {"named", "numbered"} <= listed
    for bad in ("nope", "999999"):
        proc = daemon.run("task", "create", "x", "--project", bad)
        assert proc.returncode == 2 and f"no project '{bad}'" in proc.stderr and f"{project['id']} (demo)" in proc.stderr, proc.stderr


def test_mission_puts_the_task_in_it(daemon: Home, project: dict[str, Any]) -> None:
    mission = daemon.json("mission", "create", "first", "--project", str(project["id"]))
    task = daemon.json("task", "create", "in a mission", "--project", "demo", "--mission", str(mission["id"]), "--label", "mission:77")
    assert task["labels"] == [f"mission:{mission['id']}"]  # one mission, the one given
    proc = daemon.run("task", "create", "x", "--project", "demo", "--mission", "999999")
    assert proc.returncode == 1 and "not found" in proc.stderr, proc.stderr
    assert "x" not in {t["title"] for t in daemon.json("task", "list", "--all")}


def test_reopen_with_a_note_and_no_start(daemon: Home, project: dict[str, Any]) -> None:
    held = daemon.json("task", "create", "later", "--project", "demo", "--no-start")
    assert held["state"] == "blocked" and "elowen task reopen" in held["resume_note"]
    opened = daemon.json("task", "reopen", str(held["id"]), "--note", "use the new API this time")
    assert opened["state"] == "open" and opened["resume_note"] == "use the new API this time"
    proc = daemon.run("task", "reopen", str(held["id"]))
    assert proc.returncode == 1 and "already open" in proc.stderr, proc.stderr
    daemon.ok("task", "cancel", str(held["id"]))
    assert "task " + str(held["id"]) + ": open" in daemon.ok("task", "reopen", str(held["id"]), "--exec", "claude")
    assert daemon.json("task", "show", str(held["id"]))["exec"] == "claude"
    missing = daemon.run("task", "reopen", "999999")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_chat_without_a_default_model_exits_non_zero_and_default_model_fixes_it(daemon: Home) -> None:
    added = daemon.run("provider", "add", "offline", "--kind", "openai", "--base-url", "http://127.0.0.1:9/v1")
    assert added.returncode == 0 and "no default model is set" in added.stderr, added.stderr
    proc = daemon.run("chat", "-m", "hello")
    assert proc.returncode == 1 and "no default model" in proc.stderr, (proc.returncode, proc.stderr)
    out = daemon.ok("provider", "add", "offline", "--kind", "openai", "--base-url", "http://127.0.0.1:9/v1", "--replace", "--default-model", "m1")
    assert "default model: offline/m1" in out
    assert daemon.json("plugin", "info", "inference")["config"]["default_model"] == "offline/m1"
    proc = daemon.run("chat", "-m", "hello")  # now it tries the provider, which does not answer: still an error
    assert proc.returncode == 1 and "offline" in proc.stderr and "no default model" not in proc.stderr, proc.stderr
    daemon.ok("provider", "remove", "offline")
    daemon.ok("plugin", "config", "inference", "default_model=")


def test_executors_needs_the_agents_plugin(daemon: Home) -> None:
    proc = daemon.run("executors")
    assert proc.returncode != 0 and proc.stderr.startswith("error:"), (proc.returncode, proc.stderr)


def test_piped_chat_exits_non_zero_when_a_turn_failed(daemon: Home) -> None:
    daemon.ok("provider", "add", "piped", "--kind", "openai", "--base-url", "http://127.0.0.1:9/v1")
    try:
        proc = subprocess.run([str(ELOWEN), "chat", "--new"], input="hello\n", env=daemon.env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "no default model" in proc.stderr, (proc.returncode, proc.stderr)
    finally:
        daemon.ok("provider", "remove", "piped")

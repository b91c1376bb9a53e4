"""Shared helpers for the daemon tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from elowen.core.store import Store
from elowen.daemon.auth import create_agent_token


def assert_error_shape(response: httpx.Response, status: int | None = None) -> dict[str, Any]:
    """The response is a 4xx (or ``status``) with exactly the API's error shape."""
    if status is not None:
        assert response.status_code == status, (response.status_code, response.text)
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert isinstance(body["error"]["code"], str) and body["error"]["code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def agent_token(home: Path, task_id: int) -> str:
    """An agent token for ``task_id``, made the way the agents plugin makes it (straight in the
    daemon's database; WAL lets this process write while the daemon runs)."""
    store = Store(home / "elowen.db")
    try:
        return create_agent_token(store, task_id)
    finally:
        store.close()


def parked_task(client: httpx.Client, project_id: int, title: str) -> int:
    """A task no agent will claim (it depends on an open gate task), for tests of agent tokens:
    the agents plugin would otherwise start a CLI for it, and the session's end (no CLI is
    installed in these daemons) revokes the task's agent tokens at once."""
    gate = client.post("/tasks", json={"title": f"gate of {title}", "project_id": project_id})
    assert gate.status_code == 201, gate.text
    r = client.post("/tasks", json={"title": title, "project_id": project_id, "deps": [gate.json()["id"]]})
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def make_project(client: httpx.Client, folder: Path, name: str) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    r = client.post("/projects", json={"name": name, "path": str(folder)})
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def make_user(client: httpx.Client, name: str, role: str = "member", **extra: Any) -> tuple[int, str]:
    r = client.post("/users", json={"name": name, "role": role, **extra})
    assert r.status_code == 201, r.text
    return int(r.json()["user"]["id"]), r.json()["token"]

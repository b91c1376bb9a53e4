"""End to end: the REAL OpenCode 1.18.33 and Kilo 7.7.7 (installed by
``scripts/install-test-deps``) under the daemon, in tmux and bubblewrap, against the scripted
model server, get Elowen's MCP server configured by their provider (the inline config
``OPENCODE_CONFIG_CONTENT`` / ``KILO_CONFIG_CONTENT`` naming the token as
``{env:ELOWEN_TOKEN}``) and close their task with the ``close`` tool, which the CLI presents to
the model as ``elowen_close``. With the provider's ``mcp = false`` the model gets no Elowen
tool.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e._overseer_daemon import Daemon, start, wait
from tests.support.model_server import ModelServer, ParsedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

CLOSE_TOOL = "elowen_close"
EVIDENCE = ["closed through MCP", "by the scripted model"]
CONTENT_ENV = {"opencode": "OPENCODE_CONFIG_CONTENT", "kilo": "KILO_CONFIG_CONTENT"}


def script(request: ParsedRequest) -> Reply:
    """Calls ``elowen_close`` once when the task asks for it and the tool is offered."""
    if not request.has_tools:
        return Reply(text="Fake session title")
    if re.search(r"\bCLOSE\b", request.prompt) and not request.tool_results and CLOSE_TOOL in request.tool_names:
        return Reply(text="FAKE: closing through MCP.", tool_calls=(ToolCall(CLOSE_TOOL, {"summary": "closed via MCP", "evidence": EVIDENCE}),))
    return Reply(text="FAKE: done.")


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(script) as server:
        yield server


@pytest.fixture
def daemon(tmp_path: Path, model: ModelServer) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(cli: str, **provider: object) -> Daemon:
        d = start(tmp_path, model, cli=cli, provider=provider)
        started.append(d)
        return d

    try:
        yield make
    finally:
        for d in started:
            d.stop()


def new_task(d: Daemon, cli: str) -> int:
    body = {"title": "mcp task", "project_id": d.project, "exec": f"{cli}:fake/fake-model", "description": "Close this task through MCP. CLOSE"}
    return int(d.post("/tasks", body)["id"])


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
def test_the_agent_closes_its_task_through_elowens_mcp_server(daemon: Callable[..., Daemon], model: ModelServer, cli: str) -> None:
    d = daemon(cli)
    task_id = new_task(d, cli)
    closed = wait(lambda: (t := d.get(f"/tasks/{task_id}"))["state"] == "closed" and t, f"{cli} closed its task through MCP", on_fail=d.screen)
    assert closed["evidence"] == EVIDENCE
    offered = [r for r in model.requests if CLOSE_TOOL in r.tool_names]
    assert offered, f"{cli} was not given Elowen's MCP tools"
    assert {"elowen_task_get", "elowen_progress", "elowen_ask"} <= set(offered[0].tool_names)
    assert d.get("/decisions", task=task_id, kind="prompt")["items"] == []  # Elowen's tools ask nothing
    # the token is in neither the pane's command line nor the stored environment; the inline
    # config names it only as {env:ELOWEN_TOKEN}
    started = d.tmux("list-panes", "-a", "-F", "#{pane_start_command}").stdout
    assert started.strip() and "elw_" not in started
    sessions = d.get("/sessions", task=task_id)["items"]
    assert sessions and all("ELOWEN_TOKEN" not in (s.get("env") or {}) for s in sessions)
    inline = [json.loads(s["env"][CONTENT_ENV[cli]]) for s in sessions if CONTENT_ENV[cli] in (s.get("env") or {})]
    if inline:  # the stored environment keeps the variable: check what it says
        server = inline[0]["mcp"]["elowen"]
        assert server["type"] == "remote" and server["url"] == f"{d.url}/mcp"
        assert server["headers"] == {"Authorization": "Bearer {env:ELOWEN_TOKEN}"}


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
def test_mcp_false_gives_the_agent_no_elowen_tools(daemon: Callable[..., Daemon], model: ModelServer, cli: str) -> None:
    d = daemon(cli, mcp=False)
    task_id = new_task(d, cli)
    wait(lambda: any(r.has_tools and "CLOSE" in r.prompt for r in model.requests), f"{cli} asked the model", on_fail=d.screen)
    time.sleep(2.0)
    asked = [r for r in model.requests if r.has_tools]
    assert asked and not any(n.startswith("elowen_") for r in asked for n in r.tool_names)
    assert d.get(f"/tasks/{task_id}")["state"] != "closed"

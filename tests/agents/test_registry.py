"""The ``executors`` registry in a real kernel: the four builtin providers and a third party's
(``tests/agents/sample_provider``, written against the SDK only) are listed and resolvable; a
task on the third party's executor really runs (tmux, the fake agent, a prompt decision
classified with the provider's patterns); disabling its plugin makes its specs unavailable
and a ready task on it waits with a note saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen.daemon.services.tasks import TaskService
from elowen_sdk import Service
from elowen_sdk.contracts import missing_members
from elowen_sdk.services.executors import ExecutorsService, ExecutorUnavailable, ResolvedExec, UnknownExecutor
from elowen_sdk.testing import plugin_kernel
from tests.support.executors import kernel_resolver
from tests.support.fake_cli import fake_claude, private_tmux_socket
from tests.support.waiting import until

SAMPLE = Path(__file__).parent / "sample_provider"
FAST = {"scheduler_interval": 0.2, "liveness_interval": 0.2, "stuck_interval": 0.3, "janitor_interval": 0.2}
BUILTINS = ["claude-code", "codex", "opencode", "kilo"]


@pytest.fixture
def socket_name() -> Any:
    with private_tmux_socket() as name:
        yield name


def services(kernel: Any) -> tuple[Any, TaskService]:
    ex = kernel.contributions.get("service", "executors").obj.obj
    owned = kernel.contributions.all("service").get("tasks")
    if owned is None:
        tasks = TaskService(kernel.store, kernel.events, kernel_resolver(kernel))
        kernel.contributions.add("kernel", "service", Service("tasks", tasks), [])
    else:
        tasks = owned.obj.obj
    return ex, tasks


async def test_builtins_and_a_third_party_provider_through_one_registry(tmp_path: Path, socket_name: str) -> None:
    log = tmp_path / "fake.log"
    config = {
        "tmux": {"socket": socket_name, "enter_delay": 0.05},
        "mycli-provider": {"binary": str(fake_claude(tmp_path)), "env": {"FAKE_LOG": str(log)}},
        "agents": FAST,
        "deriver": {"sweep_interval": 0.3},
    }
    enable = ["agents", "deriver", "tmux", *BUILTINS, "mycli-provider"]
    async with plugin_kernel(
        tmp_path, enable=enable, modules=[("tests.agents.sample_provider.plugin", SAMPLE / "elowen-plugin.toml")], config=config
    ) as kernel:
        ex, tasks = services(kernel)
        assert missing_members(ex, ExecutorsService) == []
        listed = {i.name: i for i in ex.executors()}
        assert {"claude", "codex", "opencode", "kilo", "mycli"} <= set(listed)
        assert listed["claude"].plugin == "claude-code" and dict(listed["claude"].aliases) == {"sonnet": "sonnet", "opus": "opus"}
        assert listed["opencode"].slash_models and listed["claude"].plain_models
        mine = listed["mycli"]
        assert (mine.plugin, mine.kind, mine.enabled, mine.display_name) == ("mycli-provider", "cli", True, "My CLI")
        assert mine.examples == ("mycli", "swift", "mycli:swift-2", "mycli:deep-1")
        assert ex.resolve("swift") == ResolvedExec("mycli", "swift-2", "swift", "mycli-provider")
        assert ex.resolve("sonnet").provider == "claude"
        assert ex.provider("mycli").auth_note().startswith("My CLI is not logged in")

        repo = tmp_path / "repo"
        repo.mkdir()
        project = kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(repo),))
        running = tasks.create(title="Run it", project_id=project, exec="mycli:deep-1", description="Run the thing.")
        assert running["exec_resolved"] == {"provider": "mycli", "model": "deep-1"}
        later = tasks.create(title="Later", project_id=project, exec="swift", deps=[running["id"]])

        # the scheduler starts the third party's CLI; the deriver classifies its screen with its patterns
        row = await until(
            lambda: kernel.store.query_one("SELECT * FROM agent_sessions WHERE task_id = ? AND state = 'running' AND pane_id != ''", (running["id"],)),
            what="a running mycli session",
        )
        assert (row["provider"], row["model"]) == ("mycli", "deep-1")
        decisions = kernel.contributions.get("service", "decisions").obj.obj
        [decision] = await until(lambda: decisions.list_decisions(task_id=running["id"], status="pending") or None, what="a prompt decision")
        assert decision["kind"] == "prompt"

        # its plugin disabled: its specs are unavailable (not unknown), a ready task on it waits and says why
        await kernel.registry.disable("mycli-provider")
        with pytest.raises(ExecutorUnavailable) as info:
            ex.resolve("mycli:deep-1")
        assert info.value.plugin == "mycli-provider" and "disabled" in info.value.message and "claude" in info.value.available
        with pytest.raises(ExecutorUnavailable):
            ex.resolve("swift")
        with pytest.raises(ExecutorUnavailable):
            tasks.create(title="refused", project_id=project, exec="swift")
        with pytest.raises(UnknownExecutor):
            ex.resolve("nobody:x")
        assert {i.name: i.enabled for i in ex.executors()}["mycli"] is False
        tasks.close(running["id"], "done")
        note = await until(lambda: [p for p in tasks.progress_log(later["id"]) if p["author"] == "elowen:agents"] or None, what="a waiting note")
        assert "mycli-provider" in note[-1]["text"] and "disabled" in note[-1]["text"]
        assert tasks.get(later["id"])["state"] == "open" and tasks.get(later["id"])["exec_resolved"] is None
        await trio.sleep(1.0)  # five more scheduler ticks: the note is not repeated
        assert len([p for p in tasks.progress_log(later["id"]) if p["author"] == "elowen:agents"]) == 1
        remembered = json.loads((kernel.home / "plugins" / "agents" / "executors.json").read_text())
        assert remembered["mycli"]["plugin"] == "mycli-provider" and remembered["mycli"]["aliases"] == {"swift": "swift-2"}

        # enabled again: the waiting task starts
        await kernel.registry.enable("mycli-provider")
        assert ex.resolve("swift").provider == "mycli"
        await until(lambda: kernel.store.query_one("SELECT 1 FROM agent_sessions WHERE task_id = ?", (later["id"],)), what="the waiting task started")


async def test_a_provider_disabled_before_a_restart_is_still_explained(tmp_path: Path, socket_name: str) -> None:
    config = {"tmux": {"socket": socket_name}}
    async with plugin_kernel(tmp_path, enable=["agents", "tmux", "claude-code", "codex"], config=config) as kernel:
        ex, _ = services(kernel)
        assert ex.resolve("sonnet").plugin == "claude-code"
    async with plugin_kernel(tmp_path, enable=["agents", "tmux", "codex"], config=config) as kernel:
        ex, _ = services(kernel)
        with pytest.raises(ExecutorUnavailable) as info:
            ex.resolve("opus")
        assert info.value.plugin == "claude-code" and info.value.available == ("codex",)
        with pytest.raises(ExecutorUnavailable, match="fallback"):
            ex.resolve(None)  # the default fallback, sonnet
        assert {i.name: i.enabled for i in ex.executors()} == {"claude": False, "codex": True}


async def test_the_owners_list_is_checked_again_when_the_task_is_ready(tmp_path: Path, socket_name: str) -> None:
    from elowen.daemon.server import build_state

    config = {"tmux": {"socket": socket_name}, "mycli-provider": {"binary": "/nonexistent/mycli"}, "agents": FAST}
    async with plugin_kernel(
        tmp_path, enable=["agents", "tmux", "mycli-provider"], modules=[("tests.agents.sample_provider.plugin", SAMPLE / "elowen-plugin.toml")], config=config
    ) as kernel:
        state = build_state(kernel)  # the daemon's real tasks and users services
        repo = tmp_path / "repo"
        repo.mkdir()
        project = kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(repo),))
        member, _ = state.users.create("mia", "member", allowed_execs=["mycli:*"])
        dep = state.tasks.create(title="first", project_id=project)  # no spec: the fallback (sonnet) is unknown here → waits
        task = state.tasks.create(title="mine", project_id=project, exec="mycli:deep-1", deps=[dep["id"]], owner_id=member["id"])
        state.users.update(member["id"], {"allowed_execs": ["sonnet"]})
        state.tasks.close(dep["id"], "done")
        notes = await until(lambda: [p["text"] for p in state.tasks.progress_log(task["id"]) if p["author"] == "elowen:agents"] or None, what="a waiting note")
        assert "not in the owner's allowed executors (sonnet)" in notes[-1]
        assert state.tasks.get(task["id"])["state"] == "open"
        assert kernel.store.query_one("SELECT 1 FROM agent_sessions WHERE task_id = ?", (task["id"],)) is None


async def test_agents_of_a_provider_enabled_after_a_restart_are_supervised(tmp_path: Path, socket_name: str) -> None:
    """After a restart, agents and the deriver start before the third party's provider plugin:
    its live agent is taken back and watched as soon as that plugin is enabled."""
    config = {
        "tmux": {"socket": socket_name, "enter_delay": 0.05},
        "mycli-provider": {"binary": str(fake_claude(tmp_path)), "env": {"FAKE_LOG": str(tmp_path / "fake.log")}},
        "agents": FAST,
        "deriver": {"sweep_interval": 0.3},
    }
    modules = [("tests.agents.sample_provider.plugin", SAMPLE / "elowen-plugin.toml")]
    async with plugin_kernel(tmp_path, enable=["agents", "deriver", "tmux", "mycli-provider"], modules=modules, config=config) as kernel:
        _, tasks = services(kernel)
        repo = tmp_path / "repo"
        repo.mkdir()
        project = kernel.store.execute("INSERT INTO projects (name, path, created_at) VALUES ('demo', ?, '2026-01-01T00:00:00.000Z')", (str(repo),))
        task = tasks.create(title="Run it", project_id=project, exec="mycli:deep-1", description="Run the thing.")
        # pane_id is '' (never NULL) from the claim until tmux has created the session: restarting
        # before that would interrupt the spawn, and the next kernel rightly ends and relaunches
        # a session that never started instead of taking it back
        row = await until(
            lambda: kernel.store.query_one("SELECT * FROM agent_sessions WHERE task_id = ? AND state = 'running' AND pane_id != ''", (task["id"],)),
            what="a running mycli session",
        )
    name = row["session"]
    async with plugin_kernel(tmp_path, enable=["agents", "deriver", "tmux"], modules=modules, config=config) as kernel:
        services(kernel)  # the tasks service: agents waits for it
        agents = kernel.contributions.get("service", "agents").obj.obj
        deriver = kernel.contributions.get("service", "deriver").obj.obj
        await agents.ready.wait()
        await trio.sleep(0.3)
        assert name not in agents.lifecycle.live and name not in deriver.watched()  # its executor is not there yet
        await kernel.registry.enable("mycli-provider")
        await until(lambda: name in agents.lifecycle.live and name in deriver.watched(), what="the agent supervised again")
        assert agents.session(name)["supervised"] is True


async def test_a_provider_without_patterns_is_refused_at_registration(tmp_path: Path, socket_name: str) -> None:
    modules = [("tests.agents.sample_provider.nopatterns", SAMPLE / "nopatterns.toml")]
    async with plugin_kernel(
        tmp_path, enable=["agents", "deriver", "tmux", "claude-code", "zed-provider"], modules=modules, config={"tmux": {"socket": socket_name}}
    ) as kernel:
        info = kernel.registry.describe("zed-provider")
        assert info["state"] == "error"
        assert "executor 'zed'" in info["error"] and "no patterns.toml in package 'tests.agents.sample_provider'" in info["error"]
        ex, _ = services(kernel)
        assert "zed" not in kernel.contributions.all("executor") and ex.resolve("sonnet").provider == "claude"
        assert kernel.registry.describe("deriver")["state"] == "enabled"

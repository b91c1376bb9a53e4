"""After a rejection the agent is told why: the reason is typed into the fake agent's composer
(real tmux, the tmux service's ``send_text``) once the prompt has left the screen; with
``after_reject = "block"`` the task is blocked with the reason instead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elowen_builtins.agents.config import AgentsConfig
from elowen_builtins.agents.decide import DEFAULT_REJECT_REASON, Decisions
from tests.agents.test_agents_integration import World, pending, world
from tests.support.fake_cli import private_tmux_socket
from tests.support.waiting import until


@pytest.fixture
def socket_name() -> Iterator[str]:
    with private_tmux_socket() as name:
        yield name


def typed(w: World) -> str:
    """What the fake agent read at its idle screen (Enter as a newline)."""
    return "".join("\n" if e["text"] == "Enter" else e["text"] for e in w.log_events() if e["event"] == "input")


async def test_the_reason_is_typed_into_the_composer(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        [decision] = await pending(w, task_id)
        reason = "Do not echo; run the tests with pytest -q instead."
        decided = await w.agents.decide(decision["id"], "reject", text=reason, rationale="not this")
        assert decided["status"] == "rejected"
        await until(lambda: reason + "\n" in typed(w) or reason + "\r" in typed(w), what="the reason typed into the agent", timeout=15)
        # the reject key came first, the reason after the prompt left the screen
        events = [e["event"] for e in w.log_events()]
        assert events.index("key") < events.index("idle") < events.index("input")
        assert w.tasks.get(task_id)["state"] == "in_progress"


async def test_no_reason_gives_the_default_text(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name) as w:
        task_id = w.create_task()
        [decision] = await pending(w, task_id)
        await w.agents.decide(decision["id"], "reject")
        await until(lambda: DEFAULT_REJECT_REASON in typed(w), what="the default reason typed", timeout=15)


async def test_block_moves_the_task_to_blocked_with_the_reason(tmp_path: Path, socket_name: str) -> None:
    async with world(tmp_path, socket_name, agents={"after_reject": "block"}) as w:
        task_id = w.create_task()
        [decision] = await pending(w, task_id)
        await w.agents.decide(decision["id"], "reject", rationale="touches production data")
        task = await until(lambda: (t := w.tasks.get(task_id))["state"] == "blocked" and t, what="task blocked", timeout=15)
        assert "touches production data" in task["resume_note"] and f"Decision {decision['id']}" in task["resume_note"]
        assert typed(w) == ""


async def test_an_agent_that_never_comes_back_idle_gets_its_task_blocked(tmp_path: Path, socket_name: str) -> None:
    # two prompts: after the first is rejected the second is on screen, never an idle composer
    async with world(tmp_path, socket_name, env={"FAKE_PROMPTS": "2"}) as w:
        task_id = w.create_task()
        [decision] = await pending(w, task_id)
        decided = await w.agents.decide(decision["id"], "reject", text="not that")
        await until(lambda: sum(e["event"] == "prompt" for e in w.log_events()) == 2, what="the second prompt")
        outcome = await w.agents.decisions.after_rejection(decided, "not that", within=1.0)
        assert outcome == "blocked"
        task = w.tasks.get(task_id)
        assert task["state"] == "blocked" and "not that" in task["resume_note"]
        assert typed(w) == ""


def test_after_reject_setting_is_checked() -> None:
    assert AgentsConfig.from_mapping({"after_reject": "block"}).after_reject == "block"
    assert AgentsConfig().after_reject == "tell"
    with pytest.raises(ValueError):
        Decisions(None, None, None, tmux=lambda: None, provider=lambda n: None, end_agent=lambda n: None, after_reject="ignore")  # type: ignore[arg-type]

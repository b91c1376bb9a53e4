"""The brain tools of cron ("remind me at 18:30 to …") in a real brain turn: the job belongs to
the user whose conversation called the tool, a forged caller is refused, and ``cron.add`` needs
the user's approval."""

from __future__ import annotations

import json
from typing import Any

import pytest

from elowen_builtins.cron.tools import ToolRefused
from elowen_sdk.testing import call as call_tool
from tests.support.model_server import ParsedRequest, Reply, ToolCall

from .conftest import CronEnv


async def test_remind_me_creates_the_callers_job(cron: CronEnv) -> None:
    env = cron.brain
    member = env.member
    env.service.set_yolo_default(member, True)  # approve by YOLO: no human in this test

    def model(request: ParsedRequest) -> Reply:
        if not request.has_tools:
            return Reply(text="Summary.")
        if request.tool_results:
            return Reply(text="I will remind you. " + request.tool_results[-1].output)
        if "list" in request.prompt:
            return Reply(tool_calls=[ToolCall("cron_list", {})])
        args = {"schedule": "at 18:30", "prompt": "Remind the user to call Ana.", "name": "call Ana", "tz": "Europe/Berlin"}
        return Reply(tool_calls=[ToolCall("cron_add", args)])

    env.server.script = model
    conv = env.conversation(member)
    await env.service.turn(member, conv["id"], "remind me at 18:30 to call Ana")
    (job,) = cron.kernel.store.query("SELECT * FROM cron_jobs")
    assert job["owner_id"] == member and job["owner_role"] == "member" and job["name"] == "call Ana"
    assert job["tz"] == "Europe/Berlin" and job["catchup"] == "once" and json.loads(job["spec"])["kind"] == "once"
    await env.service.turn(member, conv["id"], "list my reminders")
    listed = json.loads(env.server.requests[-1].tool_results[-1].output)
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    # another user's conversation does not see it
    other = env.conversation(env.admin)
    env.service.set_yolo_default(env.admin, True)
    await env.service.turn(env.admin, other["id"], "list my reminders")
    assert json.loads(env.server.requests[-1].tool_results[-1].output) == {"jobs": []}


async def test_cron_tools_refuse_a_forged_caller_and_add_needs_approval(cron: CronEnv) -> None:
    add = cron.kernel.contributions.get("tool", "cron.add").obj
    assert add.needs_approval is True
    for stamp in ("", f"{cron.brain.admin}:" + "0" * 64, "1"):
        with pytest.raises(ToolRefused, match="signed-in user"):
            await call_tool(add, schedule="in 20m", prompt="x", _caller=stamp)
    assert cron.kernel.store.query("SELECT id FROM cron_jobs") == []


async def test_a_caller_stamp_from_the_model_is_never_taken(cron: CronEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model writes the admin's (valid, leaked) stamp into its arguments and the stamping
    hook fails (the bus then lets the call through unchanged): the brain drops every ``_``
    argument the model sent, so the tool sees no caller and refuses."""
    from elowen_builtins.cron.plugin import _stamps

    env = cron.brain
    member = env.member
    env.service.set_yolo_default(member, True)
    stamp = _stamps["cron"]
    leaked = f"{env.admin}:{stamp._mac(str(env.admin))}"

    def broken(call: Any) -> None:
        raise RuntimeError("the stamping hook failed")

    monkeypatch.setattr(stamp, "patch", broken)

    def model(request: ParsedRequest) -> Reply:
        if not request.has_tools:
            return Reply(text="Summary.")
        if request.tool_results:
            return Reply(text="Done: " + request.tool_results[-1].output)
        args = {"schedule": "in 20m", "prompt": "as the admin", "_caller": leaked, "_narrowed": False}
        return Reply(tool_calls=[ToolCall("cron_add", args)])

    env.server.script = model
    conv = env.conversation(member)
    await env.service.turn(member, conv["id"], "schedule something")
    assert cron.kernel.store.query("SELECT id FROM cron_jobs") == []
    assert "signed-in user" in env.server.requests[-1].tool_results[-1].output

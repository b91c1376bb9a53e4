"""Plugin slash commands in a conversation: a handler that raises is answered with
``Sorry, that did not work: <message>`` as a ``brain.error`` (so ``elowen chat -m`` exits 1),
its traceback logged once, and an audit row written with the plugin as the actor."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from elowen_sdk import Command

from .conftest import brain_kernel


def _boom(args: str) -> str:
    raise RuntimeError(f"notes database is locked ({args or 'no args'})")


async def _async_ok(args: str) -> str:
    return f"3 notes matching {args!r}"


async def _events(env: Any, cid: int, text: str) -> list[dict[str, Any]]:
    out = []
    async for item in env.service.stream(env.admin, cid, text):
        out.append(item)
        if item["type"] == "brain.done":
            break
    return out


async def test_a_failing_plugin_command_answers_with_an_error_logs_and_audits(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    async with brain_kernel(tmp_path) as env:
        env.kernel.contributions.add("notesplug", "command", Command("notes", "Notes.", _boom), [])
        cid = env.conversation()["id"]
        events = await _events(env, cid, "/notes today")
        kinds = [e["type"] for e in events]
        assert "brain.command" not in kinds
        errors = [e for e in events if e["type"] == "brain.error"]
        assert [e["message"] for e in errors] == ["Sorry, that did not work: notes database is locked (today)"]
        assert errors[0]["code"] == "command_failed"
        assert kinds[-1] == "brain.done"
        logged = [r for r in caplog.records if "command /notes failed" in r.getMessage()]
        assert len(logged) == 1 and logged[0].exc_info is not None
        env.kernel.store.flush_audit()
        rows = env.kernel.store.query("SELECT actor, action, target, outcome, detail FROM audit WHERE action = 'command'")
        assert [(r["actor"], r["target"], r["outcome"]) for r in rows] == [("notesplug", "notes", "error")]
        assert json.loads(rows[0]["detail"]) == {"error": "RuntimeError: notes database is locked (today)"}
        # the conversation is usable afterwards
        assert "brain.done" in [e["type"] for e in await _events(env, cid, "/help")]


async def test_a_working_plugin_command_replies_as_a_command(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        env.kernel.contributions.add("notesplug", "command", Command("notes", "Notes.", _async_ok), [])
        cid = env.conversation()["id"]
        events = await _events(env, cid, "/notes milk")
        assert [e["text"] for e in events if e["type"] == "brain.command"] == ["3 notes matching 'milk'"]
        assert not [e for e in events if e["type"] == "brain.error"]
        result = await env.service.turn(env.admin, cid, "/notes eggs")
        assert result["messages"] == [] or all(m["role"] != "assistant" for m in result["messages"])


async def test_a_failing_command_reaches_a_chat_channel_as_one_sentence(tmp_path: Path) -> None:
    from elowen_builtins.brain.channels import plain_error

    assert plain_error("Sorry, that did not work: locked") == "Sorry, that did not work: locked"
    assert plain_error("ValueError: context too long") == "Sorry, that did not work: context too long."

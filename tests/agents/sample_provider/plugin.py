"""A provider plugin as a third party would write it, against the SDK only: executor
``mycli`` with the alias ``swift``. Its CLI is the fake agent (tests/agents/fake_agent.py),
which draws Claude Code's screens, so it borrows Claude Code's screen patterns."""

from __future__ import annotations

import re
from typing import Any

from elowen_sdk import Executor, hookimpl
from elowen_sdk.providers import Provider

__all__ = ["MyCliProvider", "register_executors"]


class MyCliProvider(Provider):
    """Executor ``mycli``."""

    name = "mycli"
    display_name = "My CLI"
    aliases = {"swift": "swift-2"}
    models = ("swift-2", "deep-1")
    model_pattern = re.compile(r"^[a-z]+-\d$")
    model_hint = "'<word>-<digit>'"
    patterns_package = "elowen_builtins.claude_code"  # the fake agent draws Claude Code's screens
    auth_hint = "My CLI is not logged in: run `mycli login`; then reopen the task."

    def _command(
        self, binary: str, prompt: str, *, model: str | None, session_id: str | None, resume: bool, extra_args: list[str], skip_permissions: bool
    ) -> list[str]:
        return [binary, *(["--model", model] if model else []), *extra_args, *(["--", prompt] if prompt else [])]


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    register(Executor("mycli", MyCliProvider(ctx.config, plugin=ctx.name)))

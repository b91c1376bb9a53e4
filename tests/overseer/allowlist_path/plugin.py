"""An example third-party decision path (docs/plugins.md, "Writing a decision path"): it
approves ``prompt`` decisions whose shell command starts with a listed program and proposes
``escalate`` for everything else. It answers at once; the overseer still applies the level's
threshold and its destructive-action rules (those run before any path is asked)."""

from __future__ import annotations

import shlex
from typing import Any

from elowen_sdk import hookimpl
from elowen_sdk.services.missions import DecisionPath, DecisionRequest, Proposal


@hookimpl
def register_decision_paths(ctx: Any, register: Any) -> None:
    programs = frozenset(ctx.config["programs"])

    async def propose(request: DecisionRequest) -> Proposal:
        command = (request.decision.get("payload") or {}).get("request", {}).get("command") or ""
        words = shlex.split(command) if isinstance(command, str) else []
        if request.kind == "prompt" and words and words[0] in programs:
            return Proposal("approve", 1.0, f"{words[0]} is on the allow-list", "allowlist")
        return Proposal("escalate", None, "not on the allow-list", "allowlist")

    register(DecisionPath("allowlist", propose, priority=int(ctx.config["priority"]), description="an allow-list of programs"))

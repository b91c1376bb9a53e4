"""The agents plugin's settings (``[plugins.agents.config]``; schema in ``elowen-plugin.toml``)
and the few kernel facilities the SDK does not expose yet."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["AgentsConfig", "daemon_url", "exec_settings", "executor_provider"]


@dataclass(frozen=True, slots=True)
class AgentsConfig:
    """Intervals are seconds (monotonic clock).

    Attributes:
        scheduler_interval: scheduler tick (also runs at once on ``task.created``).
        sweep_interval: full deriver sweep, the safety net of the event-driven path.
        liveness_interval: liveness sweep (pane death, idle/stalled).
        stuck_interval: stuck detector.
        janitor_interval: janitor.
        debounce_quiet / debounce_max: classify this long after the last output, but at most
            ``debounce_max`` after the first unclassified output. Defaults 0.1 / 0.3 s: with 50
            busy agents this keeps the deriver under 15 % of a core with prompt → decision at
            ~110 ms; 0.04 / 0.15 s answers in ~50 ms for ~17 % (bench/deriver.py).
        idle_after / stall_after: no screen change for this long → idle / stalled (one
            ``check`` decision per stall episode).
        max_agents: agents running at once.
        max_relaunches: times a task whose agent died is reopened before it is blocked.
        preseed_trust: mark the project folder trusted in the CLI's config before spawning.
        auto_trust: accept a folder-trust dialog that still appears (after checking the "yes"
            option is selected).
        gate_timeout: seconds the decision gate may take.
        ticket_ttl: seconds a terminal ticket stays valid.
        url: ``ELOWEN_URL`` given to agents (``""``: ``$ELOWEN_URL``, else
            ``http://$ELOWEN_HOST:$ELOWEN_PORT``, default ``http://127.0.0.1:4400``).
    """

    scheduler_interval: float = 30.0
    sweep_interval: float = 5.0
    liveness_interval: float = 30.0
    stuck_interval: float = 60.0
    janitor_interval: float = 60.0
    debounce_quiet: float = 0.1
    debounce_max: float = 0.3
    idle_after: float = 60.0
    stall_after: float = 600.0
    max_agents: int = 4
    max_relaunches: int = 2
    preseed_trust: bool = True
    auto_trust: bool = True
    gate_timeout: float = 30.0
    ticket_ttl: float = 30.0
    url: str = ""

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> AgentsConfig:
        """Take the known keys of ``config`` (the validated plugin config)."""
        cfg = dict(config or {})
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in cfg and cfg[f.name] is not None:
                values[f.name] = type(f.default)(cfg[f.name])
        return cls(**values)


def daemon_url(config: AgentsConfig, environ: Mapping[str, str] | None = None) -> str:
    """The daemon URL agents are told (``ELOWEN_URL``)."""
    env = os.environ if environ is None else environ
    if config.url:
        return config.url.rstrip("/")
    if env.get("ELOWEN_URL"):
        return env["ELOWEN_URL"].rstrip("/")
    host = env.get("ELOWEN_HOST") or "127.0.0.1"
    port = env.get("ELOWEN_PORT") or "4400"
    return f"http://{host}:{port}"


def executor_provider(ctx: Any, name: str) -> Any:
    """The provider object of executor ``name`` (``claude``, ``codex``…).

    Raises:
        LookupError: no enabled plugin registered it.
    """
    owned = ctx.contributions("executor").get(name)
    if owned is None:
        raise LookupError(f"no executor {name!r} (is its provider plugin enabled?)")
    return owned.obj.provider


def exec_settings(ctx: Any) -> Mapping[str, Any]:
    """The daemon's ``[execs]`` settings table (``fallback``, ``allowed``, ``plain``)."""
    execs = ctx.settings.get("execs")
    return execs if isinstance(execs, Mapping) else {}

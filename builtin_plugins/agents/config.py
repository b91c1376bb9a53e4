"""The agents plugin's settings (``[plugins.agents.config]``; schema in ``elowen-plugin.toml``).
The ``[execs]`` settings are read by :mod:`.executors` (their one reader)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["AgentsConfig", "daemon_url"]


@dataclass(frozen=True, slots=True)
class AgentsConfig:
    """Intervals are seconds (monotonic clock). The screen settings (sweeps, debounce,
    auto-trust) belong to the ``deriver`` plugin; the keys of the same names still accepted
    here are ignored (so older config files load).

    Attributes:
        scheduler_interval: scheduler tick (also runs at once on ``task.created``).
        liveness_interval: liveness sweep (pane death, idle/stalled).
        stuck_interval: stuck detector.
        janitor_interval: janitor.
        idle_after / stall_after: no screen change for this long → idle / stalled (one
            ``check`` decision per stall episode).
        max_agents: agents running at once.
        max_relaunches: times a task whose agent died is reopened before it is blocked.
        preseed_trust: mark the project folder trusted in the CLI's config before spawning.
        ticket_ttl: seconds a terminal ticket stays valid.
        after_reject: after a rejected prompt, ``"tell"`` the agent the reason (typed into its
            composer) or ``"block"`` the task with it.
        channel_wait: seconds a permission request arriving through a CLI's structured
            channel (:meth:`elowen_sdk.providers.Provider.channel_args`) waits for its verdict
            (an escalation waits for a human) before the CLI's own dialog — the screen path —
            takes over.
        url: ``ELOWEN_URL`` given to agents (``""``: ``$ELOWEN_URL``, else
            ``http://$ELOWEN_HOST:$ELOWEN_PORT``, default ``http://127.0.0.1:4400``).
    """

    scheduler_interval: float = 30.0
    liveness_interval: float = 30.0
    stuck_interval: float = 60.0
    janitor_interval: float = 60.0
    idle_after: float = 60.0
    stall_after: float = 600.0
    max_agents: int = 4
    max_relaunches: int = 2
    preseed_trust: bool = True
    ticket_ttl: float = 30.0
    url: str = ""
    after_reject: str = "tell"
    channel_wait: float = 3600.0

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

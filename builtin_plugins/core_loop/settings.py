"""The core loop's settings: one table, ``[plugins.core-loop.config]`` in ``config.toml``,
validated by the kernel against the manifest's config schema and read here into a frozen
record. Everything is opt-in: with the defaults, ordinary chat is untouched."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_CHAT_PHRASES", "DEFAULT_WORK_PHRASES", "Settings"]

DEFAULT_WORK_PHRASES: tuple[str, ...] = ("treat this as a project", "make this a project", "start a project for this", "plan this as a project")
DEFAULT_CHAT_PHRASES: tuple[str, ...] = ("just a question", "not a project", "don't make a project", "do not make a project", "no project")


def _phrases(value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        return default
    return tuple(p.strip().lower() for p in value if isinstance(p, str) and p.strip())


@dataclass(frozen=True, slots=True)
class Settings:
    """The plugin's settings (see ``elowen-plugin.toml`` for each one's meaning).

    Times are in seconds; ``budget_tokens`` 0 means no ceiling; ``mission_id`` 0 means none.
    """

    intake_enabled: bool = False
    intake_work_phrases: tuple[str, ...] = DEFAULT_WORK_PHRASES
    intake_chat_phrases: tuple[str, ...] = DEFAULT_CHAT_PHRASES
    intake_min_words: int = 6
    planner_model: str = ""
    planner_max_tasks: int = 12
    planner_timeout: float = 120.0
    task_exec: str = ""
    mission_id: int = 0
    plan_approval: bool = False
    executor_enabled: bool = False
    executor_interval: float = 10.0
    executor_max_iterations: int = 20
    executor_max_task_attempts: int = 3
    executor_turn_timeout: float = 1800.0
    executor_stop_on_budget: bool = True
    budget_tokens: int = 2_000_000
    pulse_enabled: bool = True
    pulse_every_n_tasks: int = 3
    receipt_enabled: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        """The settings from a plugin's config view (missing keys take the defaults)."""
        base = cls()
        values: dict[str, Any] = {}
        for name in cls.__slots__:
            if name not in config:
                continue
            value = config[name]
            if name == "intake_work_phrases":
                values[name] = _phrases(value, DEFAULT_WORK_PHRASES)
            elif name == "intake_chat_phrases":
                values[name] = _phrases(value, DEFAULT_CHAT_PHRASES)
            else:
                values[name] = type(getattr(base, name))(value)
        return cls(**values)

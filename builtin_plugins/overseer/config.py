"""The overseer's settings (``[plugins.overseer.config]``; schema in ``elowen-plugin.toml``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["LEVELS", "MOVED_KEYS", "OverseerConfig", "moved_key_warnings", "parse_level"]

LEVELS = (0, 1, 2, 3)
"""Autonomy levels: 0 plans and proposes only; 1–3 dispatch, with decreasing caution."""


def parse_level(value: Any) -> int:
    """``"L2"``, ``"l2"``, ``"2"`` or ``2`` → ``2``.

    Raises:
        ValueError: not one of L0..L3.
    """
    text = str(value).strip().upper()
    if text.startswith("L"):
        text = text[1:]
    if isinstance(value, bool) or not text.isdigit() or int(text) not in LEVELS:
        raise ValueError(f"level must be L0, L1, L2 or L3, got {value!r}")
    return int(text)


MOVED_KEYS: Mapping[str, str] = {
    "model": "[plugins.overseer-relay.config] model",
    "concurrency": "[plugins.overseer-relay.config] concurrency",
    "overseer_exec": "[plugins.overseer-parked.config] overseer_exec",
    "overseer_silence": "[plugins.overseer-parked.config] overseer_silence",
    "max_overseer_restarts": "[plugins.overseer-parked.config] max_overseer_restarts",
    "liveness_interval": "[plugins.overseer-parked.config] liveness_interval",
    "url": "[plugins.agents.config] url (the parked overseer's ELOWEN_URL is the agents' daemon URL)",
}
"""Keys of ``[plugins.overseer.config]`` that moved to the plugin that uses them → where they
live now. They are still accepted (an old ``config.toml`` stays valid) but ignored."""


def moved_key_warnings(settings: Mapping[str, Any]) -> list[str]:
    """One sentence per moved key that ``config.toml`` (``settings``, the whole mapping) still
    sets in ``[plugins.overseer.config]``."""
    raw = ((settings.get("plugins") or {}).get("overseer") or {}).get("config") or {}
    return [f"[plugins.overseer.config] {key} is ignored: it moved to {where}" for key, where in MOVED_KEYS.items() if key in raw]


@dataclass(frozen=True, slots=True)
class OverseerConfig:
    """See the manifest for each key. Intervals in seconds (monotonic clock); thresholds 0..1."""

    threshold_l1: float = 0.85
    threshold_l2: float = 0.6
    threshold_l3: float = 0.6
    default_level: str = ""
    max_review_rejections: int = 2
    reviews: bool = True
    sweep_interval: float = 30.0

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> OverseerConfig:
        """Take the known keys of ``config`` (the validated plugin config)."""
        cfg = dict(config or {})
        values: dict[str, Any] = {}
        for f in fields(cls):
            if cfg.get(f.name) is not None:
                values[f.name] = type(f.default)(cfg[f.name])
        return cls(**values)

    def threshold(self, level: int) -> float | None:
        """The confidence an approval needs at ``level`` (``None`` at L0: nothing is approved)."""
        return {1: self.threshold_l1, 2: self.threshold_l2, 3: self.threshold_l3}.get(level)

    @property
    def fallback_level(self) -> int | None:
        """The level of tasks in no mission, or ``None`` (left to a human)."""
        return parse_level(self.default_level) if self.default_level else None

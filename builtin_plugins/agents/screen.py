"""The builtin CLIs' screen patterns by CLI name, over the SDK's classifier.

The classifier itself is :mod:`elowen_sdk.screen` (each provider loads its own package's
``patterns.toml`` there). This module keeps the lookup by CLI name for the four builtin
providers, which ``elowen agents classify`` and the tests use.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from elowen_sdk.screen import ANSWERABLE_STATES, STATES, Classification, PatternError, PatternSet, strip_ansi, struck_text
from elowen_sdk.screen import load_patterns as load_package_patterns

__all__ = [
    "ANSWERABLE_STATES",
    "CLI_PACKAGES",
    "STATES",
    "Classification",
    "PatternError",
    "PatternSet",
    "classify",
    "detect_version",
    "known_clis",
    "load_patterns",
    "strip_ansi",
    "struck_text",
]

CLI_PACKAGES: Mapping[str, str] = MappingProxyType(
    {
        "claude": "elowen_builtins.claude_code",
        "codex": "elowen_builtins.codex",
        "opencode": "elowen_builtins.opencode",
        "kilo": "elowen_builtins.kilo",
    }
)
"""Builtin CLI name → the package whose ``patterns.toml`` describes its screens."""


def known_clis() -> tuple[str, ...]:
    """The builtin CLI names (``claude``, ``codex``, ``opencode``, ``kilo``)."""
    return tuple(CLI_PACKAGES)


def load_patterns(cli: str, version: str | None = None) -> PatternSet:
    """The compiled patterns of builtin CLI ``cli`` for ``version`` (cached).

    Raises:
        KeyError: unknown CLI. PatternError: the shipped ``patterns.toml`` is malformed.
    """
    package = CLI_PACKAGES.get(cli)
    if package is None:
        raise KeyError(f"no screen patterns for CLI {cli!r}; known: {', '.join(CLI_PACKAGES)}")
    return load_package_patterns(package, version)


def classify(cli: str, screen: str, *, version: str | None = None, escapes: str | None = None) -> Classification:
    """Classify a captured screen of builtin CLI ``cli`` (see :meth:`PatternSet.classify`).

    Raises:
        KeyError: unknown CLI.
    """
    return load_patterns(cli, version).classify(screen, escapes=escapes)


def detect_version(cli: str, screen: str) -> str | None:
    """The version ``cli`` prints on its screen, or ``None`` when not visible."""
    return load_patterns(cli).detect_version(screen)

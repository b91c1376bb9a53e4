"""Exceptions a plugin author may see or raise. One hierarchy, rooted at :class:`ElowenError`."""

from __future__ import annotations


class ElowenError(Exception):
    """Base of every Elowen error."""


class ManifestError(ElowenError):
    """An ``elowen-plugin.toml`` is missing, unreadable, or does not match the schema."""


class CapabilityError(ElowenError):
    """A plugin used a kernel API that needs a capability its manifest did not declare
    (or the user did not grant)."""

    def __init__(self, plugin: str, capability: str, action: str = "") -> None:
        self.plugin = plugin
        self.capability = capability
        what = f" to {action}" if action else ""
        super().__init__(f"plugin {plugin!r} needs capability {capability!r}{what}; declare it in elowen-plugin.toml and grant it")


class PathGuardError(ElowenError, PermissionError):
    """A path was refused by a plugin's path guard (outside its roots, ``..`` escape,
    symlink escape, NUL byte, or not writable under the granted capabilities)."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"path refused: {path!r}: {reason}")


class ConfigError(ElowenError, ValueError):
    """A plugin config value or a settings file failed validation."""

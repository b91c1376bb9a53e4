"""The plugin registry: discovery (:mod:`.discovery`), dependency order (:mod:`.ordering`) and
the reconciler task (:mod:`.reconciler`). This module re-exports their public names, so
``from elowen.core.registry import Registry, PluginSource`` keeps working."""

from __future__ import annotations

from .discovery import (
    BUILTIN_DISTRIBUTION,
    ENTRY_POINT_GROUP,
    STATES,
    Catalog,
    PluginNotFound,
    PluginNotInstalled,
    PluginRecord,
    PluginSource,
    entry_point_sources,
    find_manifest,
)
from .ordering import HOST_SERVICES, Plan, plan
from .reconciler import DRAIN_TIMEOUT, ON_LOAD_TIMEOUT, PluginHasDependents, Registry

__all__ = [
    "BUILTIN_DISTRIBUTION",
    "Catalog",
    "DRAIN_TIMEOUT",
    "ENTRY_POINT_GROUP",
    "HOST_SERVICES",
    "ON_LOAD_TIMEOUT",
    "Plan",
    "PluginHasDependents",
    "PluginNotFound",
    "PluginNotInstalled",
    "PluginRecord",
    "PluginSource",
    "Registry",
    "STATES",
    "entry_point_sources",
    "find_manifest",
    "plan",
]

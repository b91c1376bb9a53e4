"""The pluggy markers of the Elowen plugin API (project name ``"elowen"``)."""

from __future__ import annotations

import pluggy

PROJECT_NAME = "elowen"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification. Used by Elowen's own :mod:`elowen_sdk.hookspecs`."""

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a hook implementation in a plugin module::

    from elowen_sdk import hookimpl

    @hookimpl
    def register_tools(ctx, register):
        register(Tool(...))
"""

"""A provider plugin that ships no ``patterns.toml`` (its ``patterns_package`` has none): the
kernel refuses its executor at registration and the plugin goes to ``error`` saying why."""

from __future__ import annotations

from typing import Any

from elowen_sdk import Executor, hookimpl

from .plugin import MyCliProvider

__all__ = ["ZedProvider", "register_executors"]


class ZedProvider(MyCliProvider):
    """Executor ``zed``, without screen patterns."""

    name = "zed"
    cli = "zed"
    aliases = {}
    patterns_package = "tests.agents.sample_provider"  # no patterns.toml there


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    register(Executor("zed", ZedProvider(ctx.config, plugin=ctx.name)))

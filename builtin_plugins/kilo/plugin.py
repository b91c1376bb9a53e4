"""Kilo Code provider (npm ``@kilocode/cli``, verified with 7.7.7; 7.8.1 does not install).

Kilo 7 is an OpenCode fork: ``kilo [-s ses_…] [--model provider/model] [extra args]
--prompt=PROMPT``; sessions in ``$XDG_DATA_HOME/kilo/kilo.db``; no trust dialog.

**skip_permissions is a no-op for Kilo**: Elowen knows no flag or variable that makes Kilo 7
skip its permission prompts, so the setting is accepted and ignored (a warning is logged).
Exit with ``/exit`` (Ctrl-C does not quit it).
Elowen's MCP server (``/mcp``) is configured through ``KILO_CONFIG_CONTENT`` (an inline config
merged over the config files) with the token as ``{env:ELOWEN_TOKEN}``; the model sees its
tools as ``elowen_close`` etc.
"""

from __future__ import annotations

from typing import Any

from elowen_sdk import Executor, hookimpl
from elowen_sdk.providers import OpenCodeFamilyProvider

__all__ = ["KiloProvider", "register_executors"]


class KiloProvider(OpenCodeFamilyProvider):
    """Executor ``kilo``."""

    name = "kilo"
    display_name = "Kilo Code"
    cli = "kilo"
    default_binary = "kilo"
    data_dir = "kilo"
    permission_env = ""  # none: skip_permissions is a no-op
    config_content_env = "KILO_CONFIG_CONTENT"
    base_env = {
        "KILO_NO_DAEMON": "1",
        "KILO_DISABLE_AUTOUPDATE": "1",
        "KILO_DISABLE_MODELS_FETCH": "1",
        "KILO_DISABLE_LSP_DOWNLOAD": "1",
        "KILO_DISABLE_SHARE": "1",
        "KILO_DISABLE_DEFAULT_PLUGINS": "1",
        "KILO_TELEMETRY_LEVEL": "off",
    }


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    """Register executor ``kilo`` configured from the plugin's settings."""
    register(Executor("kilo", KiloProvider(ctx.config, plugin=ctx.name)))

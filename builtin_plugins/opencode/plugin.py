"""OpenCode provider (npm ``opencode-ai``, verified with 1.18.33).

Command line: ``opencode [-s ses_…] [--model provider/model] [extra args] --prompt=PROMPT``.
OpenCode picks its own session id (``ses_…``), stored in
``$XDG_DATA_HOME/opencode/opencode.db`` (table ``session``). No trust dialog.
Skip-permissions is applied through the environment: ``OPENCODE_PERMISSION={"*":"allow"}``
(see :meth:`env_for`). Prompts longer than ~2 KB are put into the composer but not submitted
by ``--prompt`` (reported for 1.18.23): the caller must press Enter then.
Elowen's MCP server (``/mcp``) is configured through ``OPENCODE_CONFIG_CONTENT`` (an inline config
merged over the config files) with the token as ``{env:ELOWEN_TOKEN}``; the model sees its
tools as ``elowen_close`` etc.
"""

from __future__ import annotations

from typing import Any

from elowen_sdk import Executor, hookimpl
from elowen_sdk.providers import OpenCodeFamilyProvider

__all__ = ["OpenCodeProvider", "register_executors"]


class OpenCodeProvider(OpenCodeFamilyProvider):
    """Executor ``opencode``; a bare ``<provider>/<model>`` spec means OpenCode."""

    name = "opencode"
    display_name = "OpenCode"
    slash_models = True
    cli = "opencode"
    default_binary = "opencode"
    data_dir = "opencode"
    permission_env = "OPENCODE_PERMISSION"
    config_content_env = "OPENCODE_CONFIG_CONTENT"
    base_env = {
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    }


@hookimpl
def register_executors(ctx: Any, register: Any) -> None:
    """Register executor ``opencode`` configured from the plugin's settings."""
    register(Executor("opencode", OpenCodeProvider(ctx.config, plugin=ctx.name)))

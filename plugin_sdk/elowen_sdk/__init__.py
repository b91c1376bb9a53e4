"""elowen-sdk: everything a third-party Elowen plugin depends on.

Plugin API version: ``"1"`` (``api = "1"`` in ``elowen-plugin.toml``). Within API 1 hooks and
types only gain optional arguments and fields; a breaking change bumps the API version.

Beside the names below: :mod:`elowen_sdk.services` (the typed service contracts, e.g.
``ctx.service(TmuxService)``), :mod:`elowen_sdk.chat` (the inference chat types) and
:mod:`elowen_sdk.errors` (every exception, the builtin services' included).
"""

from ._markers import hookimpl, hookspec
from .context import PathGuard, PluginContext
from .errors import CapabilityError, ConfigError, ElowenError, ManifestError, PathGuardError, ServiceUnavailable
from .hookspecs import API_VERSION, HOOK_KINDS, MUTATING_TARGETS
from .manifest import MANIFEST_NAME, ConfigField, Manifest, load_manifest, parse_capability, parse_manifest
from .store import Store, utc_iso
from .types import (
    Command,
    Event,
    Executor,
    HTTPError,
    Loop,
    Patch,
    Platform,
    Principal,
    PromptFragment,
    Request,
    Response,
    Route,
    Service,
    Skill,
    Tool,
    ToolCall,
    TurnContext,
    WebSocketRoute,
    apply_patch,
)

__version__ = "0.1.0"

__all__ = [
    "API_VERSION",
    "CapabilityError",
    "Command",
    "ConfigError",
    "ConfigField",
    "ElowenError",
    "Event",
    "Executor",
    "HOOK_KINDS",
    "HTTPError",
    "Loop",
    "MANIFEST_NAME",
    "MUTATING_TARGETS",
    "Manifest",
    "ManifestError",
    "Patch",
    "PathGuard",
    "PathGuardError",
    "Platform",
    "PluginContext",
    "Principal",
    "PromptFragment",
    "Request",
    "Response",
    "Route",
    "Service",
    "ServiceUnavailable",
    "Skill",
    "Store",
    "Tool",
    "ToolCall",
    "TurnContext",
    "WebSocketRoute",
    "apply_patch",
    "hookimpl",
    "hookspec",
    "load_manifest",
    "parse_capability",
    "parse_manifest",
    "utc_iso",
]

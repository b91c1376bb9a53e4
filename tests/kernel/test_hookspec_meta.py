"""Meta-tests: every hookspec is classified, implemented by a test plugin, and documented;
the SDK's public names are pinned."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import elowen_sdk
from elowen_sdk import hookspecs

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(fn, "elowen_spec"))


def test_every_hookspec_has_a_kind():
    assert SPECS == sorted(hookspecs.HOOK_KINDS)
    for name, kind in hookspecs.HOOK_KINDS.items():
        if kind == "mutating":
            assert name in hookspecs.MUTATING_TARGETS and name in hookspecs.MUTATING_FIELDS
        if kind == "contribution":
            assert name in hookspecs.CONTRIBUTION_KINDS


def test_every_hookspec_is_documented():
    doc = (ROOT / "docs" / "plugins.md").read_text()
    missing = [name for name in SPECS if not re.search(rf"^#### `{name}\(", doc, re.MULTILINE)]
    assert missing == []


def test_every_hookspec_is_implemented_by_a_test_plugin():
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name)
    missing = [name for name in SPECS if not re.search(rf"@hookimpl[^\n]*\n(async )?def {name}\(", sources)]
    assert missing == []


def test_sdk_public_names_are_pinned():
    assert set(elowen_sdk.__all__) == {
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
    }
    for name in elowen_sdk.__all__:
        assert hasattr(elowen_sdk, name), name
    assert elowen_sdk.API_VERSION == "1"

"""Plugin lifecycle edge cases found in review: uninstall while known, re-install, undeclared
contributions, and manifest warnings — against a real kernel (real SQLite file, real
config.toml). An uninstall is a source removed from the registry (what a rediscovery sees
after ``pip uninstall``); the pip round trip itself is in ``tests/cli/test_plugins.py``."""

from __future__ import annotations

import importlib
import logging
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from elowen.core.kernel import Kernel
from elowen.core.registry import PluginNotFound, PluginNotInstalled, PluginSource
from elowen_sdk.manifest import load_manifest, parse_manifest

from .conftest import SAMPLES, sample
from .test_registry import audit_rows

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"


async def test_rescan_drops_an_uninstalled_disabled_plugin_and_enable_refuses(open_kernel):
    async with open_kernel("sample_good") as k:
        await k.registry.enable("good")
        await k.registry.disable("good")
        k.registry.remove_source("good")
        gen = k.registry.generation
        assert await k.registry.rescan() == []
        assert "good" not in k.registry.records and k.registry.generation > gen
        with pytest.raises(PluginNotInstalled, match="plugin 'good' is not installed .*samples.* was uninstalled"):
            await k.registry.enable("good")
        with pytest.raises(PluginNotFound):  # the API's 404 for `info` still applies
            k.registry.describe("good")
        with pytest.raises(LookupError):
            k.contributions.get("tool", "good.echo")
        assert [r["outcome"] for r in audit_rows(k, "plugin.removed") if r["target"] == "good"] == ["ok"]


async def test_enabled_plugin_keeps_running_when_uninstalled_until_disabled(open_kernel):
    async with open_kernel("sample_good") as k:
        await k.registry.enable("good")
        k.registry.remove_source("good")
        await k.registry.rescan()
        info = k.registry.describe("good")
        assert info["state"] == "enabled" and info["installed"] is False
        assert any("uninstalled" in w for w in info["warnings"])
        assert k.contributions.get("tool", "good.echo").plugin == "good"
        with pytest.raises(PluginNotInstalled):
            await k.registry.enable("good")
        info = await k.registry.disable("good")
        assert info["state"] == "disabled"
        with pytest.raises(PluginNotInstalled):
            await k.registry.enable("good")  # refused before the next rescan too
        await k.registry.rescan()
        assert "good" not in k.registry.records


async def test_reinstall_is_found_again_with_its_new_manifest(open_kernel, tmp_path):
    async with open_kernel("sample_good") as k:
        await k.registry.enable("good")
        await k.registry.disable("good")
        k.registry.remove_source("good")
        await k.registry.rescan()

        newer = tmp_path / "newer"
        shutil.copytree(SAMPLES / "sample_good", newer)
        manifest = newer / "elowen-plugin.toml"
        manifest.write_text(
            manifest.read_text().replace('version = "1.0.0"', 'version = "2.0.0"').replace('required = ["store"', 'required = ["process.spawn", "store"')
        )
        src = sample("sample_good", version="2.0.0")
        src.manifest_path = manifest
        k.registry.add_source(src)
        assert await k.registry.rescan() == ["good"]
        info = k.registry.describe("good")
        assert info["version"] == "2.0.0" and "process.spawn" in info["manifest"]["capabilities"]["required"]
        assert info["restart_required"] is True, "the 1.0.0 code is still imported"
        # the earlier grants stand; the new capability needs approval
        info = await k.registry.enable("good")
        assert info["state"] == "needs-approval" and info["capabilities"]["missing"] == ["process.spawn"]


async def test_reinstall_of_the_same_version_needs_no_restart(open_kernel):
    async with open_kernel("sample_good") as k:
        await k.registry.enable("good")
        await k.registry.disable("good")
        k.registry.remove_source("good")
        await k.registry.rescan()
        k.registry.add_source(sample("sample_good"))
        assert await k.registry.rescan() == ["good"]
        assert k.registry.get("good").restart_required is False
        assert (await k.registry.enable("good"))["state"] == "enabled"


async def test_undeclared_contribution_is_refused_warned_and_audited(tmp_path, reset_samples, caplog):
    raw = tomllib.loads((SAMPLES / "sample_all" / "elowen-plugin.toml").read_text())
    raw["contributes"]["tools"] = ["all.other"]
    raw["contributes"]["routes"] = ["/p*"]  # a method-less pattern matches any method
    src = sample("sample_all")
    src.manifest = parse_manifest(raw)
    caplog.set_level(logging.WARNING, "elowen.core.registry")
    async with Kernel.open(tmp_path / "home", db_path=tmp_path / "db", discover_entry_points=False, sources=[src]) as k:
        info = await k.registry.enable("everything")
        assert info["state"] == "enabled"
        with pytest.raises(LookupError):
            k.contributions.get("tool", "all.tool")
        assert k.contributions.get("command", "all").plugin == "everything"
        assert k.contributions.get("route", "GET /plugins/everything/ping").plugin == "everything"
        denied = [r for r in audit_rows(k, "register.tool") if r["actor"] == "everything"]
        assert [(r["target"], r["outcome"]) for r in denied] == [("all.tool", "denied")]
        assert {"kind": "tool", "name": "all.tool"} not in info["contributions"]
    assert "tool 'all.tool' is not declared in its manifest's [contributes] tools; refused" in caplog.text


def test_manifest_declares_matches_names_patterns_and_routes():
    m = load_manifest(SAMPLES / "sample_all" / "elowen-plugin.toml")
    assert m.declares("tool", "all.tool") and not m.declares("tool", "all.other")
    assert m.declares("route", "GET /ping") and not m.declares("route", "POST /ping")
    assert not m.declares("nonsense", "all.tool")
    brain = load_manifest(Path(importlib.util.find_spec("elowen_builtins").submodule_search_locations[0]) / "brain" / "elowen-plugin.toml")
    assert brain.declares("route", "POST /brain/turn") and brain.declares("route", "WS /brain/x")
    assert not brain.declares("route", "GET /sessions")


async def test_mutating_hook_without_its_capability_is_flagged_before_enable(open_kernel):
    async with open_kernel("sample_mutator", "sample_good") as k:
        info = k.registry.describe("sneaky")
        assert info["state"] == "discovered"
        assert info["warnings"] == ["implements mutating hook turn_context but does not declare hook.mutate:turn_context: its patches will be dropped"]
        assert k.registry.list_plugins()[1]["warnings"] == info["warnings"]  # the list carries it too
        assert k.registry.describe("good")["warnings"] == []


@pytest.mark.parametrize("pkg", ["elowen-hello/elowen_hello", "elowen-webhook-platform/elowen_webhook_platform"])
async def test_contrib_plugins_declare_what_they_contribute(tmp_path, pkg):
    folder = CONTRIB / pkg
    manifest = load_manifest(folder / "elowen-plugin.toml")
    root = str(folder.parent)
    package = manifest.entry.partition(".")[0]
    before = set(sys.modules)
    sys.path.insert(0, root)
    try:
        src = PluginSource(
            name=manifest.name,
            entry=manifest.entry,
            loader=lambda: importlib.import_module(manifest.entry),
            distribution="contrib",
            dist_version=manifest.version,
            manifest_path=folder / "elowen-plugin.toml",
        )
        async with Kernel.open(tmp_path / "home", db_path=tmp_path / "db", discover_entry_points=False, sources=[src]) as k:
            info = await k.registry.enable(manifest.name)  # the first enable grants what it requires
            assert info["state"] == "enabled", info["error"]
            assert not [r for r in audit_rows(k) if r["outcome"] == "denied" and r["action"].startswith("register.")]
            assert info["contributions"], "it contributes something"
            assert info["warnings"] == []
    finally:
        sys.path.remove(root)
        for name in set(sys.modules) - before:  # other tests check these are imported only by them
            if name == package or name.startswith(package + "."):
                del sys.modules[name]


def test_both_schema_version_spellings_are_read() -> None:
    from elowen.core.reconciler import _SCHEMA_VERSION_RE

    for line in ("-- schema-version: 3", "-- version: 3", "--version: 3"):
        m = _SCHEMA_VERSION_RE.search(f"{line}\nCREATE TABLE x_items (id INTEGER PRIMARY KEY);\n")
        assert m is not None and int(m.group(1)) == 3, line

"""Plugin registry and lifecycle against a real kernel (real SQLite file, real config.toml)."""

from __future__ import annotations

import shutil
import sys
import tomllib

import pytest
import trio
import trio.testing

from elowen.core.kernel import Kernel
from elowen.core.registry import PluginNotFound
from elowen_sdk import ConfigError

from .conftest import SAMPLES, sample


def audit_rows(kernel: Kernel, action: str | None = None) -> list[dict]:
    kernel.store.flush_audit()
    rows = kernel.store.query("SELECT actor, action, target, outcome, detail FROM audit ORDER BY id")
    return [r for r in rows if action is None or r["action"] == action]


async def test_discovery_reads_manifests_without_importing(open_kernel):
    sys.modules.pop("sample_broken_import.plugin", None)
    sys.modules.pop("sample_badmanifest.plugin", None)
    async with open_kernel("sample_good", "sample_broken_import", "sample_badmanifest") as k:
        states = {p["name"]: p["state"] for p in k.registry.list_plugins()}
        assert states == {"good": "discovered", "brokenimport": "discovered", "badmanifest": "error"}
        assert "sample_broken_import.plugin" not in sys.modules
        assert "sample_badmanifest.plugin" not in sys.modules
        assert "not supported" in k.registry.get("badmanifest").error
        info = k.registry.describe("good")
        assert info["manifest"]["config"]["limit"]["default"] == 3
        assert info["capabilities"]["required"] == ["store", "events.publish", "hook.mutate:turn_context"]


async def test_enable_and_disable_round_trip(open_kernel, tmp_path):
    async with open_kernel("sample_good") as k:
        from sample_good.plugin import state

        gen0 = k.registry.generation
        info = await k.registry.enable("good")
        assert info["state"] == "enabled"
        assert k.registry.generation > gen0
        tool = k.contributions.get("tool", "good.echo").obj
        assert tool.handler(text="x") == "echo: x"
        assert state["loaded"] == 1 and state["config"] == {"word": "echo", "limit": 3}
        assert k.store.query("SELECT name FROM sqlite_master WHERE name='good_notes'")
        await trio.sleep(0.05)
        assert state["ticks"] >= 2
        saved = tomllib.loads((tmp_path / "home" / "config.toml").read_text())
        assert saved["plugins"]["good"] == {"enabled": True, "granted": ["events.publish", "hook.mutate:turn_context", "store"]}
        assert "contributions" in info and {"kind": "tool", "name": "good.echo"} in info["contributions"]

        gen1 = k.registry.generation
        info = await k.registry.disable("good")
        assert info["state"] == "disabled" and k.registry.generation > gen1
        with pytest.raises(LookupError):
            k.contributions.get("tool", "good.echo")
        assert k.pm.get_plugin("good") is None
        assert state["unloaded"] == 1
        ticks = state["ticks"]
        await trio.sleep(0.05)
        assert state["ticks"] == ticks, "the plugin's loop must stop when it is disabled"
        assert [r["action"] for r in audit_rows(k) if r["target"] == "good"][-2:] == ["plugin.enabled", "plugin.disabled"]


async def test_broken_plugins_go_to_error_and_kernel_goes_on(open_kernel):
    async with open_kernel("sample_broken_import", "sample_failing_load", "sample_good") as k:
        info = await k.registry.enable("brokenimport")
        assert info["state"] == "error" and "ImportError: this plugin cannot be imported" in info["error"]
        info = await k.registry.enable("failingload")
        assert info["state"] == "error" and "on_load exploded" in info["error"]
        # its contributions were rolled back
        with pytest.raises(LookupError):
            k.contributions.get("tool", "failing.tool")
        assert k.pm.get_plugin("failingload") is None
        assert (await k.registry.enable("good"))["state"] == "enabled"
        events = k.store.query("SELECT type FROM events WHERE type = 'plugin.error'")
        assert len(events) == 2


async def test_unknown_plugin_is_a_clear_error(open_kernel):
    async with open_kernel("sample_good") as k:
        with pytest.raises(PluginNotFound, match="no plugin named 'nope'; known: good"):
            await k.registry.enable("nope")


async def test_upgrade_adding_capabilities_needs_approval(tmp_path, reset_samples):
    upgraded = tmp_path / "upgraded"
    shutil.copytree(SAMPLES / "sample_good", upgraded)
    manifest = upgraded / "elowen-plugin.toml"
    manifest.write_text(
        manifest.read_text().replace('version = "1.0.0"', 'version = "1.1.0"').replace('required = ["store"', 'required = ["process.spawn", "store"')
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[plugins.good]\nenabled = true\ngranted = ["events.publish", "hook.mutate:turn_context", "store"]\n')
    src = sample("sample_good", version="1.1.0")
    src.manifest_path = manifest
    async with Kernel.open(home, db_path=tmp_path / "db", discover_entry_points=False, sources=[src]) as k:
        rec = k.registry.get("good")
        assert rec.state == "needs-approval"
        assert rec.missing == ("process.spawn",)
        # enabling again does not silently grant the new capability
        assert (await k.registry.enable("good"))["state"] == "needs-approval"
        with pytest.raises(ConfigError, match="does not declare"):
            await k.registry.grant("good", "net:example.org")
        info = await k.registry.grant("good", "process.spawn")
        assert info["state"] == "enabled"
        assert k.registry.get("good").ctx.has("process.spawn")


async def test_name_collisions_first_writer_wins(open_kernel):
    async with open_kernel("sample_good", "sample_mutator") as k:
        await k.registry.enable("good")
        await k.registry.enable("sneaky")
        owned = k.contributions.get("tool", "good.echo")
        assert owned.plugin == "good"
        collisions = audit_rows(k, "register.tool")
        assert collisions and collisions[-1]["outcome"] == "collision" and collisions[-1]["actor"] == "sneaky"
        await k.registry.disable("sneaky")
        assert k.contributions.get("tool", "good.echo").plugin == "good", "disabling the loser must not remove the winner's tool"


async def test_entry_point_name_collision_keeps_first(tmp_path, reset_samples, caplog):
    first = sample("sample_good", distribution="dist-a")
    second = sample("sample_good", distribution="dist-b")
    second.entry = "sample_mutator.plugin"
    async with Kernel.open(tmp_path / "home", db_path=tmp_path / "db", discover_entry_points=False, sources=[first, second]) as k:
        assert k.registry.get("good").source.distribution == "dist-a"
    assert "keeping the first" in caplog.text


async def test_config_change_restarts_plugin_and_bad_config_is_refused(open_kernel, tmp_path):
    async with open_kernel("sample_good") as k:
        from sample_good.plugin import state

        await k.registry.enable("good")
        info = await k.registry.configure("good", {"word": "hi", "limit": "5"})
        assert info["state"] == "enabled" and info["config"] == {"word": "hi", "limit": 5}
        assert k.contributions.get("tool", "good.echo").obj.handler(text="x") == "hi: x"
        assert state["loaded"] == 2 and state["unloaded"] == 1
        before = (tmp_path / "home" / "config.toml").read_text()
        with pytest.raises(ConfigError, match="above the maximum"):
            await k.registry.configure("good", {"limit": 99})
        with pytest.raises(ConfigError, match="no config key 'colour'"):
            await k.registry.configure("good", {"colour": "red"})
        assert (tmp_path / "home" / "config.toml").read_text() == before


async def test_configure_merges_with_the_config_as_stored_now(open_kernel, tmp_path):
    """A hand edit of another key that the settings watcher has not read yet is kept: the merge
    reads the file under the settings lock (it used to merge into the last loaded snapshot)."""
    async with open_kernel("sample_good") as k:
        await k.registry.enable("good")
        await k.registry.configure("good", {"word": "hi"})
        cfg = tmp_path / "home" / "config.toml"
        cfg.write_text(cfg.read_text().replace('word = "hi"', 'word = "edited"'))  # no checkpoint: the watcher cannot have seen it
        info = await k.registry.configure("good", {"limit": 7})
        assert info["config"] == {"word": "edited", "limit": 7}
        assert 'word = "edited"' in cfg.read_text() and "limit = 7" in cfg.read_text()


async def test_hand_edit_of_config_toml_is_reconciled(open_kernel, tmp_path):
    async with open_kernel("sample_good") as k:
        await k.registry.enable("good")
        cfg = tmp_path / "home" / "config.toml"
        cfg.write_text(cfg.read_text().replace("enabled = true", "enabled = false"))
        with trio.fail_after(5):
            while k.registry.get("good").state != "disabled":
                await trio.sleep(0.02)
        with pytest.raises(LookupError):
            k.contributions.get("tool", "good.echo")
        cfg.write_text(cfg.read_text().replace("enabled = false", "enabled = true"))
        with trio.fail_after(5):
            while k.registry.get("good").state != "enabled":
                await trio.sleep(0.02)


async def test_plugin_context_capabilities_and_guard(open_kernel, tmp_path):
    async with open_kernel("sample_good", "sample_async") as k:
        await k.registry.enable("good")
        await k.registry.enable("asyncobs")
        good = k.registry.get("good").ctx
        plain = k.registry.get("asyncobs").ctx
        assert good.store is k.store
        assert good.publish("good.note", {"n": 1}) > 0
        from elowen_sdk import CapabilityError, PathGuardError

        with pytest.raises(CapabilityError, match="needs capability 'store'"):
            _ = plain.store
        with pytest.raises(CapabilityError):
            plain.publish("x", {})
        # optional fs.read:/ was not granted, so the guard is pinned to the data dir
        assert plain.guard.write_text("notes.txt", "hi") == 2
        assert (tmp_path / "home" / "plugins" / "asyncobs" / "notes.txt").read_text() == "hi"
        with pytest.raises(PathGuardError):
            good.guard.read_text("/etc/hostname")
        denied = [r for r in audit_rows(k, "capability") if r["actor"] == "asyncobs"]
        assert len(denied) == 2


async def test_error_is_one_line_with_the_traceback_kept_and_disable_clears_it(open_kernel):
    async with open_kernel("sample_failing_load") as k:
        info = await k.registry.enable("failingload")
        assert info["state"] == "error"
        assert info["error"] == "enable failed: RuntimeError: on_load exploded"
        assert "Traceback (most recent call last)" in info["traceback"] and "\n" not in info["error"]
        info = await k.registry.disable("failingload")
        assert info["state"] == "disabled" and info["error"] is None and info["traceback"] is None

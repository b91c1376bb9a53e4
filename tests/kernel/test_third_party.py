"""A third-party plugin from its own distribution: build the wheel of contrib/elowen-hello,
pip-install it into this environment, and enable it in a running kernel without a restart.
Also: every builtin plugin shipped by the ``elowen`` distribution enables cleanly."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

from elowen.core.kernel import Kernel
from elowen_sdk import TurnContext
from elowen_sdk.testing import call, plugin_kernel

from .test_registry import audit_rows

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "contrib" / "elowen-hello"


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def hello_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    proc = pip("wheel", "--no-deps", "--quiet", "-w", str(out), str(HELLO))
    assert proc.returncode == 0, proc.stderr
    wheels = list(out.glob("elowen_hello-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


@pytest.fixture
def installed_hello(hello_wheel: Path):
    proc = pip("install", "--no-deps", "--quiet", "--force-reinstall", str(hello_wheel))
    assert proc.returncode == 0, proc.stderr
    yield hello_wheel
    pip("uninstall", "--yes", "--quiet", "elowen-hello")
    for name in [m for m in sys.modules if m.startswith("elowen_hello")]:
        del sys.modules[name]


def tmux_config(tmp: Path) -> str:
    socket = f"elowen-test-{uuid.uuid4().hex[:8]}"
    return f'[plugins.tmux.config]\nsocket = "{socket}"\n', socket


async def test_hello_wheel_installs_and_enables_without_restart(tmp_path, hello_wheel):
    home = tmp_path / "home"
    home.mkdir()
    cfg, socket = tmux_config(tmp_path)
    (home / "config.toml").write_text(cfg)
    try:
        async with Kernel.open(home, db_path=tmp_path / "db") as k:
            assert "hello" not in k.registry.records
            proc = await trio.to_thread.run_sync(lambda: pip("install", "--no-deps", "--quiet", "--force-reinstall", str(hello_wheel)))
            assert proc.returncode == 0, proc.stderr
            new = await k.registry.rescan()
            assert new == ["hello"]
            rec = k.registry.get("hello")
            assert rec.state == "discovered" and rec.source.distribution == "elowen-hello"
            assert "elowen_hello.plugin" not in sys.modules, "discovery must not import the plugin"
            info = await k.registry.enable("hello")
            assert info["state"] == "enabled", info["error"]
            greet = k.contributions.get("tool", "hello.greet").obj
            assert await call(greet, name="Ada") == "Hello, Ada!"
            assert await call(k.contributions.get("command", "hello").obj) == "Hello from a plugin!"
            turn = await k.bus.mutate("turn_context", turn=TurnContext("c1", "ada", "hi"))
            assert turn.context == ("(The hello plugin says: greet ada warmly.)",)
            from elowen_hello.plugin import seen_events

            k.events.publish("test.after_enable", {})
            with trio.fail_after(5):  # a third party's sync hook runs in a worker thread
                while "test.after_enable" not in seen_events:
                    await trio.sleep(0.01)
            await k.registry.configure("hello", {"greeting": "Hi"})
            assert await call(k.contributions.get("tool", "hello.greet").obj, name="Bo") == "Hi, Bo!"
            await k.registry.disable("hello")
            with pytest.raises(LookupError):
                k.contributions.get("tool", "hello.greet")
    finally:
        pip("uninstall", "--yes", "--quiet", "elowen-hello")
        for name in [m for m in sys.modules if m.startswith("elowen_hello")]:
            del sys.modules[name]
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


async def test_sdk_harness_with_installed_plugin(tmp_path, installed_hello):
    async with plugin_kernel(tmp_path, enable=["hello"], config={"hello": {"greeting": "Hey"}}) as k:
        enabled = [p["name"] for p in k.registry.list_plugins() if p["state"] == "enabled"]
        assert enabled == ["hello"], "the harness enables only the plugins asked for"
        assert await call(k.contributions.get("tool", "hello.greet").obj, name="Cy") == "Hey, Cy!"


async def test_hello_without_its_capability_is_denied_and_audited(tmp_path, installed_hello):
    home = tmp_path / "home"
    home.mkdir()
    # an upgrade that needs a capability the user never granted: simulate with a config whose
    # grant list lacks it; the plugin must wait in needs-approval, not run with its patch
    (home / "config.toml").write_text("[plugins.hello]\nenabled = true\ngranted = []\n[plugins.tmux]\nenabled = false\n")
    async with Kernel.open(home, db_path=tmp_path / "db") as k:
        rec = k.registry.get("hello")
        assert rec.state == "needs-approval" and rec.missing == ("hook.mutate:turn_context",)
        info = await k.registry.grant("hello", "hook.mutate:turn_context")
        assert info["state"] == "enabled"
        assert [r["outcome"] for r in audit_rows(k, "plugin.grant")] == ["ok"]


async def test_every_builtin_plugin_enables(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    cfg, socket = tmux_config(tmp_path)
    (home / "config.toml").write_text(cfg)
    try:
        async with Kernel.open(home, db_path=tmp_path / "db") as k:
            builtins = [p for p in k.registry.list_plugins() if p["builtin"]]
            assert {p["name"] for p in builtins} >= {"tmux", "claude-code", "codex", "opencode", "kilo"}
            bad = {p["name"]: p["error"] for p in builtins if p["state"] != "enabled"}
            assert bad == {}
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)

"""The plugin glue: manifest, and the service running inside a real kernel."""

from __future__ import annotations

from pathlib import Path

import trio

from elowen_builtins.tmux import TmuxService, plugin
from elowen_sdk import load_manifest
from elowen_sdk.testing import plugin_kernel

from .conftest import tmux_cli

MANIFEST = Path(plugin.__file__).with_name("elowen-plugin.toml")


def test_manifest() -> None:
    m = load_manifest(MANIFEST)
    assert (m.name, m.api, m.entry) == ("tmux", "1", "elowen_builtins.tmux.plugin")
    assert m.required == ("process.spawn",)
    assert m.contributes["services"] == ("tmux",)
    defaults = {k: f.default for k, f in m.config.items()}
    assert defaults == {"socket": "", "width": 200, "height": 50, "enter_delay": 0.5, "pause_after": 5}


def test_default_socket_is_private_to_each_home(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    sa = plugin.make_service({}, a).socket
    sb = plugin.make_service({}, b).socket
    assert sa != sb and sa.startswith("elowen-") and len(sa) == len("elowen-") + 8
    assert plugin.make_service({}, a).socket == sa, "stable for a home"
    assert plugin.make_service({"socket": "mine"}, a).socket == "mine", "an explicit socket wins"


def test_make_service_from_config() -> None:
    service = plugin.make_service({"socket": "elowen-x", "width": 120, "height": 40, "enter_delay": 0.2, "pause_after": 0})
    assert (service.socket, service.width, service.height, service.enter_delay, service.pause_after) == ("elowen-x", 120, 40, 0.2, None)


async def test_service_runs_in_a_kernel(tmp_path: Path, socket_name: str) -> None:
    async with plugin_kernel(
        tmp_path, enable=["tmux"], modules=[plugin], config={"tmux": {"socket": socket_name, "enter_delay": 0.05}}, entry_points=False
    ) as kernel:
        service = kernel.contributions.get("service", "tmux").obj.obj  # Contribution → Service → object
        assert isinstance(service, TmuxService)
        await service.spawn("elowen-k", ["sleep", "30"])
        assert await service.is_alive("elowen-k")
    # Disabling the plugin detached the control client; the agent session lives on.
    with trio.fail_after(5):
        while "_elowen_control" in tmux_cli(socket_name, "list-clients", "-F", "#{session_name}").stdout:
            await trio.sleep(0.05)
    assert tmux_cli(socket_name, "has-session", "-t", "=elowen-k").returncode == 0

"""``elowen plugin disable`` of a plugin that enabled plugins require, against a real daemon with
the builtin plugins: refused (exit status 1, the dependents named, nothing changed), then
``--cascade`` disables them first and says which; ``plugin list`` gives the reason of a plugin
waiting for its provider, and re-enabling the provider brings it back."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Home


def _states(home: Home) -> dict[str, Any]:
    return {p["name"]: p for p in home.json("plugin", "list")}


@pytest.mark.slow
def test_disable_with_dependents_refused_then_cascade(home: Home) -> None:
    # agents on (the conftest turns it off): it requires the tmux plugin's service
    (home.path / "config.toml").write_text(f'[plugins.tmux.config]\nsocket = "{home.tmux_socket}"\n')
    home.ok("daemon", "start")
    before = _states(home)
    assert before["tmux"]["state"] == "enabled" and before["agents"]["state"] == "enabled", before["agents"]["error"]

    refused = home.run("plugin", "disable", "tmux")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: plugin 'tmux' is required by enabled plugins: ") and "agents" in refused.stderr
    assert "--cascade" in refused.stderr
    assert _states(home)["tmux"]["state"] == "enabled"

    out = home.ok("plugin", "disable", "tmux", "--cascade").splitlines()
    assert out[-2] == "tmux: disabled"
    assert "agents: disabled (requires tmux)" in out
    after = _states(home)
    cascaded = [line.split(":")[0] for line in out[:-2]]
    assert out[-1].startswith("re-enable them with: elowen plugin enable tmux ") and "agents" in out[-1]
    assert all(after[name]["state"] == "disabled" for name in cascaded)

    # agents is asked for again while tmux is off: it waits, with the reason in `plugin list`
    waiting = home.run("plugin", "enable", "agents")
    assert waiting.returncode == 1 and "waiting for service 'tmux'" in waiting.stderr
    listing = home.ok("plugin", "list")
    assert "agents: waiting for service 'tmux': plugin 'tmux' offers it but is disabled" in listing
    assert home.ok("plugin", "enable", "tmux").strip() == "tmux: enabled"
    assert _states(home)["agents"]["state"] == "enabled", "the waiting consumer follows its provider"

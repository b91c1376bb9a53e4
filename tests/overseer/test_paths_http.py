"""The decision paths as the daemon shows them, over HTTP and the CLI: ``elowen plugin list``
lists ``overseer-relay`` and ``overseer-parked``; ``GET /missions`` names the active path
(``null`` once the relay is disabled: every decision waits for a human); an old
``config.toml`` that still sets the moved overseer keys starts fine, with a warning naming
where each key went; ``/overseer/poll`` is served by ``overseer-parked``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, start_daemon


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    home = tmp_path_factory.mktemp("paths-http")
    sock = f"elowen-test-{uuid.uuid4().hex[:8]}"
    config = {"plugins": {"tmux": {"config": {"socket": sock}}, "overseer": {"config": {"model": "fake/old", "overseer_exec": "sonnet"}}}}
    (home / "config.toml").write_text(tomli_w.dumps(config))
    proc = start_daemon(home)
    try:
        yield proc
    finally:
        proc.stop()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def _cli(daemon: DaemonProc, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ELOWEN_URL": daemon.url, "ELOWEN_TOKEN": daemon.admin_token, "ELOWEN_HOME": str(daemon.home)}
    return subprocess.run(
        [sys.executable, "-c", "from elowen.cli.main import main; main()", *args], capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL
    )


def test_plugin_list_shows_both_paths(daemon: DaemonProc) -> None:
    out = _cli(daemon, "plugin", "list", "--json")
    assert out.returncode == 0, out.stderr
    states = {p["name"]: p["state"] for p in json.loads(out.stdout)}
    assert states["overseer"] == "enabled"
    assert states["overseer-relay"] == "enabled" and states["overseer-parked"] == "enabled"
    table = _cli(daemon, "plugin", "list")
    assert "overseer-relay" in table.stdout and "overseer-parked" in table.stdout


def test_moved_keys_are_named_in_a_warning(daemon: DaemonProc) -> None:
    log = daemon.log_path.read_text()
    assert "[plugins.overseer.config] model is ignored: it moved to [plugins.overseer-relay.config] model" in log
    assert "[plugins.overseer.config] overseer_exec is ignored: it moved to [plugins.overseer-parked.config] overseer_exec" in log


def test_missions_name_the_active_path_and_none_without_one(daemon: DaemonProc) -> None:
    with daemon.admin() as admin:
        path = admin.get("/missions").json()["decision_path"]
        # overseer-parked has no overseer_exec of its own: it registers no path
        assert path["active"] == "relay" and [p["plugin"] for p in path["paths"]] == ["overseer-relay"]
        assert admin.post("/plugins/overseer-relay/disable").status_code == 200
        try:
            assert admin.get("/missions").json()["decision_path"] == {"active": None, "paths": [], "waiting": 0}
        finally:
            assert admin.post("/plugins/overseer-relay/enable").json()["state"] == "enabled"
        assert admin.get("/missions").json()["decision_path"]["active"] == "relay"


def test_poll_is_served_by_the_parked_plugin(daemon: DaemonProc) -> None:
    with daemon.admin() as admin:
        resp = admin.get("/overseer/poll", params={"mission": "1", "wait": "0"})
        assert resp.status_code == 409 and resp.json()["error"]["code"] == "no_parked_overseer", resp.text
        assert "overseer-parked" in resp.json()["error"]["message"]
        assert admin.post("/plugins/overseer-parked/disable").status_code == 200
        try:
            assert admin.get("/overseer/poll", params={"mission": "1", "wait": "0"}).status_code == 404
        finally:
            assert admin.post("/plugins/overseer-parked/enable").json()["state"] == "enabled"

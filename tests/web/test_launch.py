"""``elowen.web.launch``: the web front end started and stopped as a detached process, as
``elowen up`` / ``elowen down`` / ``elowen web`` do (real processes, free loopback ports)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from elowen.cli.config import load_config
from elowen.web import launch
from tests.support.waiting import free_port


def test_start_status_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    home = tmp_path / "home"
    monkeypatch.setenv("ELOWEN_HOME", str(home))
    monkeypatch.setenv("ELOWEN_WEB_PORT", str(port))
    monkeypatch.setenv("ELOWEN_URL", f"http://127.0.0.1:{free_port()}")  # no daemon: the web still starts
    cfg = load_config(dict(os.environ))
    assert launch.web_url() == f"http://127.0.0.1:{port}"
    assert not launch.status(cfg).running
    st = launch.start(cfg)
    try:
        assert st.running and st.pid and st.url == f"http://127.0.0.1:{port}"
        assert (home / "web.pid").exists() and (home / "logs" / "web.log").exists()
        assert launch.start(cfg).pid == st.pid  # already running: not started twice
        login = httpx.get(f"{st.url}/login", timeout=5)
        assert login.status_code == 200 and "Log in to Elowen" in login.text
    finally:
        stopped = launch.stop(cfg)
    assert stopped == st.pid
    assert not launch.status(cfg).running and not (home / "web.pid").exists()
    assert launch.stop(cfg) is None

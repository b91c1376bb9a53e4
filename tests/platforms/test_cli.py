"""``elowen platforms`` against a real daemon subprocess whose discord plugin is pointed at the
scripted Discord server, and whose whatsapp plugin has no secrets yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import cleanup_home, make_home, wait_for
from tests.support.discord_server import DiscordServer

from .conftest import secret_file


@pytest.mark.slow
@pytest.mark.flaky(reruns=1, reruns_delay=1)  # real processes racing a deadline: rerun once when the 2 cores are saturated by parallel workers
def test_elowen_platforms_shows_each_adapters_state(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    token = secret_file(tmp_path / "discord-token", "bot-token-123456")
    try:
        with DiscordServer() as server:
            with (home.path / "config.toml").open("a") as f:
                f.write(
                    f'\n[plugins.discord.config]\ntoken_file = "{token}"\napi_base = "{server.api_base}"\ngateway_url = "{server.gateway_url}"\n'
                    '\n[plugins.whatsapp.config]\nphone_number_id = "1234567890"\n'
                )
            home.ok("daemon", "start")

            def states() -> dict[str, str]:
                return {p["name"]: p["state"] for p in home.json("platforms")["platforms"]}

            wait_for(lambda: states().get("discord") == "connected", timeout=60)
            assert states()["whatsapp"] == "not_configured"
            whatsapp = next(p for p in home.json("platforms")["platforms"] if p["name"] == "whatsapp")
            assert "access_token" in whatsapp["detail"] and "does not exist" in whatsapp["detail"]
            text = home.ok("platforms")
            assert "discord   discord   connected" in text and "not_configured" in text
            assert "bot-token" not in text and "bot-token" not in home.ok("plugin", "info", "discord")
    finally:
        cleanup_home(home)

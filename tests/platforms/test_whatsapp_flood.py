"""Anyone who can reach the WhatsApp webhook (it faces the internet through your proxy) may
send forged deliveries and wrong verify tokens. Each is refused (401 / 403) and counted, but
they must not grow the audit table by one row per request: the first refusal of a reason is
audited at once, later ones are folded into the next row (``count``). Real listener on
127.0.0.1, real kernel and SQLite."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from tests.support.whatsapp_server import delivery, post, text_message

from .test_whatsapp import ADA, SECRET, whatsapp_env

FLOOD = 200


async def test_a_flood_of_forged_deliveries_is_refused_counted_and_audited_in_bounds(tmp_path: Path) -> None:
    async with whatsapp_env(tmp_path) as (env, _graph, url):
        forged = delivery(text_message(ADA, "do something"))

        def flood() -> list[int]:
            codes = [post(url, forged, app_secret=SECRET, signature="sha256=" + "0" * 64).status_code for _ in range(FLOOD)]
            with httpx.Client() as client:
                query = {"hub.mode": "subscribe", "hub.verify_token": "wrong", "hub.challenge": "c"}
                codes += [client.get(url, params=query).status_code for _ in range(FLOOD)]
            return codes

        codes = await trio.to_thread.run_sync(flood)
        assert codes == [401] * FLOOD + [403] * FLOOD
        assert env.adapter("whatsapp").refused == FLOOD
        denied = [a for a in env.audit("whatsapp.webhook") if a["outcome"] == "denied"]
        assert 2 <= len(denied) <= 4, f"{len(denied)} audit rows for {2 * FLOOD} refused requests"

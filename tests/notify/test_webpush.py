"""Web push end to end against the scripted push service on 127.0.0.1: the VAPID key made and
kept in the home folder (0600), the real RFC 8291 encryption decrypted by the service playing
the browser, RFC 8292 VAPID headers verified, expired subscriptions pruned (404/410), a 5xx
retried, and subscription input checked."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import trio

from elowen_builtins.notify.webpush import PushError, check_endpoint
from tests.notify.conftest import until, world
from tests.notify.push_service import BrowserKeys, PushService, b64u


@pytest.fixture
def push() -> PushService:
    with PushService() as service:
        yield service


async def test_push_round_trip_decrypts(tmp_path: Path, push: PushService) -> None:
    async with world(tmp_path) as w:
        ada = w.user("ada")
        key = w.rt.dispatcher.vapid
        pem = key.path
        assert pem.parent == w.kernel.home / "plugins" / "notify" and stat.S_IMODE(pem.stat().st_mode) == 0o600
        sub_id, sub = push.new_subscription(key.public_key)
        row = w.rt.outbox.subscribe(ada, sub["endpoint"], sub["keys"]["p256dh"], sub["keys"]["auth"], "laptop")
        nid = await w.notify.notify(ada, "Decision 3 waits", "rm -rf build " + "x" * 5000, url="/escalations", urgency="high", kind="escalation")
        got = await until(lambda: push.for_sub(sub_id), "the push message")
        assert push.refused == []
        msg = got[0].message
        assert (msg["id"], msg["title"], msg["url"], msg["urgency"]) == (nid, "Decision 3 waits", "/escalations", "high")
        assert msg["body"].startswith("rm -rf build") and msg["body"].endswith("…")  # cut to fit 4096 octets
        assert got[0].headers["Urgency"] == "high" and int(got[0].headers["TTL"]) == 86400
        await until(lambda: w.rt.outbox.deliveries_of(nid)[0]["status"] == "delivered", "recorded as delivered")
        assert w.rt.outbox.subscription(row["id"])["last_ok_at"]
        public = key.public_key
    async with world(tmp_path) as w2:  # the same home: the key is kept, not regenerated
        assert w2.rt.dispatcher.vapid.public_key == public


async def test_gone_subscriptions_are_pruned_and_5xx_retried(tmp_path: Path, push: PushService) -> None:
    async with world(tmp_path, {"max_attempts": 20}) as w:
        ada = w.user("ada")
        key = w.rt.dispatcher.vapid.public_key
        gone_id, gone = push.new_subscription(key)
        flaky_id, flaky = push.new_subscription(key)
        push.status[gone_id] = 410
        push.status[flaky_id] = 503
        rows = [w.rt.outbox.subscribe(ada, s["endpoint"], s["keys"]["p256dh"], s["keys"]["auth"], "") for s in (gone, flaky)]
        nid = await w.notify.notify(ada, "Hi", "there")
        await until(lambda: w.rt.outbox.subscription(rows[0]["id"]) is None, "the 410 subscription pruned")
        await until(lambda: push.attempts.get(flaky_id, 0) >= 3, "503 retried")
        push.status.pop(flaky_id)
        await until(lambda: push.for_sub(flaky_id), "delivered once the service recovers")
        await until(lambda: all(d["status"] != "pending" for d in w.rt.outbox.deliveries_of(nid)), "recorded")
        by = {d["target"]: d for d in w.rt.outbox.deliveries_of(nid)}
        assert by[str(rows[0]["id"])]["status"] == "failed" and "expired" in by[str(rows[0]["id"])]["last_error"]
        assert by[str(rows[1]["id"])]["status"] == "delivered"
        await trio.sleep(0.3)
        assert len(push.for_sub(flaky_id)) == 1 and push.refused == []


async def test_a_wrong_vapid_key_is_refused_by_the_service(tmp_path: Path, push: PushService) -> None:
    """The scripted service can fail: a subscription made for another applicationServerKey is
    refused (403) and the delivery fails without retrying."""
    async with world(tmp_path) as w:
        ada = w.user("ada")
        other = b64u(BrowserKeys().public_raw)  # some other P-256 key
        sub_id, sub = push.new_subscription(other)
        w.rt.outbox.subscribe(ada, sub["endpoint"], sub["keys"]["p256dh"], sub["keys"]["auth"], "")
        nid = await w.notify.notify(ada, "Hi", "")
        d = await until(lambda: (x := w.rt.outbox.deliveries_of(nid)[0])["status"] != "pending" and x, "settled")
        assert d["status"] == "failed" and d["last_error"].startswith("403") and push.refused


def test_subscription_input_is_checked() -> None:
    sub = BrowserKeys().subscription("https://push.example.org/x")
    check_endpoint(sub["endpoint"], sub["keys"]["p256dh"], sub["keys"]["auth"], allow_http=False)
    for endpoint, p256dh, auth, allow in (
        ("http://push.example.org/x", sub["keys"]["p256dh"], sub["keys"]["auth"], False),
        ("file:///etc/passwd", sub["keys"]["p256dh"], sub["keys"]["auth"], True),
        (sub["endpoint"], "AAAA", sub["keys"]["auth"], False),
        (sub["endpoint"], sub["keys"]["p256dh"], None, False),
    ):
        with pytest.raises(PushError):
            check_endpoint(endpoint, p256dh, auth, allow_http=allow)

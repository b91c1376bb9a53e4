"""The service, the outbox and platform surfaces: at-least-once delivery, backoff, failure
made visible, catch-up of a surface that was down, switches, and disabling the plugin."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from elowen_sdk.services.notify import Notification, NotifyService
from tests.notify.conftest import until, world


class Surface:
    """A platform surface as a chat plugin would register it; ``down`` makes deliver raise
    (its outside service is unreachable)."""

    def __init__(self, name: str = "chat", linked: tuple[int, ...] | None = None) -> None:
        self.name = name
        self.down = False
        self.got: list[Notification] = []
        self.calls = 0
        self.linked = linked

    async def deliver(self, notification: Notification) -> bool:
        self.calls += 1
        if self.down:
            raise ConnectionError("chat service unreachable")
        if self.linked is not None and notification.user_id not in self.linked:
            return False
        self.got.append(notification)
        return True


async def test_notify_stores_publishes_and_validates(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        ada = w.user("ada")
        nid = await w.notify.notify(ada, "Hello", "World", url="/tasks/1", urgency="high", kind="cron")
        assert nid > 0
        row = w.rt.outbox.get(nid)
        assert (row["user_id"], row["kind"], row["title"], row["url"], row["urgency"]) == (ada, "cron", "Hello", "/tasks/1", "high")
        events = w.store.query("SELECT data FROM events WHERE type = 'notify.created'")
        assert len(events) == 1 and f'"audience":[{ada}]' in events[0]["data"].replace(" ", "")
        with pytest.raises(LookupError):
            await w.notify.notify(99999, "x", "y")
        for bad in ({"title": " "}, {"urgency": "urgent"}, {"kind": "gossip"}, {"url": "javascript:alert(1)"}):
            args = {"title": "t", "body": "b", **bad}
            with pytest.raises(ValueError):
                await w.notify.notify(ada, args.pop("title"), args.pop("body"), **args)


async def test_the_contract_is_met(tmp_path: Path) -> None:
    from elowen_sdk.contracts import missing_members

    async with world(tmp_path) as w:
        assert missing_members(w.notify, NotifyService) == []


async def test_surface_down_gets_it_when_back_with_backoff(tmp_path: Path) -> None:
    async with world(tmp_path, {"max_attempts": 50}) as w:
        ada = w.user("ada")
        chat = Surface()
        w.notify.register_surface(chat)
        chat.down = True
        nid = await w.notify.notify(ada, "While down", "…")
        await until(lambda: chat.calls >= 3, "three failed attempts")
        d = w.rt.outbox.deliveries_of(nid)[0]
        assert d["status"] == "pending" and d["attempts"] >= 2 and "unreachable" in d["last_error"]
        # the platform process goes away entirely (unregistered), more is queued meanwhile
        w.notify.unregister_surface("chat")
        nid2 = await w.notify.notify(ada, "While gone", "…")
        await trio.sleep(0.3)
        assert [x["status"] for x in w.rt.outbox.deliveries_of(nid2)] == ["pending"]
        # it comes back: everything it missed arrives, once each, in order
        chat.down = False
        w.notify.register_surface(chat)
        await until(lambda: len(chat.got) == 2, "both delivered")
        await trio.sleep(0.2)
        assert sorted(n.id for n in chat.got) == [nid, nid2]  # each once
        assert all(x["status"] == "delivered" for i in (nid, nid2) for x in w.rt.outbox.deliveries_of(i))


async def test_bounded_retries_then_failed_and_visible(tmp_path: Path) -> None:
    async with world(tmp_path, {"max_attempts": 3}) as w:
        ada = w.user("ada")
        chat = Surface()
        chat.down = True
        w.notify.register_surface(chat)
        nid = await w.notify.notify(ada, "Never", "…")
        d = await until(lambda: (x := w.rt.outbox.deliveries_of(nid)[0])["status"] == "failed" and x, "failed")
        assert d["attempts"] == 3 and "gave up after 3 attempts" in d["last_error"]
        assert chat.calls == 3
        failed = w.rt.outbox.deliveries(user_id=ada, status="failed", before=None, limit=10)
        assert [x["notification_id"] for x in failed] == [nid]


async def test_unlinked_user_is_skipped_not_retried(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        ada, bob = w.user("ada"), w.user("bob")
        chat = Surface(linked=(ada,))
        w.notify.register_surface(chat)
        a = await w.notify.notify(ada, "For ada", "")
        b = await w.notify.notify(bob, "For bob", "")
        await until(lambda: all(x["status"] != "pending" for i in (a, b) for x in w.rt.outbox.deliveries_of(i)), "settled")
        assert w.rt.outbox.deliveries_of(a)[0]["status"] == "delivered"
        assert w.rt.outbox.deliveries_of(b)[0]["status"] == "skipped"
        assert [n.user_id for n in chat.got] == [ada]


async def test_switches_per_kind_and_surface(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        ada = w.user("ada")
        chat = Surface()
        w.notify.register_surface(chat)
        w.rt.outbox.set_prefs(ada, {"cron": {"chat": False}, "goal": {"*": False}})
        cron = await w.notify.notify(ada, "Cron result", "", kind="cron")
        assert cron > 0 and w.rt.outbox.deliveries_of(cron) == []  # listed, not sent to chat
        assert await w.notify.notify(ada, "Goal", "", kind="goal") == 0  # off everywhere
        msg = await w.notify.notify(ada, "Other", "")
        await until(lambda: [n.id for n in chat.got] == [msg], "only the message reached chat")


async def test_a_surface_with_a_bad_name_is_refused(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        for name in ("push", "web", "Bad Name", ""):
            with pytest.raises(ValueError):
                w.notify.register_surface(Surface(name))


async def test_pending_survives_a_disable_and_goes_out_after(tmp_path: Path) -> None:
    """Disabling the plugin stops its worker; what was queued is still delivered (at least
    once) by the next enable — the outbox is in the store, not in memory."""
    async with world(tmp_path) as w:
        ada = w.user("ada")
        chat = Surface()
        w.notify.register_surface(chat)
        chat.down = True
        nid = await w.notify.notify(ada, "Queued", "")
        await until(lambda: chat.calls >= 1, "a first attempt")
        await w.toggle("notify", False)
        calls = chat.calls
        await trio.sleep(0.5)
        assert chat.calls == calls  # nothing runs while disabled
        await w.toggle("notify", True)
        chat.down = False
        w.notify.register_surface(chat)  # a platform re-registers on on_service("notify", True)
        await until(lambda: [n.id for n in chat.got] == [nid], "delivered after re-enable")


async def test_a_platform_plugin_receives_through_the_documented_hooks(tmp_path: Path) -> None:
    """A real plugin (tests/notify/surface_plugin) registers its surface from on_load and
    on_service; disabling and re-enabling notify re-attaches it, and what was queued for it
    meanwhile arrives."""
    from tests.notify.surface_plugin.plugin import RECEIVED

    RECEIVED.clear()
    async with world(tmp_path, modules=("tests.notify.surface_plugin.plugin",), also=("echo-surface",)) as w:
        ada = w.user("ada")
        first = await w.notify.notify(ada, "First", "")
        await until(lambda: [n.id for n in RECEIVED] == [first], "delivered to the plugin's surface")
        await w.toggle("echo-surface", False)  # the platform goes down
        second = await w.notify.notify(ada, "While the platform is off", "")
        await trio.sleep(0.3)
        assert [n.id for n in RECEIVED] == [first]
        await w.toggle("echo-surface", True)
        await until(lambda: [n.id for n in RECEIVED] == [first, second], "caught up after coming back")
        await w.toggle("notify", False)
        await w.toggle("notify", True)  # on_service("notify", True) re-attaches the surface
        third = await w.notify.notify(ada, "After notify came back", "")
        await until(lambda: [n.id for n in RECEIVED][-1:] == [third], "delivered after notify re-enabled")

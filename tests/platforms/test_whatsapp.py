"""The whatsapp plugin end to end: real signed webhook deliveries over HTTP to the plugin's
listener on 127.0.0.1, pywa's async client sending replies to the scripted Graph API
(tests/support/whatsapp_server.py), a real kernel with the brain and the scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from tests.support.model_server import Reply
from tests.support.waiting import free_port
from tests.support.whatsapp_server import GraphServer, delivery, post, sign, text_message

from .conftest import CODE_RE, Env, platform_env, secret_file, until

SECRET = "app-secret-0123456789"
ADA = "15551230001"
EVE = "15559990666"


@asynccontextmanager
async def whatsapp_env(tmp_path: Path, **config: Any) -> AsyncIterator[tuple[Env, GraphServer, str]]:
    files = {k: secret_file(tmp_path / k, v) for k, v in {"access_token": "graph-token-abcdef", "app_secret": SECRET, "verify_token": "verify-me-123"}.items()}
    port = free_port()
    with GraphServer(token="graph-token-abcdef") as graph:
        cfg = {
            "phone_number_id": "1234567890",
            "listen_port": port,
            "graph_url": graph.url,
            **{f"{k}_file": str(p) for k, p in files.items()},
            **config,
        }
        async with platform_env(tmp_path, "whatsapp", cfg) as env:
            await until(lambda: env.platform("whatsapp").get("state") == "connected", what="the webhook listening")
            url = f"http://127.0.0.1:{port}/webhook"
            await until(partial(_listening, url), what="the webhook port")
            yield env, graph, url


async def _listening(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as client:
            await client.get(url, timeout=1)
        return True
    except httpx.HTTPError:
        return False


async def deliver(url: str, payload: Any = None, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("app_secret", SECRET)
    return await trio.to_thread.run_sync(lambda: post(url, payload, **kwargs))


async def _until_async(check: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    with trio.move_on_after(timeout):
        while True:
            value = await check()
            if value:
                return value
            await trio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_signed_delivery_answered_bad_signature_refused_and_strangers_silent(tmp_path: Path) -> None:
    async with whatsapp_env(tmp_path, pairing=True) as (env, graph, url):
        env.script(fallback=Reply(text="Hello from the brain."))
        # a stranger: silent, counted, no turn
        assert (await deliver(url, delivery(text_message(EVE, "hi")))).status_code == 200
        await until(lambda: env.adapter("whatsapp").gate.silenced == 1, what="the stranger counted")
        # pairing: 'link' → a code, confirmed by the Elowen user
        await deliver(url, delivery(text_message(ADA, "link")))
        code = await until(lambda: next((CODE_RE.search(t) for t in graph.to(ADA) if CODE_RE.search(t)), None), what="a link code")
        env.brain.link_channel(env.admin, code.group(1))
        # a bad signature: 401, audited, nothing queued
        forged = delivery(text_message(ADA, "do something"))
        assert (await deliver(url, forged, signature="sha256=" + "0" * 64)).status_code == 401
        assert (await deliver(url, forged, app_secret=None)).status_code == 401
        assert [a["outcome"] for a in env.audit("whatsapp.webhook")] == ["denied", "denied"]
        # a properly signed one: answered through the Graph API
        await deliver(url, delivery(text_message(ADA, "hello brain", message_id="wamid.same")))
        await until(lambda: "Hello from the brain." in graph.to(ADA), what="the reply")
        assert graph.sent[-1].phone_id == "1234567890" and graph.sent[-1].version.startswith("v")
        # a replay of the same message id: dropped
        assert (await deliver(url, delivery(text_message(ADA, "hello brain", message_id="wamid.same")))).status_code == 200
        await trio.sleep(0.5)
        assert graph.to(ADA).count("Hello from the brain.") == 1 and env.adapter("whatsapp").recent.duplicates == 1
        assert len(env.model.requests) == 1 and graph.to(EVE) == []


async def test_handshake_malformed_bodies_media_and_long_replies(tmp_path: Path) -> None:
    async with whatsapp_env(tmp_path) as (env, graph, url):
        async with httpx.AsyncClient() as client:
            ok = await client.get(url, params={"hub.mode": "subscribe", "hub.verify_token": "verify-me-123", "hub.challenge": "4242"})
            bad = await client.get(url, params={"hub.mode": "subscribe", "hub.verify_token": "wrong", "hub.challenge": "4242"})
            other = await client.get(url.replace("/webhook", "/other"))
        assert (ok.status_code, ok.text) == (200, "4242") and bad.status_code == 403 and other.status_code == 404
        raw = b"{not json"
        assert (await deliver(url, raw=raw, signature=sign(raw, SECRET))).status_code == 400
        wrong = json.dumps({"object": "page", "entry": []}).encode()
        assert (await deliver(url, raw=wrong, signature=sign(wrong, SECRET))).status_code == 400
        big = b"x" * (1024 * 1024 + 1)
        assert (await deliver(url, raw=big, signature=sign(big, SECRET))).status_code == 413
        # statuses and unknown fields are ignored and counted
        assert (await deliver(url, delivery(statuses=2))).status_code == 200
        assert env.adapter("whatsapp").ignored == 2 and env.adapter("whatsapp").malformed == 2

        env.kernel.store.execute(
            "INSERT INTO brain_channel_links (platform, platform_user, user_id, created_at) VALUES ('whatsapp', ?, ?, '2026-12-01T00:00:00Z')", (ADA, env.admin)
        )
        await deliver(url, delivery(text_message(ADA, "", kind="image")))
        await until(lambda: graph.to(ADA), what="the media answer")
        assert "only read text" in graph.to(ADA)[0] and env.model.requests == []
        long_reply = ("word " * 1500).strip()  # 7,499 characters: two WhatsApp messages
        env.script(fallback=Reply(text=long_reply))
        await deliver(url, delivery(text_message(ADA, "write a lot")))
        await until(lambda: len(graph.to(ADA)) == 3, what="a reply in two pieces")
        pieces = graph.to(ADA)[1:]
        assert all(len(p) <= 4096 for p in pieces) and " ".join(pieces) == long_reply


async def test_missing_secrets_show_not_configured(tmp_path: Path) -> None:
    async with platform_env(tmp_path, "whatsapp", {"phone_number_id": "1", "listen_port": free_port()}) as env:
        status = await until(lambda: env.platform("whatsapp").get("state") == "not_configured" and env.platform("whatsapp"), what="not_configured")
        assert "access_token" in status["detail"] and "does not exist" in status["detail"]


async def test_one_senders_messages_are_answered_in_the_order_they_arrived(tmp_path: Path) -> None:
    """Eight messages of one sender in one delivery (Meta batches them): the brain gets them one
    turn at a time in that order — a task per message waiting on a lock would not keep it (trio
    runs each batch of runnable tasks in a random order); the queue is gone afterwards."""
    async with whatsapp_env(tmp_path, pairing=True) as (env, graph, url):
        await deliver(url, delivery(text_message(ADA, "link")))
        code = await until(lambda: next((CODE_RE.search(t) for t in graph.to(ADA) if CODE_RE.search(t)), None), what="a link code")
        env.brain.link_channel(env.admin, code.group(1))
        env.script(fallback=Reply(text="noted"))
        texts = [f"message number {i}" for i in range(8)]
        assert (await deliver(url, delivery(*(text_message(ADA, t) for t in texts)))).status_code == 200
        await until(lambda: len(env.model.requests) == len(texts), what="a turn per message")
        assert [r.prompt for r in env.model.requests] == texts
        await until(lambda: graph.to(ADA).count("noted") == len(texts), what="every answer sent")
        assert len(env.adapter("whatsapp")._senders) == 0

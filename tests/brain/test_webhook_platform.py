"""The reference chat platform ``contrib/elowen-webhook-platform`` end to end: its distribution
pip-installed (into a private target folder put on the daemon's ``PYTHONPATH``, so this
environment is not changed), enabled in a real daemon, messages POSTed to its inbound route,
replies received by a real callback HTTP server on 127.0.0.1 (signature checked), the link code
confirmed with ``elowen chat --link``, an approval answered from the channel, two senders mapped
to two users, and the adapter stopped when the plugin is disabled. The scripted model server
plays the model."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
import trio

from tests.daemon.conftest import DaemonProc, start_daemon
from tests.support.model_server import ModelServer, ParsedRequest, Reply

from .conftest import call

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK = ROOT / "contrib" / "elowen-webhook-platform"
SPEC = "fake/test-model"
SECRET = "s3cret-for-tests"
INBOUND = "/plugins/webhook/inbound"
CODE_RE = re.compile(r"link code is ([A-Z0-9]{4}-[A-Z0-9]{4})")


class Callbacks:
    """A real HTTP server on 127.0.0.1 that records every JSON POST (body and signature)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.cond:
                    outer.items.append({"body": json.loads(raw), "raw": raw, "signature": self.headers.get("X-Elowen-Signature")})
                    outer.cond.notify_all()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/replies"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def wait(self, user: str, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        """The first ``count`` replies to ``user`` (waits for them)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = [i["body"] for i in self.items if i["body"]["user"] == user]
                if len(got) >= count:
                    return got[:count]
                left = deadline - time.monotonic()
                assert left > 0, f"timed out waiting for {count} replies to {user}: {got}"
                self.cond.wait(left)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Script:
    """Replies by the last user prompt."""

    def __call__(self, r: ParsedRequest) -> Reply:
        if not r.has_tools:
            return Reply(text="summary")
        if r.prompt.startswith("run") and not r.tool_results:
            return Reply(tool_calls=[call("terminal.run", command="echo ran > ran.txt")])
        if r.tool_results:
            return Reply(text="the command ran")
        return Reply(text=f"reply to: {r.prompt}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The contrib distribution pip-installed into a private folder (built from a copy, so the
    source tree gets no build/ or egg-info)."""
    tmp = tmp_path_factory.mktemp("webhook-dist")
    src = tmp / "src"
    shutil.copytree(WEBHOOK, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--no-deps", "--quiet", "--target", str(target), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(target.glob("elowen_webhook_platform-*.dist-info"))
    return target


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, site: Path) -> Iterator[tuple[DaemonProc, Callbacks, Path]]:
    root = tmp_path_factory.mktemp("webhook")
    project = root / "proj"
    project.mkdir()
    callbacks = Callbacks()
    with ModelServer(Script()) as server:
        home = root / "home"
        home.mkdir()
        config = {
            "plugins": {name: {"enabled": False} for name in ("agents", "claude-code", "opencode", "codex", "kilo", "tmux")}
            | {
                "brain": {"config": {"default_model": SPEC}},
                "webhook": {"enabled": True, "granted": ["net:*"], "config": {"secret": SECRET, "callback_url": callbacks.url}},
            },
            "inference": {"providers": {"fake": {"kind": "openai", "base_url": server.url + "/v1", "max_retries": 0}}},
        }
        (home / "config.toml").write_text(tomli_w.dumps(config))
        path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
        daemon = start_daemon(home, env={"PYTHONPATH": path})
        try:
            with daemon.admin() as admin:
                pid = admin.post("/projects", json={"name": "proj", "path": str(project)}).json()["id"]
                user = admin.post("/users", json={"name": "mia", "role": "member", "tool_grants": ["*"]}).json()
                admin.post(f"/users/{user['user']['id']}/projects", json={"project_id": pid}).raise_for_status()
            daemon.extra["member_token"] = user["token"]
            yield daemon, callbacks, project
        finally:
            daemon.stop()
            callbacks.close()


def say(client: httpx.Client, user: str, text: str, *, secret: str = SECRET, **extra: Any) -> httpx.Response:
    return client.post(INBOUND, json={"user": user, "text": text, "secret": secret, **extra})


def link_cli(daemon: DaemonProc, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ELOWEN_URL": daemon.url, "ELOWEN_TOKEN": daemon.admin_token, "ELOWEN_HOME": str(daemon.home)}
    return subprocess.run(
        [sys.executable, "-c", "from elowen.cli.main import main; main()", "chat", "--link", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_webhook_platform_end_to_end(stack: tuple[DaemonProc, Callbacks, Path]) -> None:
    daemon, callbacks, project = stack
    anon = daemon.client()
    admin = daemon.admin()
    member = daemon.client(str(daemon.extra["member_token"]))

    platforms = admin.get("/brain/channels").json()["platforms"]
    webhook = [p for p in platforms if p["name"] == "webhook"]  # discord/whatsapp: not configured here
    assert webhook == [{"name": "webhook", "plugin": "webhook", "state": "running", "error": None, "detail": None}]
    assert all(p["state"] == "not_configured" for p in platforms if p["name"] != "webhook")

    # the shared secret authenticates (no Elowen token needed); bad input is refused
    bad = say(anon, "alice", "hi", secret="wrong")
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "bad_secret"
    assert say(anon, "", "hi").status_code == 422
    assert anon.post(INBOUND, json={"user": "alice", "text": "hi"}).status_code == 401
    long = say(anon, "alice", "x" * 8_001)
    assert long.status_code == 413 and long.json()["error"]["code"] == "too_long"

    # an unlinked sender gets a link code on the callback, signed with the secret
    first = say(anon, "alice", "hello", id="m1")
    assert first.status_code == 202 and first.json() == {"accepted": True, "id": "m1"}
    (reply,) = callbacks.wait("alice", 1)
    assert reply["platform"] == "webhook" and reply["reply_to"] == "m1"
    code = CODE_RE.search(reply["text"]).group(1)  # type: ignore[union-attr]
    raw = next(i for i in callbacks.items if i["body"] == reply)
    assert raw["signature"] == "sha256=" + hmac.new(SECRET.encode(), raw["raw"], hashlib.sha256).hexdigest()

    # confirmed with the CLI; the code is single use
    proc = link_cli(daemon, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("linked webhook:alice to you")
    again = admin.post("/brain/channels/link", json={"code": code})
    assert again.status_code == 404 and again.json()["error"]["code"] == "invalid_code"

    # a linked sender's message is a turn in the admin's active conversation (the web dock's)
    assert say(anon, "alice", "hello brain").status_code == 202
    assert callbacks.wait("alice", 2)[1]["text"] == "reply to: hello brain"
    dock = admin.get("/brain/active").json()
    assert [(m["role"], m["content"]) for m in dock["messages"]][-2:] == [("user", "hello brain"), ("assistant", "reply to: hello brain")]

    # an approval arrives as text and is answered from the channel
    assert say(anon, "alice", "run the command").status_code == 202
    prompt = callbacks.wait("alice", 3)[2]["text"]
    m = re.search(r"Approval #(\d+) needed: terminal\.run", prompt)
    assert m and f"/allow {m.group(1)}" in prompt
    assert not (project / "ran.txt").exists()
    assert say(anon, "alice", f"/allow {m.group(1)}").status_code == 202
    assert [r["text"] for r in callbacks.wait("alice", 5)[3:]] == [f"Allowed #{m.group(1)}.", "the command ran"]
    assert (project / "ran.txt").read_text() == "ran\n"

    # a second sender linked to another user stays in that user's conversation
    assert say(anon, "bob", "hi").status_code == 202
    bob_code = CODE_RE.search(callbacks.wait("bob", 1)[0]["text"]).group(1)  # type: ignore[union-attr]
    linked = member.post("/brain/channels/link", json={"code": bob_code})
    assert linked.status_code == 200 and linked.json()["platform_user"] == "bob"
    assert say(anon, "bob", "member note").status_code == 202
    assert callbacks.wait("bob", 2)[1]["text"] == "reply to: member note"
    assert [m["content"] for m in member.get("/brain/active").json()["messages"]] == ["member note", "reply to: member note"]
    assert "member note" not in [m["content"] for m in admin.get("/brain/active").json()["messages"]]
    assert [(i["platform"], i["platform_user"]) for i in admin.get("/brain/channels").json()["items"]] == [("webhook", "alice")]

    # unlink, audited
    assert member.post("/brain/channels/unlink", json={"platform": "webhook", "platform_user": "alice"}).status_code == 404
    assert admin.post("/brain/channels/unlink", json={"platform": "webhook", "platform_user": "alice"}).json() == {"unlinked": True}
    links = admin.get("/audit", params={"action": "brain.channel.link"}).json()["items"]  # newest first
    assert [(a["target"], a["outcome"]) for a in links] == [("webhook:bob", "ok"), ("", "denied"), ("webhook:alice", "ok")]
    unlinks = admin.get("/audit", params={"action": "brain.channel.unlink"}).json()["items"]
    assert [(a["actor"], a["target"]) for a in unlinks] == [("user:1", "webhook:alice")]

    # disabling the plugin stops its adapter and removes its route
    assert admin.post("/plugins/webhook/disable").status_code == 200
    deadline = time.monotonic() + 10

    def webhooks() -> list[dict[str, Any]]:
        return [p for p in admin.get("/brain/channels").json()["platforms"] if p["name"] == "webhook"]

    while webhooks() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert webhooks() == []
    assert say(anon, "alice", "anyone?").status_code == 404
    assert admin.post("/plugins/webhook/enable").status_code == 200
    deadline = time.monotonic() + 10
    while not admin.get("/brain/channels").json()["platforms"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert say(anon, "carol", "back?").status_code == 202
    assert CODE_RE.search(callbacks.wait("carol", 1)[0]["text"])


# ------------------------------------------------------------------ fast, in-process


@pytest.fixture
def webhook(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The contrib package imported from its source folder."""
    monkeypatch.syspath_prepend(str(WEBHOOK))
    import elowen_webhook_platform.adapter as adapter
    import elowen_webhook_platform.checks as checks
    import elowen_webhook_platform.plugin as plugin

    return types.SimpleNamespace(adapter=adapter, checks=checks, plugin=plugin)


@pytest.fixture
def callbacks() -> Iterator[Callbacks]:
    server = Callbacks()
    try:
        yield server
    finally:
        server.close()


class Gateway:
    """Stands in for the brain's gateway: each turn waits until the test releases it."""

    platform = "webhook"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.release = trio.Event()

    async def turn(self, user: str, text: str) -> list[str]:
        self.seen.append((user, text))
        await self.release.wait()
        return [f"re: {text}"]


async def _wait_for(predicate: Any, timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


async def test_queue_size_bounds_unfinished_messages_and_keeps_sender_order(webhook: Any, callbacks: Callbacks) -> None:
    gateway = Gateway()
    config = {"secret": SECRET, "callback_url": callbacks.url + "?token=t0ps3cret", "queue_size": 3}
    adapter = webhook.adapter.WebhookAdapter(gateway, config)
    Inbound = webhook.adapter.Inbound
    async with trio.open_nursery() as nursery:
        nursery.start_soon(adapter.run)
        for i, user in enumerate(("alice", "bob", "alice")):
            adapter.submit(Inbound(user, f"{user} {i}", f"m{i}"))
        await _wait_for(lambda: len(gateway.seen) == 2)
        assert sorted(gateway.seen) == [("alice", "alice 0"), ("bob", "bob 1")], "one turn per sender at a time"
        with pytest.raises(webhook.adapter.QueueFull, match="retry after 5 seconds"):
            adapter.submit(Inbound("carol", "too many", "m3"))
        assert adapter.pending == 3
        gateway.release.set()
        await trio.to_thread.run_sync(callbacks.wait, "alice", 2)
        await _wait_for(lambda: adapter.pending == 0)
        adapter.submit(Inbound("carol", "now", "m4"))  # room again
        await trio.to_thread.run_sync(callbacks.wait, "carol", 1)
        nursery.cancel_scope.cancel()
    assert [r["text"] for r in callbacks.wait("alice", 2)] == ["re: alice 0", "re: alice 2"]
    assert [r["reply_to"] for r in callbacks.wait("alice", 2)] == ["m0", "m2"]
    await adapter.aclose()


async def test_stopping_drops_unfinished_messages_with_one_warning_and_a_notice_per_sender(
    webhook: Any, callbacks: Callbacks, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = Gateway()
    adapter = webhook.adapter.WebhookAdapter(gateway, {"secret": SECRET, "callback_url": callbacks.url})
    Inbound = webhook.adapter.Inbound
    async with trio.open_nursery() as nursery:
        nursery.start_soon(adapter.run)
        for i, user in enumerate(("alice", "alice", "bob")):
            adapter.submit(Inbound(user, f"msg {i}", f"m{i}"))
        await _wait_for(lambda: len(gateway.seen) == 2)
        nursery.cancel_scope.cancel()  # what disabling the plugin does
    caplog.set_level(logging.INFO)
    with trio.fail_after(webhook.adapter.NOTICE_TIMEOUT + 2):
        await adapter.aclose()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "dropped 3 unfinished message(s) (2 in progress) of 2 sender(s)" in warnings[0], warnings
    restart = webhook.adapter.RESTART_TEXT
    assert [(r["text"], r["reply_to"]) for r in callbacks.wait("alice", 1)] == [(restart, "m0")]
    assert [r["text"] for r in callbacks.wait("bob", 1)] == [restart]
    assert len(callbacks.items) == 2, "one notice per sender"
    with pytest.raises(trio.ClosedResourceError):
        adapter.submit(Inbound("alice", "late", "m9"))


async def test_logs_name_only_the_callback_host(webhook: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    gateway = Gateway()
    gateway.release.set()
    with socket.socket() as sock:  # a port nobody listens on: the POSTs fail and are logged
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hooks/abc?token=t0ps3cret"
    adapter = webhook.adapter.WebhookAdapter(gateway, {"secret": SECRET, "callback_url": url})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(adapter.run)
        adapter.submit(webhook.adapter.Inbound("alice", "hi", "m1"))
        await _wait_for(lambda: adapter.pending == 0)
        nursery.cancel_scope.cancel()
    failed = [r.getMessage() for r in caplog.records if "failed (attempt" in r.getMessage()]
    assert len(failed) == 2 and f"127.0.0.1:{port}" in failed[0]
    assert not [r.getMessage() for r in caplog.records if "t0ps3cret" in r.getMessage() or "/hooks/abc" in r.getMessage()]


async def test_httpx_request_lines_for_the_callback_are_quieted(webhook: Any, callbacks: Callbacks, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="httpx")  # another test may have quieted httpx (the daemon does)
    gateway = Gateway()
    gateway.release.set()
    adapter = webhook.adapter.WebhookAdapter(gateway, {"secret": SECRET, "callback_url": callbacks.url + "?token=t0ps3cret"})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(adapter.run)
        adapter.submit(webhook.adapter.Inbound("alice", "hi", "m1"))
        await trio.to_thread.run_sync(callbacks.wait, "alice", 1)
        async with httpx.AsyncClient() as other:  # other requests are still logged by httpx
            await other.post(callbacks.url.replace("/replies", "/elsewhere"), json={"user": "x"})
        nursery.cancel_scope.cancel()
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert not [line for line in lines if "t0ps3cret" in line], lines
    assert [line for line in lines if "/elsewhere" in line], "only the callback's lines are quieted"
    assert not logging.getLogger("httpx").filters, "the filter is removed when the adapter stops"


def _inbound_route(webhook: Any, config: dict[str, Any]) -> Any:
    routes: list[Any] = []
    ctx = types.SimpleNamespace(name="webhook-test", config=config, log=logging.getLogger("elowen.plugins.webhook-test"))
    webhook.plugin.register_routes(ctx=ctx, register=routes.append)
    return routes[0].handler


def _post(handler: Any, body: dict[str, Any]) -> Any:
    from elowen_sdk import HTTPError, Request

    async def call() -> Any:
        return await handler(Request("POST", "/inbound", {}, {}, body, None))  # type: ignore[arg-type]

    try:
        return trio.run(call)  # the handler is async (it feeds the adapter's trio channel)
    except HTTPError as exc:
        return exc


def test_a_short_secret_is_not_configured(webhook: Any) -> None:
    problem = webhook.checks.config_problem({"secret": "short-secret", "callback_url": "https://example.org/cb"})
    assert problem is not None and "at least 16 characters" in problem
    assert webhook.checks.config_problem({"secret": "", "callback_url": ""}) == "set the webhook plugin's secret and callback_url first"
    assert "http" in webhook.checks.config_problem({"secret": SECRET, "callback_url": "ftp://example.org/"})
    assert webhook.checks.config_problem({"secret": SECRET, "callback_url": "https://example.org/cb?t=1"}) is None

    handler = _inbound_route(webhook, {"secret": "short-secret", "callback_url": "https://example.org/cb"})
    err = _post(handler, {"user": "a", "text": "hi", "secret": "short-secret"})
    assert (err.status, err.code) == (403, "not_configured") and "at least 16 characters" in err.message

    adapter = webhook.adapter.WebhookAdapter(Gateway(), {"secret": "short-secret", "callback_url": "https://example.org/cb"})
    assert adapter.configured is False and "at least 16 characters" in adapter.detail


def test_inbound_route_refuses_too_long_text_and_throttles_bad_secret_warnings(webhook: Any, caplog: pytest.LogCaptureFixture) -> None:
    handler = _inbound_route(webhook, {"secret": SECRET, "callback_url": "https://example.org/cb"})
    err = _post(handler, {"user": "a", "text": "x" * (webhook.checks.MAX_TEXT + 1), "secret": SECRET})
    assert (err.status, err.code) == (413, "too_long") and "8000" in err.message
    err = _post(handler, {"user": "a", "text": "x" * webhook.checks.MAX_TEXT, "secret": SECRET})
    assert (err.status, err.code) == (409, "not_running"), "the full length passes the checks"
    caplog.set_level(logging.WARNING)
    for _ in range(5):
        assert _post(handler, {"user": "a", "text": "hi", "secret": "wrong"}).code == "bad_secret"
    warned = [r.getMessage() for r in caplog.records if "wrong secret" in r.getMessage()]
    assert warned == ["refused 1 inbound message(s) with a missing or wrong secret (reported at most once a minute)"]


def test_rate_log_reports_at_most_once_per_interval_with_a_count(webhook: Any) -> None:
    now = [0.0]
    rate = webhook.checks.RateLog(60.0, clock=lambda: now[0])
    assert rate.hit() == 1
    assert [rate.hit() for _ in range(3)] == [None, None, None]
    now[0] = 59.9
    assert rate.hit() is None
    now[0] = 60.0
    assert rate.hit() == 5
    assert rate.hit() is None

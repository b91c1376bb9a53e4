"""The whole path through real processes: a daemon and the web front end on 127.0.0.1, Debian's
chromium through Playwright, and the ``elowen`` CLI as a subprocess.

* a notification made while a page is open arrives on that page as a toast (in-page
  notification over the SSE relay) and the page is an installable web app (manifest with
  192/512 icons, service worker registered with scope ``/``);
* the REST routes keep each user to their own notifications (404 for another's);
* ``elowen notifications --json`` lists them; errors exit non-zero.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS, login, wait_js
from tests.web.stack import Stack, start_stack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    import tests.web.stack as web_stack

    # every builtin plugin starts with the daemon: on a loaded 2-core machine that can pass 20 s
    web_stack.START_TIMEOUT = max(web_stack.START_TIMEOUT, 90.0)
    s = start_stack(tmp_path_factory.mktemp("notify-web"))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-test-deps (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _member(stack: Stack, name: str) -> tuple[int, str]:
    with stack.admin() as c:
        r = c.post("/users", json={"name": name, "role": "member"})
        r.raise_for_status()
        body = r.json()
        return int(body["user"]["id"] if "user" in body else body["id"]), body["token"]


def test_a_notification_arrives_on_an_open_page(stack: Stack, browser: Any) -> None:
    page = login(browser, stack)
    # installable: the manifest and its icons are served, the worker is registered at /
    manifest = page.evaluate("fetch('/manifest.webmanifest').then(r => r.json())")
    assert manifest["display"] == "standalone" and manifest["start_url"] == "/"
    assert {i["sizes"] for i in manifest["icons"]} == {"192x192", "512x512"}
    for icon in manifest["icons"]:
        assert page.evaluate(f"fetch('{icon['src']}').then(r => r.status + ' ' + r.headers.get('content-type'))") == "200 image/png"
    assert wait_js(page, "document.body.dataset.sw || ''", timeout=20000) == "registered"
    scope = wait_js(page, "navigator.serviceWorker.getRegistration('/').then(r => r ? r.scope : '')", timeout=20000)
    assert scope == f"{stack.web_url}/"
    # a notification for the logged-in admin, made on the daemon side
    with stack.admin() as c:
        nid = c.post("/notifications/test", json={"title": "Decision 5 waits for you", "body": "rm -rf build"}).json()["id"]
    text = wait_js(page, f"(document.querySelector('.notify-toast[data-id=\"{nid}\"]') || {{}}).textContent || ''", timeout=20000)
    assert "Decision 5 waits for you" in text and "rm -rf build" in text
    assert page.get_attribute("#notify-toasts", "role") == "status"
    # the list page shows it, unread
    page.goto(f"{stack.web_url}/notifications")
    assert page.locator(f"#notify-list li[data-id='{nid}'][data-unread='1']").count() == 1
    page.click("[data-notify-read-all]")
    page.wait_for_selector(f"#notify-list li[data-id='{nid}'][data-unread='0']")
    assert page.errors == []  # type: ignore[attr-defined]


def test_members_see_only_their_own(stack: Stack) -> None:
    ada_id, ada = _member(stack, "ada-n")
    _, bob = _member(stack, "bob-n")
    with (
        httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {ada}"}) as a,
        httpx.Client(base_url=stack.daemon_url, headers={"Authorization": f"Bearer {bob}"}) as b,
    ):
        nid = a.post("/notifications/test", json={"title": "mine"}).json()["id"]
        assert [n["id"] for n in a.get("/notifications").json()["items"]] == [nid]
        assert b.get("/notifications").json()["items"] == []
        assert b.get(f"/notifications/{nid}").status_code == 404
        assert b.post(f"/notifications/{nid}/read").status_code == 404
        assert a.post(f"/notifications/{nid}/read").json()["marked"] == 1
        assert a.get("/notifications", params={"limit": "0"}).status_code == 422
        bad = a.post("/notifications/push/subscriptions", json={"endpoint": "http://127.0.0.1:1/x", "keys": {"p256dh": "x", "auth": "y"}})
        assert bad.status_code == 422 and "https" in bad.json()["error"]["message"]
        assert a.put("/notifications/settings", json={"kinds": {"gossip": {"*": False}}}).status_code == 422
        assert a.put("/notifications/settings", json={"kinds": {"cron": {"push": False}}}).json()["kinds"]["cron"]["push"] is False


def _cli(stack: Stack, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ELOWEN_URL": stack.daemon_url, "ELOWEN_TOKEN": token or stack.admin_token, "ELOWEN_HOME": str(stack.home)}
    return subprocess.run([str(Path(sys.executable).parent / "elowen"), *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_cli_lists_notifications(stack: Stack) -> None:
    sent = _cli(stack, "notifications", "test", "--title", "From the CLI", "--json")
    assert sent.returncode == 0, sent.stderr
    nid = json.loads(sent.stdout)["id"]
    listed = _cli(stack, "notifications", "--json")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)
    assert items[0]["id"] == nid and items[0]["title"] == "From the CLI" and items[0]["read_at"] is None
    human = _cli(stack, "notifications", "--unread")
    assert "From the CLI" in human.stdout and "unread" in human.stderr + human.stdout
    assert _cli(stack, "notifications", "read", str(nid)).returncode == 0
    assert nid not in [n["id"] for n in json.loads(_cli(stack, "notifications", "--unread", "--json").stdout)]
    missing = _cli(stack, "notifications", "read", "999999")
    assert missing.returncode != 0 and "no notification" in missing.stderr
    assert _cli(stack, "notifications", "settings", "gossip=off").returncode != 0
    assert Path(stack.home / "plugins" / "notify" / "vapid_private.pem").exists()


def test_the_service_worker_shows_a_push(stack: Stack, browser: Any) -> None:
    """The installed worker's push handler, in the real browser: Chromium's DevTools protocol
    (``ServiceWorker.deliverPushMessage``) hands the worker the plaintext a push service would
    (the message the notify plugin encrypts for this notification: ``push_message``), and the
    worker shows it as a system notification with its actions. (No push service runs in
    headless Chromium; the encryption leg is test_webpush.py's.)"""
    from elowen_builtins.notify.dispatch import push_message

    page = login(browser, stack)
    page.context.grant_permissions(["notifications"], origin=stack.web_url)
    wait_js(page, "document.body.dataset.sw || ''", timeout=20000)
    wait_js(page, "navigator.serviceWorker.ready.then(r => !!r.active)", timeout=20000)
    cdp = page.context.new_cdp_session(page)
    registrations: list[dict[str, Any]] = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda e: registrations.extend(e["registrations"]))
    cdp.send("ServiceWorker.enable")
    deadline = 100
    while not any(r["scopeURL"] == f"{stack.web_url}/" and not r.get("isDeleted") for r in registrations) and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
    reg = next(r for r in registrations if r["scopeURL"] == f"{stack.web_url}/")
    with stack.admin() as c:
        nid = c.post("/notifications/test", json={"title": "Goal paused (budget reached)", "body": "refactor the parser"}).json()["id"]
        row = c.get(f"/notifications/{nid}").json()
    row["actions"] = [{"action": "approve", "title": "Allow"}, {"action": "reject", "title": "Reject"}]
    cdp.send("ServiceWorker.deliverPushMessage", {"origin": stack.web_url, "registrationId": reg["registrationId"], "data": json.dumps(push_message(row))})
    shown = wait_js(
        page,
        "navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => ns.map(n => [n.title, n.body, n.tag, n.data.url, n.actions.map(a => a.action)]))"
        ".then(xs => xs.length ? xs : null)",
        timeout=20000,
    )
    assert shown == [["Goal paused (budget reached)", "refactor the parser", f"elowen-{nid}", "/", ["approve", "reject"]]]


def test_a_push_action_opens_the_page_to_confirm(stack: Stack, browser: Any) -> None:
    """sw.js opens ``url?notification=ID&action=approve`` for a click on Allow: the page marks
    the notification read and asks to confirm there (nothing is approved blind)."""
    page = login(browser, stack)
    with stack.admin() as c:
        nid = c.post("/notifications/test", json={"title": "Decision 9 waits for you"}).json()["id"]
        page.goto(f"{stack.web_url}/escalations?notification={nid}&action=approve")
        text = wait_js(page, "(document.querySelector('.notify-toast') || {}).textContent || ''", timeout=20000)
        assert "You chose Allow" in text
        for _ in range(100):
            if c.get(f"/notifications/{nid}").json()["read_at"]:
                break
            page.wait_for_timeout(100)
        assert c.get(f"/notifications/{nid}").json()["read_at"]

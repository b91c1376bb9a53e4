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
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, start_daemon
from tests.support.model_server import ModelServer, ParsedRequest, Reply

from .conftest import call

pytestmark = pytest.mark.slow

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
    proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--no-deps", "--quiet",
                           "--target", str(target), str(src)], capture_output=True, text=True, timeout=300)
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
            | {"brain": {"config": {"default_model": SPEC}},
               "webhook": {"enabled": True, "granted": ["net:*"], "config": {"secret": SECRET, "callback_url": callbacks.url}}},
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
    return subprocess.run([sys.executable, "-c", "from elowen.cli.main import main; main()", "chat", "--link", code],
                          capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def test_webhook_platform_end_to_end(stack: tuple[DaemonProc, Callbacks, Path]) -> None:
    daemon, callbacks, project = stack
    anon = daemon.client()
    admin = daemon.admin()
    member = daemon.client(str(daemon.extra["member_token"]))

    platforms = admin.get("/brain/channels").json()["platforms"]
    assert platforms == [{"name": "webhook", "plugin": "webhook", "state": "running", "error": None}]

    # the shared secret authenticates (no Elowen token needed); bad input is refused
    bad = say(anon, "alice", "hi", secret="wrong")
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "bad_secret"
    assert say(anon, "", "hi").status_code == 422
    assert anon.post(INBOUND, json={"user": "alice", "text": "hi"}).status_code == 401

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
    while admin.get("/brain/channels").json()["platforms"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert admin.get("/brain/channels").json()["platforms"] == []
    assert say(anon, "alice", "anyone?").status_code == 404
    assert admin.post("/plugins/webhook/enable").status_code == 200
    deadline = time.monotonic() + 10
    while not admin.get("/brain/channels").json()["platforms"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert say(anon, "carol", "back?").status_code == 202
    assert CODE_RE.search(callbacks.wait("carol", 1)[0]["text"])

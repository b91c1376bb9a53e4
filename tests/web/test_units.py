"""Unit tests of the web front end's pure parts: SSE translation, config coercion, redirects,
sessions, settings from the environment."""

from __future__ import annotations

import json
import time

import pytest

from elowen.web.config import load_web_config
from elowen.web.sessions import SessionStore
from elowen.web.views.actions import coerce_config
from elowen.web.views.auth import safe_next
from elowen.web.views.stream import translate_block


def test_event_blocks_travel_as_messages_with_their_type() -> None:
    out = translate_block(["id: 7", "event: task.created", 'data: {"id":3}'])
    assert out is not None
    lines = out.split("\n")
    assert lines[0] == "id: 7" and out.endswith("\n\n")
    assert json.loads(lines[1].removeprefix("data: ")) == {"type": "task.created", "data": {"id": 3}}


def test_the_publication_time_travels_inside_the_message() -> None:
    out = translate_block(["id: 8", "event: task.created", "ts: 2026-11-30T12:00:00.123Z", 'data: {"id":4}'])
    assert out is not None and "ts:" not in out.split("data:")[0]  # not passed on as a field
    assert json.loads(out.split("\n")[1].removeprefix("data: ")) == {"type": "task.created", "data": {"id": 4}, "ts": "2026-11-30T12:00:00.123Z"}


def test_comments_become_named_events_and_keep_the_last_id() -> None:
    assert translate_block([": heartbeat"]) == "event: heartbeat\ndata: {}\n\n"
    ready = translate_block(["retry: 2000", ": connected"])
    assert ready == "retry: 2000\n\nevent: ready\ndata: {}\n\n"
    assert "id:" not in (translate_block([": heartbeat"]) or "")
    assert translate_block([": something else"]) is None


def test_multi_line_data_is_joined_into_valid_json() -> None:
    out = translate_block(["id: 1", "event: x", "data: {", 'data: "a": 1', "data: }"])
    assert out is not None
    assert json.loads(out.split("\n")[1].removeprefix("data: "))["data"] == {"a": 1}


def test_config_form_values_are_typed_by_the_manifest() -> None:
    schema = {
        "binary": {"type": "string"},
        "extra_args": {"type": "array"},
        "skip": {"type": "boolean"},
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "env": {"type": "object"},
    }
    form = {"binary": "/usr/bin/claude", "extra_args": '["--verbose"]', "n": "3", "x": "0.5", "env": ""}
    assert coerce_config(schema, form) == {"binary": "/usr/bin/claude", "extra_args": ["--verbose"], "skip": False, "n": 3, "x": 0.5, "env": {}}
    assert coerce_config(schema, {**form, "skip": "on"})["skip"] is True
    with pytest.raises(ValueError, match="n: expected integer"):
        coerce_config(schema, {**form, "n": "three"})
    with pytest.raises(ValueError, match="extra_args"):
        coerce_config(schema, {**form, "extra_args": "[oops"})


@pytest.mark.parametrize(
    "target, expected",
    [
        ("/kanban", "/kanban"),
        ("/tasks/3?x=1", "/tasks/3?x=1"),
        (None, "/"),
        ("", "/"),
        ("//evil.example/", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil", "/"),
    ],
)
def test_login_redirects_stay_on_this_site(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected


def test_sessions_have_fresh_ids_and_expire_when_idle() -> None:
    store = SessionStore(idle=0.05)
    a = store.create("elw_a", {"name": "a"})
    b = store.create("elw_a", {"name": "a"})
    assert a.id != b.id and len(a.id) >= 40 and a.csrf != b.csrf
    assert store.get(a.id) is a
    assert a.csrf_ok(a.csrf) and not a.csrf_ok(b.csrf) and not a.csrf_ok(None) and not a.csrf_ok("")
    time.sleep(0.08)
    assert store.get(a.id) is None
    store.drop(b.id)
    assert store.get(b.id) is None and len(store) == 0


def test_config_from_environment() -> None:
    cfg = load_web_config({"ELOWEN_HOME": "/tmp/h", "ELOWEN_PORT": "4411", "ELOWEN_WEB_PORT": "4511", "ELOWEN_WEB_STREAM_WINDOW": "5"})
    assert (cfg.daemon_url, cfg.port, cfg.stream_window, str(cfg.home)) == ("http://127.0.0.1:4411", 4511, 5.0, "/tmp/h")
    assert load_web_config({"ELOWEN_URL": "http://127.0.0.1:9/"}).daemon_url == "http://127.0.0.1:9"
    with pytest.raises(ValueError):
        load_web_config({"ELOWEN_WEB_STREAM_WINDOW": "-1"})
    with pytest.raises(ValueError):
        load_web_config({"ELOWEN_WEB_PORT": "70000"})

"""Settings against real files: validation, atomic writes, watching hand edits."""

from __future__ import annotations

import logging
import os
import stat
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen.core.settings import Settings, validate
from elowen_sdk import ConfigError


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(tmp_path)


def write_by_hand(path: Path, text: str) -> None:
    """What an editor does: rewrite the file in place."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def test_missing_file_is_empty(settings: Settings) -> None:
    assert settings.load() == {} and settings.data == {}
    assert settings.get("daemon", "port", default=4400) == 4400


def test_load_and_get(settings: Settings) -> None:
    write_by_hand(
        settings.path,
        '[daemon]\nport = 4401\nhost = "127.0.0.1"\n[plugins.hello]\nenabled = true\ngranted = ["net:x"]\n'
        '[plugins.hello.config]\ngreeting = "hi"\n[myplugin]\nanything = 1\n',
    )
    data = settings.load()
    assert settings.get("daemon", "port") == 4401
    assert settings.get("plugins", "hello", "config", "greeting") == "hi"
    assert settings.get("plugins", "nope", "enabled", default=False) is False
    assert settings.get("daemon", "port", "deeper") is None
    assert data["myplugin"] == {"anything": 1}  # unknown tables allowed


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[daemon\nport = 1", "invalid TOML"),
        ("[daemon]\nport = 0", "daemon.port must be 1..65535"),
        ("[daemon]\nport = 70000", "daemon.port must be 1..65535"),
        ('[daemon]\nport = "4400"', "daemon.port must be an integer"),
        ("[daemon]\nport = true", "daemon.port must be an integer"),
        ("[daemon]\nhost = 5", "daemon.host must be a string"),
        ("[daemon]\nevent_retention = 0", "daemon.event_retention must be ≥ 1"),
        ("daemon = 3", r"\[daemon\] must be a table"),
        ('[plugins.hello]\nenabled = "yes"', "plugins.hello.enabled must be true or false"),
        ("[plugins.hello]\ngranted = [1]", "plugins.hello.granted must be a list of strings"),
        ("[plugins.hello]\nconfig = 3", r"\[plugins.hello.config\] must be a table"),
        ("plugins = 1", r"\[plugins\] must be a table"),
        ("[plugins]\nhello = 1", r"\[plugins.hello\] must be a table"),
        ('[execs]\nallowed = "claude-code"', "execs.allowed must be a list of strings"),
        ("[execs]\nfallback = 1", "execs.fallback must be a string"),
    ],
)
def test_invalid_files_name_file_and_problem(settings: Settings, text: str, problem: str) -> None:
    write_by_hand(settings.path, "[daemon]\nport = 4400\n")
    good = settings.load()
    write_by_hand(settings.path, text)
    with pytest.raises(ConfigError, match=problem) as info:
        settings.load()
    assert str(settings.path) in str(info.value)
    assert settings.data == good  # last good snapshot kept


def test_validate_accepts_full_shape() -> None:
    doc = {
        "daemon": {"host": "0.0.0.0", "port": 1, "event_retention": 5},
        "plugins": {"a": {"enabled": False, "granted": [], "config": {"x": [1]}}},
        "execs": {"allowed": ["codex"], "fallback": "codex"},
        "extra": {"k": "v"},
    }
    assert validate(doc) is doc


def test_update_writes_atomically_with_mode_0600(settings: Settings) -> None:
    write_by_hand(settings.path, "# mine\n[daemon]\nport = 4400\n")
    os.chmod(settings.path, 0o644)
    new = settings.update(lambda d: d.setdefault("plugins", {}).setdefault("hello", {}).update(enabled=True))
    assert new["plugins"]["hello"]["enabled"] is True and settings.data is new
    on_disk = tomllib.loads(settings.path.read_text())
    assert on_disk == {"daemon": {"port": 4400}, "plugins": {"hello": {"enabled": True}}}
    assert stat.S_IMODE(settings.path.stat().st_mode) == 0o600
    assert [p.name for p in settings.home.iterdir()] == ["config.toml"]  # no temp file left


def test_update_refuses_invalid_results_and_invalid_files(settings: Settings) -> None:
    settings.update(lambda d: d.update(daemon={"port": 4400}))
    before = settings.path.read_bytes()
    with pytest.raises(ConfigError, match="daemon.port"):
        settings.update(lambda d: d["daemon"].update(port=-1))
    with pytest.raises(ConfigError, match="cannot write"):
        settings.update(lambda d: d.update(bad={"x": None}))
    assert settings.path.read_bytes() == before
    write_by_hand(settings.path, "[daemon\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        settings.update(lambda d: d.update(x={}))
    assert settings.path.read_text() == "[daemon\n"  # a broken hand edit is not overwritten


def test_update_reads_hand_edits_first(settings: Settings) -> None:
    settings.update(lambda d: d.update(daemon={"port": 4400}))
    write_by_hand(settings.path, "[daemon]\nport = 4500\n")
    new = settings.update(lambda d: d.update(execs={"fallback": "codex"}))
    assert new == {"daemon": {"port": 4500}, "execs": {"fallback": "codex"}}


def test_no_partial_file_is_ever_visible(settings: Settings) -> None:
    """A reader polling in a thread only ever sees complete documents while we rewrite a
    large file many times."""
    big = {f"section{i}": {"value": "x" * 200} for i in range(300)}
    settings.update(lambda d: d.update(big, n={"i": 0}))
    stop = threading.Event()
    bad: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                doc = tomllib.loads(settings.path.read_text())
            except FileNotFoundError:
                bad.append("missing")
                continue
            except tomllib.TOMLDecodeError as exc:
                bad.append(str(exc))
                continue
            reads += 1
            if len(doc) != 301:
                bad.append(f"{len(doc)} sections")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 16):
            settings.update(lambda d, i=i: d["n"].update(i=i))
    finally:
        stop.set()
        t.join()
    assert reads > 0 and bad == []


async def wait_for(pred, timeout: float = 3.0) -> None:
    with trio.fail_after(timeout):
        while not pred():
            await trio.sleep(0.005)


async def test_watch_picks_up_hand_edits_fast(settings: Settings) -> None:
    settings.update(lambda d: d.update(daemon={"port": 4400}))
    changes: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(settings.watch, changes.append)
        start = trio.current_time()
        write_by_hand(settings.path, "[daemon]\nport = 4401\n")
        await wait_for(lambda: changes)
        latency = trio.current_time() - start
        assert changes == [{"daemon": {"port": 4401}}] and settings.data == changes[0]
        assert latency < 0.5, latency  # ~tens of ms here; generous for a busy machine
        settings.stop()
    assert len(changes) == 1


async def test_watch_ignores_own_writes(settings: Settings) -> None:
    changes: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(settings.watch, changes.append)
        settings.update(lambda d: d.update(daemon={"port": 4402}))
        settings.update(lambda d: d.update(daemon={"port": 4403}))
        await trio.sleep(0.3)  # several watch steps: our writes must not be reported
        assert changes == []
        write_by_hand(settings.path, "[daemon]\nport = 4404\n")  # the watcher is alive
        await wait_for(lambda: changes)
        settings.stop()
    assert changes == [{"daemon": {"port": 4404}}]


async def test_invalid_hand_edit_keeps_last_good_snapshot(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    settings.update(lambda d: d.update(daemon={"port": 4400}))
    changes: list[dict[str, Any]] = []

    async def on_change(doc: dict[str, Any]) -> None:  # async handlers are awaited
        await trio.sleep(0)
        changes.append(doc)

    with caplog.at_level(logging.ERROR, logger="elowen.core.settings"):
        async with trio.open_nursery() as nursery:
            await nursery.start(settings.watch, on_change)
            write_by_hand(settings.path, "[daemon]\nport = 99999\n")
            await wait_for(lambda: "daemon.port must be 1..65535" in caplog.text)
            assert changes == [] and settings.data == {"daemon": {"port": 4400}}
            write_by_hand(settings.path, "[daemon]\nport = 4405\n")  # fixed by hand
            await wait_for(lambda: changes)
            settings.stop()
    assert changes == [{"daemon": {"port": 4405}}]


async def test_edit_before_watch_started_is_reported(settings: Settings) -> None:
    settings.load()
    write_by_hand(settings.path, '[execs]\nfallback = "codex"\n')
    changes: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(settings.watch, changes.append)
        await wait_for(lambda: changes)
        settings.stop()
    assert changes == [{"execs": {"fallback": "codex"}}]


async def test_cancelling_watch_is_prompt(settings: Settings) -> None:
    with trio.fail_after(2):  # awatch alone would take up to 5 s to notice a cancel
        async with trio.open_nursery() as nursery:
            await nursery.start(settings.watch, lambda _d: None)
            await trio.sleep(0.05)
            nursery.cancel_scope.cancel()


async def test_failing_handler_does_not_stop_watching(settings: Settings) -> None:
    calls: list[int] = []

    def handler(doc: dict[str, Any]) -> None:
        calls.append(doc["daemon"]["port"])
        raise RuntimeError("handler bug")

    async with trio.open_nursery() as nursery:
        await nursery.start(settings.watch, handler)
        write_by_hand(settings.path, "[daemon]\nport = 1\n")
        await wait_for(lambda: calls == [1])
        write_by_hand(settings.path, "[daemon]\nport = 2\n")
        await wait_for(lambda: calls == [1, 2])
        settings.stop()

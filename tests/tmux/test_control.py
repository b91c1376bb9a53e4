"""The control-mode client on a real tmux: quoting round trips, pipelining, errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import trio

from elowen_builtins.tmux import TmuxCommandError, TmuxError, TmuxService
from elowen_builtins.tmux.control import ControlClient

from .conftest import PYTHON, file_reader, wait_for

ALPHABET = list("abcXYZ019 ;'\"$\\#{}~-=%!`&|<>()*?[]^") + ["\t", "\n", "\r", "\x1b", "\x01", "\x7f", "日", "本", "é", "😀"]


def _random_texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    texts = ["", "'", '"', "$", "\\", ";", "-R", "a;", "\\;", "~", "#{session_name}", "'\"'\"'", "\n", "$HOME"]
    while len(texts) < n:
        texts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))))
    return texts


async def test_arguments_round_trip_exactly(tmux_service: TmuxService, tmp_path: Path) -> None:
    """Every argument reaches tmux unchanged: set-buffer TEXT, save-buffer to a file, compare."""
    texts = [t for t in _random_texts(300) if t]
    client = await tmux_service._client()
    argvs: list[list[str]] = []
    for i, text in enumerate(texts):
        argvs += [["set-buffer", "-b", f"rt{i}", "--", text], ["save-buffer", "-b", f"rt{i}", str(tmp_path / f"{i}.bin")]]
    await client.commands(argvs)
    for i, text in enumerate(texts):
        assert (tmp_path / f"{i}.bin").read_bytes() == text.encode(), repr(text)


async def test_spawn_argv_round_trips(tmux_service: TmuxService, tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    args = ["plain", "two words", "it's", '"dq"', "$HOME", "a;", "-R", "multi\nline", "日本語", "\\", "#{pane_id}", "*", ""]
    code = f"import sys, json; open({str(out)!r}, 'w').write(json.dumps(sys.argv[1:])); import time; time.sleep(30)"
    await tmux_service.spawn("elowen-argv", [PYTHON, "-c", code, *args])
    await wait_for(lambda: file_reader(out)() != b"")
    assert json.loads(out.read_text()) == args


async def test_pipelined_commands_get_their_own_replies(tmux_service: TmuxService) -> None:
    results: dict[int, list[str]] = {}

    async def ask(i: int) -> None:
        results[i] = await tmux_service.command("display-message", "-p", f"reply {i}")

    async with trio.open_nursery() as nursery:
        for i in range(100):
            nursery.start_soon(ask, i)
    assert results == {i: [f"reply {i}"] for i in range(100)}


async def test_errors_are_reported_and_do_not_desync(tmux_service: TmuxService) -> None:
    client = await tmux_service._client()
    with pytest.raises(TmuxCommandError) as info:
        await client.commands([["display-message", "-p", "first"], ["no-such-command"], ["display-message", "-p", "third"]])
    assert "no-such-command" in info.value.message or "unknown command" in info.value.message
    assert await tmux_service.command("display-message", "-p", "after") == ["after"]


async def test_cancelled_caller_does_not_desync(tmux_service: TmuxService) -> None:
    with trio.move_on_after(0):
        await tmux_service.command("display-message", "-p", "lost")
    assert await tmux_service.command("display-message", "-p", "next") == ["next"]


async def test_attach_failure_is_a_clear_error(tmux_service: TmuxService) -> None:
    client = ControlClient([*tmux_service.base_argv(), "-C", "attach-session", "-t", "=elowen-nobody:"], label="probe")
    async with trio.open_nursery() as nursery:
        with pytest.raises(TmuxError, match="can't find session"):
            await nursery.start(client.run)
    assert client.closed
    with pytest.raises(TmuxError, match="not running"):
        await client.command("display-message", "-p", "x")


async def test_missing_tmux_binary_is_a_clear_error(socket_name: str) -> None:
    service = TmuxService(socket_name, tmux="/nonexistent/tmux")
    async with trio.open_nursery() as nursery:
        with pytest.raises(TmuxError, match="cannot run tmux"):
            await nursery.start(service.run)

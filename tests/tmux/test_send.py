"""The send path on real panes: payloads arrive byte for byte; Enter verification."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from elowen_builtins.tmux import SubmitNotConfirmed, TmuxService
from elowen_builtins.tmux.send import check_key, composer_emptied, needs_paste

from .conftest import PYTHON, file_reader, wait_for

COMPOSER = str(Path(__file__).with_name("composer.py"))

PAYLOADS = [
    "a;",
    ";",
    "-R",
    "-----BEGIN",
    "'\"",
    "日本語テキスト",
    "$HOME ~ #{session_name} \\ {braces} \\; -- -l",
    "  leading and trailing spaces  ",
]


def _multiline_4k() -> str:
    lines = [f"line {i:03d}: a; -R '\"' 日本語 $HOME \\ ;" for i in range(120)]
    text = "\n".join(lines)
    assert len(text.encode()) >= 4096
    return text


async def _cat_session(tmux: TmuxService, name: str, out: Path) -> None:
    await tmux.spawn(name, ["sh", "-c", f"exec cat > {out}"])


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
async def test_single_line_payload_arrives_exactly(tmux_service: TmuxService, tmp_path: Path, payload: str) -> None:
    out = tmp_path / "out.bin"
    await _cat_session(tmux_service, "elowen-send", out)
    result = await tmux_service.send_text("elowen-send", payload)
    assert (result.pasted, result.enters) == (False, 1)
    expected = payload.encode() + b"\n"
    await wait_for(lambda: file_reader(out)() == expected)


async def test_multiline_4k_arrives_exactly(tmux_service: TmuxService, tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    await _cat_session(tmux_service, "elowen-paste", out)
    text = _multiline_4k()
    result = await tmux_service.send_text("elowen-paste", text)
    assert result.pasted
    expected = text.encode() + b"\n"
    await wait_for(lambda: file_reader(out)() == expected)
    # The unique paste buffer was deleted after pasting.
    assert not [b for b in await tmux_service.command("list-buffers", "-F", "#{buffer_name}") if b.startswith("elowen-")]


async def test_multiline_into_raw_program(tmux_service: TmuxService, tmp_path: Path) -> None:
    """A raw-mode program (as the agent CLIs are) receives the pasted lines, CR-separated as a
    terminal paste delivers them, then the Enter."""
    out = tmp_path / "out.bin"
    await tmux_service.spawn("elowen-raw", [PYTHON, COMPOSER, str(out), "0"])
    await _wait_screen(tmux_service, "elowen-raw", "composer ready")
    await tmux_service.send_text("elowen-raw", "one\ntwo;\n-R")
    await wait_for(lambda: file_reader(out)() == b"one\rtwo;\r-R\n")


async def _wait_screen(tmux: TmuxService, name: str, needle: str) -> None:
    with trio.fail_after(5):
        while needle not in await tmux.capture(name):
            await trio.sleep(0.02)


async def test_submit_false_and_send_keys(tmux_service: TmuxService, tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    await _cat_session(tmux_service, "elowen-keys", out)
    result = await tmux_service.send_text("elowen-keys", "12", submit=False)
    assert result.enters == 0
    await tmux_service.send_keys("elowen-keys", "3", "Enter")
    await wait_for(lambda: file_reader(out)() == b"123\n")
    for bad in ("-R", ";", "a b", "Enter;", "", "C-", "#{x}"):
        with pytest.raises(ValueError):
            await tmux_service.send_keys("elowen-keys", bad)
    for good in ("Enter", "Escape", "Up", "Down", "C-c", "1", "y", "BTab", "F12", "M-Enter"):
        assert check_key(good) == good


async def test_verify_confirms_first_enter(tmux_service: TmuxService, tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    await tmux_service.spawn("elowen-v0", [PYTHON, COMPOSER, str(out), "0"])
    await _wait_screen(tmux_service, "elowen-v0", "composer ready")
    result = await tmux_service.send_text("elowen-v0", "please fix the bug", verify=True)
    assert (result.enters, result.verified) == (1, True)
    assert out.read_bytes() == b"please fix the bug\n"


async def test_verify_resends_a_dropped_enter(tmux_service: TmuxService, tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    await tmux_service.spawn("elowen-v1", [PYTHON, COMPOSER, str(out), "1"])
    await _wait_screen(tmux_service, "elowen-v1", "composer ready")
    result = await tmux_service.send_text("elowen-v1", "second try", verify=True, verify_timeout=0.5)
    assert (result.enters, result.verified) == (2, True)
    assert out.read_bytes() == b"second try\n"


async def test_verify_reports_failure(tmux_service: TmuxService, tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    await tmux_service.spawn("elowen-vx", [PYTHON, COMPOSER, str(out), "-1"])
    await _wait_screen(tmux_service, "elowen-vx", "composer ready")
    with pytest.raises(SubmitNotConfirmed):
        await tmux_service.send_text("elowen-vx", "never taken", verify=True, verify_timeout=0.3)
    assert not out.exists()


def test_needs_paste_and_composer_check() -> None:
    assert not needs_paste("plain; -R 日本語\ttab")
    assert needs_paste("a\nb") and needs_paste("a\rb") and needs_paste("\x1b[A")
    screen = "history\n> fix it\n\n"
    assert not composer_emptied("fix it", screen)
    assert composer_emptied("fix it", "sent 6 bytes\n> \n")
    assert not composer_emptied("long\ntext", "> [Pasted text #1 +2 lines]\n")
    assert composer_emptied("", "> x\n")

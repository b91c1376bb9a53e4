"""The control-mode protocol helpers (pure functions) and names, without tmux."""

from __future__ import annotations

import pytest

from elowen_builtins.tmux import InvalidNameError, check_name, pane_target, sanitize_name, session_target
from elowen_builtins.tmux.protocol import Notification, Output, decode_octal, format_command, parse_block_line, parse_notification, quote_arg


def test_quote_arg_single_quotes_and_apostrophes() -> None:
    assert quote_arg("a;") == "'a;'"
    assert quote_arg("") == "''"
    assert quote_arg("it's") == "'it'\"'\"'s'"


def test_quote_arg_control_characters_use_double_quote_escapes() -> None:
    assert quote_arg("a\nb") == '"a\\nb"'
    assert quote_arg('$x "\\" \x1b\t\r') == '"\\$x \\"\\\\\\" \\033\\t\\r"'
    with pytest.raises(ValueError):
        quote_arg("a\x00b")


def test_format_command() -> None:
    assert format_command(["send-keys", "-t", "=a:", "-l", "--", "-R"]) == b"send-keys '-t' '=a:' '-l' '--' '-R'\n"
    with pytest.raises(ValueError):
        format_command([])
    with pytest.raises(ValueError):
        format_command(["kill-server;"])


def test_decode_octal() -> None:
    assert decode_octal(b"plain") == b"plain"
    assert decode_octal(b"a\\015\\012b\\134c") == b"a\r\nb\\c"
    assert decode_octal(b"\\033[31m") == b"\x1b[31m"


def test_parse_output_notifications() -> None:
    assert parse_notification(b"%output %3 hi\\015\\012") == Output("%3", b"hi\r\n")
    assert parse_notification(b"%output %3 ") == Output("%3", b"")
    assert parse_notification(b"%output %3 two words") == Output("%3", b"two words")
    assert parse_notification(b"%extended-output %7 12 : x : y\\012") == Output("%7", b"x : y\n")
    assert parse_notification("%output %1 日本".encode()) == Output("%1", "日本".encode())


@pytest.mark.parametrize(
    ("line", "name", "args"),
    [
        (b"%exit", "exit", ()),
        (b"%exit detached", "exit", ("detached",)),
        (b"%session-changed $1 demo", "session-changed", ("$1", "demo")),
        (b"%window-close @4", "window-close", ("@4",)),
        (b"%pane-mode-changed %2", "pane-mode-changed", ("%2",)),
        (b"%pause %2", "pause", ("%2",)),
        (b"%something-new \xff\xfe", "something-new", ("\ufffd\ufffd",)),
    ],
)
def test_parse_other_notifications(line: bytes, name: str, args: tuple[str, ...]) -> None:
    assert parse_notification(line) == Notification(name, args)


def test_parse_block_line() -> None:
    assert parse_block_line(b"%begin 1796043042 273 1") == ("begin", b"1796043042 273", 1)
    assert parse_block_line(b"%end 1796043042 273 0") == ("end", b"1796043042 273", 0)
    assert parse_block_line(b"%error 1 2 1") == ("error", b"1 2", 1)
    assert parse_block_line(b"%end of story") is None
    assert parse_block_line(b"%output %1 x") is None


@pytest.mark.parametrize("bad", ["", "a.b", "a:b", "-R", "a b", "x" * 65, "é", "a/b", "=a", "=a:"])
def test_check_name_refuses(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        check_name(bad)


def test_names_and_targets() -> None:
    assert check_name("elowen-a-1") == "elowen-a-1"
    assert sanitize_name("Task 7: fix.bug") == "Task-7-fix-bug"
    assert sanitize_name("--x--") == "x"
    assert len(sanitize_name("a" * 100)) == 64
    with pytest.raises(InvalidNameError):
        sanitize_name("...")
    assert session_target("elowen-a-1") == "=elowen-a-1:"
    assert pane_target("elowen-a-1") == "=elowen-a-1:"
    assert pane_target("elowen-a-1", 0, 0) == "=elowen-a-1:0.0"
    assert pane_target("%12") == "%12"
    assert pane_target("=elowen-a-1:") == "=elowen-a-1:"
    assert pane_target("=elowen-a-1:0.1") == "=elowen-a-1:0.1"
    with pytest.raises(InvalidNameError):
        pane_target("%12", 0, 0)
    with pytest.raises(InvalidNameError):
        pane_target("a.b")

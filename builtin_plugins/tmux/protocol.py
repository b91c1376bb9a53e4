"""The tmux control-mode wire protocol (tmux 3.2+; checked against 3.3a), pure functions.

Source: tmux wiki "Control Mode" and tmux(1) "CONTROL MODE". In short:

* The client writes one command line per ``\\n``; an empty line detaches, so none is ever sent.
  Arguments are quoted by the tmux command parser rules (:func:`quote_arg`).
* Each command's reply is framed ``%begin TIME NUM FLAGS`` … ``%end TIME NUM FLAGS`` (or
  ``%error …``); ``FLAGS & 1`` marks a command this client sent. Reply lines are raw bytes.
* Everything else is a notification: ``%output %PANE DATA`` (DATA with bytes below 0x20 and ``\\``
  escaped as ``\\ooo`` octal), ``%extended-output %PANE AGE … : DATA`` (when ``pause-after`` flow
  control is on), ``%pause %PANE``, ``%continue %PANE``, ``%exit [REASON]``,
  ``%session-changed``, ``%window-close``, ``%pane-mode-changed``, … (unknown ones are kept as
  :class:`Notification`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Notification", "Output", "decode_octal", "format_command", "parse_block_line", "parse_notification", "quote_arg"]

_OCTAL_RE = re.compile(rb"\\([0-7]{3})")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_DQ_RE = re.compile(r'[\x00-\x1f\x7f\\"$]')
_DQ_NAMED = {"\\": "\\\\", '"': '\\"', "$": "\\$", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote_arg(arg: str) -> str:
    r"""Quote one argument for the tmux command parser (tmux(1) "PARSING SYNTAX").

    Printable text goes in single quotes (no expansion, no escapes inside), each ``'`` written
    as ``"'"``; adjacent quoted parts join into one word: ``a;`` → ``'a;'``, ``it's`` →
    ``'it'"'"'s'``. Text with control characters (line breaks included, which would otherwise
    end the command line) goes in double quotes with ``\\``, ``\"``, ``\$``, ``\n``, ``\r``,
    ``\t`` and ``\ooo`` escapes (a leading ``~`` stays single-quoted: tmux expands it).

    Raises:
        ValueError: ``arg`` holds a NUL byte.
    """
    if "\x00" in arg:
        raise ValueError("tmux arguments cannot contain NUL")
    if not _CONTROL_RE.search(arg):
        return "'" + arg.replace("'", "'\"'\"'") + "'"
    # A double-quoted word starting with ~ gets home-directory expansion: keep ~ single-quoted.
    lead = "'~'" if arg.startswith("~") else ""
    return lead + '"' + _DQ_RE.sub(_dq_escape, arg[len(lead) and 1 :]) + '"'


def _dq_escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    return _DQ_NAMED.get(ch) or f"\\{ord(ch):03o}"


def format_command(argv: tuple[str, ...] | list[str]) -> bytes:
    """One control-mode command line (UTF-8, ending in ``\\n``) for ``argv``; the command name
    itself is left bare.

    Raises:
        ValueError: empty ``argv``, a bad command name, or a NUL in an argument.
    """
    if not argv:
        raise ValueError("empty tmux command")
    name, *args = argv
    if not re.fullmatch(r"[a-z][a-z-]*", name):
        raise ValueError(f"bad tmux command name {name!r}")
    return (" ".join([name, *(quote_arg(a) for a in args)]) + "\n").encode("utf-8")


def decode_octal(data: bytes) -> bytes:
    """Undo control mode's ``\\ooo`` escapes: ``b"a\\\\015\\\\012"`` → ``b"a\\r\\n"``."""
    if b"\\" not in data:
        return data
    return _OCTAL_RE.sub(lambda m: bytes((int(m.group(1), 8) & 0xFF,)), data)


@dataclass(frozen=True, slots=True)
class Output:
    """Bytes a pane wrote (``%output`` / ``%extended-output``), escapes decoded."""

    pane_id: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Notification:
    """Any other notification: ``name`` without the ``%`` (``"exit"``, ``"pause"``, …) and the
    space-separated arguments as text."""

    name: str
    args: tuple[str, ...] = ()


def parse_notification(line: bytes) -> Output | Notification:
    """Parse one notification line (without its ``\\n``); never raises on odd input."""
    if line.startswith(b"%output "):
        _, pane, *rest = line.split(b" ", 2)
        return Output(pane.decode("ascii", "replace"), decode_octal(rest[0] if rest else b""))
    if line.startswith(b"%extended-output "):
        head, _, data = line.partition(b" : ")
        parts = head.split(b" ")
        pane = parts[1].decode("ascii", "replace") if len(parts) > 1 else ""
        return Output(pane, decode_octal(data))
    text = line.decode("utf-8", "replace")
    name, *args = text.split(" ")
    return Notification(name.lstrip("%"), tuple(args))


def parse_block_line(line: bytes) -> tuple[str, bytes, int] | None:
    """For ``%begin``/``%end``/``%error`` lines: ``(kind, b"TIME NUM", flags)``; else ``None``."""
    for kind in ("begin", "end", "error"):
        prefix = b"%" + kind.encode() + b" "
        if line.startswith(prefix):
            parts = line[len(prefix) :].split(b" ")
            if len(parts) == 3 and all(p.isdigit() for p in parts):
                return kind, parts[0] + b" " + parts[1], int(parts[2])
            return None
    return None

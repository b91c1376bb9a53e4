"""A small stand-in for a coding-agent CLI, for integration tests and the deriver benchmark.

It draws REAL captured Claude Code 2.1.197 screens (``tests/fixtures/screens/claude/``) on its
terminal: working, then ``FAKE_PROMPTS`` permission prompts (each waits for one key: ``1``/Enter
approve, ``3``/Escape reject), then the idle screen. It appends one JSON line per event to
``FAKE_LOG``: ``{"event": "trust"|"trust_key"|"prompt"|"key"|"idle"|"input", "n"?, "key"?, "text"?, "wall": time.time()}``
(``input``: what was typed at the idle screen, as read, ``Enter`` for a lone carriage return).

Environment: ``FAKE_PROMPTS`` (default 1), ``FAKE_LOG``, ``FAKE_AFTER`` (``idle``: stay at the
idle screen, default; ``exit``: exit 0), ``FAKE_WORK`` (seconds on the working screen, 0.3),
``FAKE_TRUST`` (set: first the folder-trust dialog, waiting for one key), ``FAKE_REFUSE``
(set: print it on stderr and exit with status 1 at once, like a CLI refusing to start).
Arguments are ignored (it is started like the real CLI).
"""

from __future__ import annotations

import json
import os
import sys
import termios
import time
import tty
from pathlib import Path

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "claude"


def _screen(name: str) -> str:
    lines = (SCREENS / name).read_text(encoding="utf-8").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return "\x1b[H\x1b[2J" + "\r\n".join(lines)


def _log(event: str, **data: object) -> None:
    path = os.environ.get("FAKE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, "wall": time.time(), **data}) + "\n")


def _show(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _read_key(fd: int) -> str:
    data = os.read(fd, 16)
    if data.startswith(b"\x1b") and len(data) == 1:
        return "Escape"
    if data in (b"\r", b"\n"):
        return "Enter"
    return data.decode("utf-8", "replace")


def main() -> int:
    refuse = os.environ.get("FAKE_REFUSE")
    if refuse:
        sys.stderr.write(refuse + "\n")
        sys.stderr.flush()
        time.sleep(0.3)  # let the terminal draw it (a real CLI's exit races tmux's last read)
        return 1
    prompts = int(os.environ.get("FAKE_PROMPTS", "1"))
    work = float(os.environ.get("FAKE_WORK", "0.3"))
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        working, prompt, idle = _screen("05_working.txt"), _screen("06_permission_prompt.txt"), _screen("07_idle_finished_after_approve.txt")
        if os.environ.get("FAKE_TRUST"):
            _show(_screen("03_trust_prompt.txt"))
            _log("trust")
            _log("trust_key", key=_read_key(fd))
        for n in range(1, prompts + 1):
            _show(working)
            time.sleep(work)
            _show(prompt)
            _log("prompt", n=n)
            key = _read_key(fd)
            _log("key", n=n, key=key)
        _show(working)
        time.sleep(work)
        _show(idle)
        _log("idle", n=prompts)
        if os.environ.get("FAKE_AFTER", "idle") == "exit":
            return 0
        while True:
            _log("input", text=_read_key(fd))
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


if __name__ == "__main__":
    raise SystemExit(main())

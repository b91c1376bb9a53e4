"""A tiny composer for send-path tests, run in a tmux pane (raw mode).

Usage: ``composer.py OUT IGNORE`` — shows typed text on the last line after ``> ``; Enter
appends the composed text and a newline to OUT and clears the composer, except that the first
IGNORE Enter presses are ignored (``-1``: all), like a CLI that drops an early Enter. It turns
on bracketed paste (as the agent CLIs do): a CR inside ``ESC[200~`` … ``ESC[201~`` is text.
"""

import os
import sys
import termios
import tty

out, ignore = sys.argv[1], int(sys.argv[2])
fd = sys.stdin.fileno()
saved = termios.tcgetattr(fd)
tty.setraw(fd)
buf = b""
sys.stdout.write("\x1b[?2004hcomposer ready\r\n> ")
sys.stdout.flush()
try:
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        for byte in chunk:
            ch = bytes((byte,))
            in_paste = buf.count(b"\x1b[200~") > buf.count(b"\x1b[201~")
            if ch == b"\r" and in_paste:
                buf += ch
                continue
            if ch == b"\r" and ignore != 0:
                ignore -= 1 if ignore > 0 else 0
                continue
            if ch == b"\r":
                with open(out, "ab") as f:
                    f.write(buf.replace(b"\x1b[200~", b"").replace(b"\x1b[201~", b"") + b"\n")
                sys.stdout.write(f"\r\x1b[Ksent {len(buf)} bytes\r\n> ")
                buf = b""
            else:
                buf += ch
                sys.stdout.buffer.write(ch)
            sys.stdout.flush()
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, saved)

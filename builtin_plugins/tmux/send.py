"""The send path: literal text, paste buffers for multi-line text, a pause before Enter, and a
check that the composer emptied.

Rules (PITFALLS 8–10; observed with Claude Code 2.1, Codex 0.171, OpenCode, Kilo in tmux 3.3a):

* ``send-keys`` without ``-l --`` reads text starting with ``-`` as flags (``-R`` resets the
  terminal) and eats a trailing ``;``: single-line text goes as ``send-keys -l -- TEXT``.
* Multi-line text sent with ``send-keys`` submits line by line: it goes into a uniquely named
  buffer (``load-buffer -`` from stdin) and is pasted with ``paste-buffer -p -d`` (bracketed
  when the program asked for it; the buffer is deleted after pasting).
* Enter sent in the same instant as the text is dropped (Claude) or becomes a newline (Codex,
  < ~120 ms): wait ``enter_delay`` (default 0.5 s) first.
* Verify: after Enter the text must leave the bottom lines of the screen; Claude Code shows long
  pastes as ``[Pasted text #N +M lines]`` and may ignore the first Enter; Enter is resent once.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from elowen_sdk.services.tmux import SendResult

from .errors import SubmitNotConfirmed

__all__ = ["KEY_RE", "SendResult", "check_key", "composer_emptied", "needs_paste", "send_keys", "send_text"]

KEY_RE = re.compile(r"^(?:[CMS]-){0,3}(?:[A-Za-z][A-Za-z0-9]{0,15}|[0-9]|F[0-9]{1,2})$")
"""Named keys ``send_keys`` accepts: tmux key names (``Enter``, ``Escape``, ``Up``, ``BSpace``,
``Tab``, ``BTab``, ``PageUp``…), single letters and digits, with ``C-``/``M-``/``S-`` modifiers."""

PENDING_MARKERS = ("[Pasted text #",)
"""Bottom-of-screen text meaning a paste is still waiting in the composer (Claude Code 2.x)."""


class _Tmux(Protocol):
    async def command(self, *argv: str) -> list[str]: ...

    async def capture(self, target: str, *, escapes: bool = False) -> str: ...

    async def load_buffer(self, name: str, data: bytes) -> None: ...


def check_key(key: str) -> str:
    """Return ``key`` if :data:`KEY_RE` accepts it.

    Raises:
        ValueError: anything else (text must go through ``send_text``).
    """
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise ValueError(f"not a key name: {key!r} (use send_text for text)")
    return key


def needs_paste(text: str) -> bool:
    """Whether ``text`` must go through a paste buffer: it holds a line break or another
    control character (tab excepted)."""
    return any((ord(c) < 0x20 and c != "\t") or c == "\x7f" for c in text)


def composer_emptied(text: str, screen: str, lines: int = 4) -> bool:
    """Default submission check: the last non-blank line of ``text`` (its last 40 characters,
    stripped) no longer shows in the last ``lines`` non-blank lines of ``screen``, and no
    :data:`PENDING_MARKERS` shows there either."""
    tail = [ln for ln in screen.splitlines() if ln.strip()][-lines:]
    if any(m in ln for ln in tail for m in PENDING_MARKERS):
        return False
    text_lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not text_lines:
        return True
    probe = text_lines[-1][-40:].strip()
    return not any(probe in ln for ln in tail)


async def send_keys(tmux: _Tmux, target: str, keys: Sequence[str]) -> None:
    """Press named keys in order (``send-keys -t TARGET -- KEY…``).

    Raises:
        ValueError: a key name :func:`check_key` refuses.
        TmuxCommandError: tmux refused (e.g. no such pane).
    """
    names = [check_key(k) for k in keys]
    if names:
        await tmux.command("send-keys", "-t", target, "--", *names)


async def send_text(
    tmux: _Tmux,
    target: str,
    text: str,
    *,
    submit: bool = True,
    enter_delay: float = 0.5,
    verify: bool = False,
    verify_timeout: float = 2.0,
    submitted: Callable[[str], bool] | None = None,
) -> SendResult:
    """Type ``text`` into the pane at ``target`` (exact target) and optionally press Enter.

    Args:
        submit: press Enter after ``enter_delay`` seconds.
        verify: after Enter, poll the screen (every 0.1 s, up to ``verify_timeout`` s) until
            ``submitted(screen)`` is true (default :func:`composer_emptied`); if not, press
            Enter once more and poll again.
        submitted: a CLI-specific check of the rendered screen.

    Raises:
        SubmitNotConfirmed: ``verify`` and the check still failed after the second Enter.
        TmuxCommandError: tmux refused (e.g. no such pane).
    """
    pasted = needs_paste(text)
    if pasted:
        buffer = f"elowen-{uuid.uuid4().hex[:16]}"
        try:
            await tmux.load_buffer(buffer, text.encode("utf-8"))
            await tmux.command("paste-buffer", "-p", "-d", "-b", buffer, "-t", target)
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                with contextlib.suppress(Exception):  # already gone, or the client closed: nothing to clean
                    await tmux.command("delete-buffer", "-b", buffer)
            raise
    elif text:
        await tmux.command("send-keys", "-t", target, "-l", "--", text)
    if not submit:
        return SendResult(pasted, 0, False)
    await trio.sleep(enter_delay)
    await tmux.command("send-keys", "-t", target, "Enter")
    if not verify:
        return SendResult(pasted, 1, False)
    check = submitted or (lambda screen: composer_emptied(text, screen))
    for enters in (1, 2):
        if enters == 2:
            await tmux.command("send-keys", "-t", target, "Enter")
        with trio.move_on_after(verify_timeout):
            while True:
                await trio.sleep(0.1)
                if check(await tmux.capture(target)):
                    return SendResult(pasted, enters, True)
    raise SubmitNotConfirmed(f"text still in the composer of {target} after two Enter presses")

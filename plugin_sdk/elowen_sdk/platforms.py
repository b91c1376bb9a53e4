"""Helpers every chat-platform adapter needs (Discord, WhatsApp, a third party's): secrets read
from files with mode 0600, replies cut to a platform's size limit, replayed deliveries
deduplicated, one sender's messages handled one at a time in arrival order, and the stranger
rule.

The stranger rule (the product's): a message from someone who is not a linked Elowen account
gets **no answer** and is counted. Linking is opt-in per platform: with ``pairing`` on, a
stranger who asks for it (a direct message ``link``) gets a one-time link code, at most one
live code per sender and at most ``max_pending`` live codes per platform; everything else a
stranger sends stays unanswered. :class:`StrangerGate` keeps that rule and its counters.
"""

from __future__ import annotations

import os
import stat
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any, Generic, TypeVar

from .errors import ElowenError

__all__ = ["PAIRING_WORDS", "RecentIds", "SecretError", "SenderQueues", "StrangerGate", "approval_command", "chunk_text", "mask", "read_secret"]

T = TypeVar("T")

PAIRING_WORDS = frozenset({"link", "/link", "pair", "/pair"})
"""What a stranger writes (in a direct message, case-insensitive) to ask for a link code."""


_APPROVAL_WORDS = {"approve": "/allow", "allow": "/allow", "yes": "/allow", "reject": "/reject", "deny": "/reject", "no": "/reject"}


def approval_command(text: str) -> str:
    """Plain-word answers to an approval as the brain's chat commands: ``"approve 12"`` /
    ``"allow #12"`` / ``"yes 12"`` → ``"/allow 12"``, ``"reject 12"`` / ``"deny 12"`` /
    ``"no 12"`` → ``"/reject 12"`` (case-insensitive); any other text is returned unchanged."""
    words = text.strip().split()
    if len(words) == 2 and words[0].lower() in _APPROVAL_WORDS:
        number = words[1].lstrip("#")
        if number.isascii() and number.isdigit():
            return f"{_APPROVAL_WORDS[words[0].lower()]} {number}"
    return text


class SecretError(ElowenError):
    """A secret file is missing, empty, too large or readable by others (the message says which
    and how to fix it; it never contains the secret)."""


def read_secret(path: Path, *, max_bytes: int = 4096) -> str:
    """The secret stored in ``path`` (surrounding whitespace stripped).

    The file must be a regular file of the current user with no group/other permission bits
    (``chmod 600``), so a secret never sits world-readable next to a config file.

    Raises:
        SecretError: missing, not a regular file, mode not 0600-like, empty, or larger than
            ``max_bytes``.
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise SecretError(f"secret file {path} does not exist (write it with mode 0600)") from None
    except OSError as exc:
        raise SecretError(f"secret file {path} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SecretError(f"secret file {path} is not a regular file")
    if info.st_mode & 0o077:
        raise SecretError(f"secret file {path} has mode {stat.S_IMODE(info.st_mode):o}; run `chmod 600 {path}`")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise SecretError(f"secret file {path} is not owned by the user running Elowen")
    if info.st_size > max_bytes:
        raise SecretError(f"secret file {path} is larger than {max_bytes} bytes")
    text = path.read_text(encoding="utf-8").strip()
    if not text:
        raise SecretError(f"secret file {path} is empty")
    return text


def mask(secret: str) -> str:
    """A secret as it may be shown: its last 4 characters only (``"…a1b2"``); ``""`` stays
    ``""``."""
    if not secret:
        return ""
    return "…" + secret[-4:] if len(secret) > 8 else "…"


def chunk_text(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters, preferring paragraph, line and
    word boundaries; an empty text gives ``[]``.

    Raises:
        ValueError: ``limit`` < 16.
    """
    if limit < 16:
        raise ValueError("limit: at least 16 characters")
    text = text.strip()
    out: list[str] = []
    while len(text) > limit:
        window = text[:limit]
        cut = max(window.rfind("\n\n"), -1)
        if cut < limit // 2:
            cut = window.rfind("\n")
        if cut < limit // 2:
            cut = window.rfind(" ")
        if cut < limit // 2:
            cut = limit
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return out


class RecentIds:
    """The last ``size`` message ids seen, to drop replayed deliveries (a platform retries a
    webhook, a gateway replays events after RESUME)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self.duplicates = 0

    def seen(self, message_id: str) -> bool:
        """``True`` if ``message_id`` was seen before (counted in :attr:`duplicates`);
        otherwise records it and returns ``False``."""
        if message_id in self._ids:
            self._ids.move_to_end(message_id)
            self.duplicates += 1
            return True
        self._ids[message_id] = None
        if len(self._ids) > self.size:
            self._ids.popitem(last=False)
        return False


class SenderQueues(Generic[T]):
    """One sender's messages handled one at a time, in the order they arrived; different
    senders' at the same time.

    ``put(sender, item, spawn)`` is synchronous and is called in arrival order (an adapter's
    consumer loop); it queues ``item`` behind the sender's earlier ones and, when the sender
    had none, starts one drain task with ``spawn`` (a nursery's ``start_soon``) that awaits
    ``handle(item)`` for each queued item in turn. (A task per message waiting on a per-sender
    lock does not keep the order: trio runs each batch of runnable tasks in a random order.)
    ``handle`` must not raise (log inside it); if it does, the sender's queue is dropped and
    the error propagates to the nursery. A cancelled drain drops what was still queued.

    Args:
        handle: awaited once per item.
        limit: items one sender may have queued or being handled; past it :meth:`put` refuses
            (a flood from one sender cannot grow memory or hold a turn slot for hours).
    """

    def __init__(self, handle: Callable[[T], Awaitable[None]], *, limit: int = 50) -> None:
        self._handle = handle
        self.limit = limit
        self._queues: dict[Hashable, deque[T]] = {}
        self.refused = 0
        """Items :meth:`put` refused because their sender's queue was full."""

    def put(self, sender: Hashable, item: T, spawn: Callable[..., Any]) -> bool:
        """Queue ``item`` for ``sender`` (see the class docstring); ``False`` (counted in
        :attr:`refused`) when the sender already has :attr:`limit` items."""
        queue = self._queues.get(sender)
        if queue is not None:
            if len(queue) >= self.limit:
                self.refused += 1
                return False
            queue.append(item)
            return True
        queue = self._queues[sender] = deque([item])
        try:
            spawn(self._drain, sender, queue)
        except BaseException:
            self._queues.pop(sender, None)
            raise
        return True

    async def _drain(self, sender: Hashable, queue: deque[T]) -> None:
        try:
            while queue:
                await self._handle(queue[0])
                queue.popleft()
        finally:
            if self._queues.get(sender) is queue:
                del self._queues[sender]

    def waiting(self, sender: Hashable) -> int:
        """How many of ``sender``'s items are queued or being handled."""
        queue = self._queues.get(sender)
        return len(queue) if queue is not None else 0

    def __len__(self) -> int:
        """Senders with an item queued or being handled."""
        return len(self._queues)


class StrangerGate:
    """The stranger rule of one platform (see the module docstring).

    Args:
        pairing: whether strangers may ask for a link code at all (off by default in every
            adapter's config).
        max_pending: live link codes this platform may have at once.
        ttl: seconds a code stays live (the brain's code lifetime).
        clock: monotonic seconds.
    """

    def __init__(self, *, pairing: bool, max_pending: int = 20, ttl: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.pairing = pairing
        self.max_pending = max_pending
        self.ttl = ttl
        self.clock = clock
        self.silenced = 0
        """Messages of strangers left unanswered."""
        self.codes_refused = 0
        """Pairing requests refused because the platform's pending-code cap was reached."""
        self._pending: dict[str, float] = {}

    def may_pair(self, platform_user: str, text: str, *, direct: bool) -> bool:
        """Whether this stranger's message is a pairing request to answer with a link code.
        ``False`` means: stay silent (the message is counted in :attr:`silenced`)."""
        now = self.clock()
        self._pending = {u: t for u, t in self._pending.items() if t > now}
        wants = self.pairing and direct and text.strip().lower() in PAIRING_WORDS
        if not wants or platform_user in self._pending:
            self.silenced += 1
            return False
        if len(self._pending) >= self.max_pending:
            self.codes_refused += 1
            self.silenced += 1
            return False
        self._pending[platform_user] = now + self.ttl
        return True

    def linked(self, platform_user: str) -> None:
        """The sender is linked now: their pending code no longer counts."""
        self._pending.pop(platform_user, None)

    @property
    def pending(self) -> int:
        now = self.clock()
        return sum(1 for t in self._pending.values() if t > now)

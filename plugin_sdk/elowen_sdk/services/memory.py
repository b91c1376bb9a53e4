"""The ``memory`` service: per-user long-term memory (offered by a ``memory`` plugin).

A consumer declares ``service:memory`` and asks ``memory = ctx.service(MemoryService)``. Every
call names the user whose memories it touches; a user's memories are never returned for
another user. A write never waits on embeddings (they are computed in the background), and an
update or a forget *supersedes* a memory: its old text is kept, out of recall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..contracts import service_contract
from ..errors import ElowenError

__all__ = ["InvalidMemory", "Memory", "MemoryNotFound", "MemoryService", "Provenance"]


class InvalidMemory(ElowenError, ValueError):
    """A memory's fields are not acceptable (empty or too long text, a NUL byte, importance
    outside 0–1, a bad kind); the message names the field."""


class MemoryNotFound(ElowenError, LookupError):
    """No memory of that id belongs to that user (or it is not current when a current one is
    needed). Another user's memory is reported exactly like a missing one."""


Provenance = Literal["owner", "untrusted"]
"""Where a memory's text came from: the user's own words (``owner``), or text nobody vouches
for (a platform sender, tool output, a web page: ``untrusted``)."""


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered fact.

    Attributes:
        id: the memory's id.
        user_id: whose memory it is.
        text: the fact, one or two sentences of plain text.
        kind: ``fact``, ``preference``, ``project``, ``person``… (free word, lower case).
        importance: 0.0 (trivia) to 1.0 (essential).
        source: who wrote it: ``manual``, ``curator``, a tool's name…
        provenance: see :data:`Provenance`.
        project_id: the project it is scoped to, or ``None`` (everywhere).
        created_at, updated_at: UTC ISO 8601.
        last_used_at: when recall last returned it (UTC ISO 8601), ``None`` if never.
        use_count: how many times recall returned it.
        superseded_by: the memory that replaced it, or ``None`` (current); a forgotten memory
            has ``superseded_by = id`` (itself).
        score: the ranking score of the recall that returned it (0.0–1.0), 0.0 elsewhere.
    """

    id: int
    user_id: int
    text: str
    kind: str = "fact"
    importance: float = 0.5
    source: str = "manual"
    provenance: Provenance = "owner"
    project_id: int | None = None
    created_at: str = ""
    updated_at: str = ""
    last_used_at: str | None = None
    use_count: int = 0
    superseded_by: int | None = None
    score: float = 0.0


@service_contract("memory")
class MemoryService(Protocol):
    """Per-user long-term memory (service ``"memory"``)."""

    async def remember(
        self,
        user_id: int,
        text: str,
        *,
        kind: str = "fact",
        importance: float = 0.5,
        source: str = "manual",
        provenance: Provenance = "owner",
        project_id: int | None = None,
        supersedes: int | None = None,
        conversation_id: str | None = None,
        message_id: str | None = None,
    ) -> Memory:
        """Store a memory of ``user_id`` (stored as plain text at once; embedded later) and
        return it. With ``supersedes``, the new memory replaces that one (an update).
        ``conversation_id``/``message_id`` name where it was learnt (kept and audited).

        Raises:
            InvalidMemory (a ``ValueError``): empty ``text``, ``importance`` outside 0–1.
            MemoryNotFound (a ``LookupError``): ``supersedes`` is not a current memory of
                ``user_id``.
        """
        ...

    async def recall(self, user_id: int, query: str, *, limit: int = 6, project_id: int | None = None, bump: bool = True) -> list[Memory]:
        """The current memories of ``user_id`` most relevant to ``query``, best first (at most
        ``limit``; ``project_id``: that project's and the unscoped ones). Bumps their use
        counts unless ``bump`` is false. Ranked by semantic similarity, keyword match,
        importance, recency and use."""
        ...

    async def forget(self, user_id: int, memory_id: int, *, actor: str | None = None) -> bool:
        """Take memory ``memory_id`` of ``user_id`` out of recall (its text is kept in its
        history); returns ``False`` when it is not a current memory of that user. ``actor``
        (default ``user:<id>``) is recorded as who forgot it (``curator`` for the curator)."""
        ...

    async def memories(self, user_id: int, *, include_superseded: bool = False, limit: int = 100) -> list[Memory]:
        """The memories of ``user_id``, newest first (at most ``limit``); only the current ones
        unless ``include_superseded``. Does not bump use counts."""
        ...

    async def history(self, user_id: int, memory_id: int) -> list[Memory]:
        """Every version of memory ``memory_id`` of ``user_id``, oldest first: the chain of
        updates it belongs to, ending with the current version (or a forgotten one).

        Raises:
            MemoryNotFound: no memory of that id belongs to ``user_id``.
        """
        ...

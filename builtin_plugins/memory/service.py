"""The ``memory`` service object (contract :class:`elowen_sdk.services.MemoryService`) and the
recall pipeline: candidates from FTS5 and from the vectors of the current embedding model,
the blend of :mod:`.ranking`, near-duplicate removal, a count and token budget, use counts.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from elowen_sdk import Store
from elowen_sdk.services.memory import InvalidMemory, Memory, MemoryNotFound, Provenance

from .embeddings import Embedder, EmbeddingError, unit
from .ranking import Candidate, Weights, blend, dedupe_and_cap, neighbours_of, with_neighbours
from .store import MemoryStore, to_memory
from .vectors import VectorIndex

__all__ = ["MemoryBackend", "RecallStats"]

log = logging.getLogger("elowen.plugin.memory.service")

CANDIDATES = 50
"""Candidates taken from each of FTS5 and the vectors before blending."""


@dataclass(slots=True)
class RecallStats:
    """Counters of the turn-start recall (shown by ``GET /memories/status``)."""

    recalls: int = 0
    misses: int = 0  # the time budget ran out: the turn went on without memories
    dense_skipped: int = 0  # the query could not be embedded (model still loading)
    last_ms: float = 0.0


@dataclass(slots=True)
class MemoryBackend:
    """What the plugin offers as service ``memory`` (and uses for its routes, tools and hook).

    Attributes:
        store: the tables.
        embedder: the embedding provider, or ``None``.
        weights: the blend weights.
        token_cap: the estimated-token budget of one recall (``None``: none).
        audit: the kernel store, for audit rows.
    """

    store: MemoryStore
    embedder: Embedder | None
    weights: Weights
    token_cap: int | None
    audit: Store
    actor: str = "memory"
    spawn: Any = None  # ctx.start_soon: background work in the plugin's nursery
    stats: RecallStats = field(default_factory=RecallStats)
    _query_cache: OrderedDict[str, Any] = field(default_factory=OrderedDict)

    # -- the contract -----------------------------------------------------------------------

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
        """See :meth:`elowen_sdk.services.MemoryService.remember`."""
        row = self.add(
            user_id,
            text,
            kind=kind,
            importance=importance,
            source=source,
            provenance=provenance,
            project_id=project_id,
            supersedes=supersedes,
            conversation_id=conversation_id,
            message_id=message_id,
        )
        return to_memory(row)

    async def recall(self, user_id: int, query: str, *, limit: int = 6, project_id: int | None = None, bump: bool = True) -> list[Memory]:
        """See :meth:`elowen_sdk.services.MemoryService.recall`."""
        return await self.search(user_id, query, limit=limit, project_id=project_id, bump=bump, token_cap=None)

    async def forget(self, user_id: int, memory_id: int, *, actor: str | None = None) -> bool:
        """See :meth:`elowen_sdk.services.MemoryService.forget`."""
        return self.forget_one(user_id, memory_id, actor=actor or f"user:{user_id}") is not None

    async def memories(self, user_id: int, *, include_superseded: bool = False, limit: int = 100) -> list[Memory]:
        """See :meth:`elowen_sdk.services.MemoryService.memories`."""
        return [to_memory(r) for r in self.store.list(user_id, include_superseded=include_superseded, limit=limit)]

    async def history(self, user_id: int, memory_id: int) -> list[Memory]:
        """See :meth:`elowen_sdk.services.MemoryService.history`."""
        return [to_memory(r) for r in self.store.history(user_id, memory_id)]

    # -- writes with audit ------------------------------------------------------------------

    def add(self, user_id: int, text: str, *, actor: str | None = None, supersedes: int | None = None, **fields: Any) -> dict[str, Any]:
        """Store a memory and write its audit row (``memory.add`` or ``memory.update``; the
        detail names ids, never text). Raises as :meth:`MemoryStore.add`."""
        who = actor or (f"user:{user_id}" if fields.get("source", "manual") == "manual" else str(fields.get("source")))
        row = self.store.add(user_id, text, actor=who, supersedes=supersedes, **fields)
        detail = {"user_id": user_id, "memory_id": row["id"], "kind": row["kind"], "source": row["source"], "provenance": row["provenance"], "by": who}
        if supersedes is not None:
            detail["supersedes"] = supersedes
        for key in ("conversation_id", "message_id"):
            if row.get(key):
                detail[key] = row[key]
        self.audit.audit(who if who.startswith("curator") else self.actor, "memory.update" if supersedes else "memory.add", f"memory:{row['id']}", "ok", detail)
        return row

    def forget_one(self, user_id: int, memory_id: int, *, actor: str) -> dict[str, Any] | None:
        """Forget a current memory of the user (audited ``memory.forget``); its row before, or
        ``None``."""
        row = self.store.forget(user_id, memory_id, actor=actor)
        if row is not None:
            self.audit.audit(
                actor if actor.startswith("curator") else self.actor, "memory.forget", f"memory:{memory_id}", "ok", {"user_id": user_id, "by": actor}
            )
        return row

    def purge(self, user_id: int, *, by: str) -> int:
        """Delete every memory of the user (an admin's action, audited ``memory.purge``)."""
        count = self.store.purge(user_id)
        self.audit.audit(self.actor, "memory.purge", f"user:{user_id}", "ok", {"user_id": user_id, "deleted": count, "by": by})
        return count

    # -- recall -----------------------------------------------------------------------------

    async def query_vector(self, query: str) -> Any | None:
        """The query's vector (cached for the last 256 queries), or ``None`` without a ready
        provider."""
        if self.embedder is None or not self.embedder.ready or not query.strip():
            return None
        cached = self._query_cache.get(query)
        if cached is not None:
            self._query_cache.move_to_end(query)
            return cached
        vector = unit((await self.embedder.embed([query]))[0])
        self._query_cache[query] = vector
        while len(self._query_cache) > 256:
            self._query_cache.popitem(last=False)
        return vector

    async def search(
        self,
        user_id: int,
        query: str,
        *,
        limit: int = 6,
        project_id: int | None = None,
        bump: bool = False,
        token_cap: int | None | bool = False,
        weights: Weights | None = None,
        dense: bool = True,
        keyword: bool = True,
        wait: bool = True,
    ) -> list[Memory]:
        """Rank the user's current memories for ``query`` (see the module docstring).
        ``token_cap``: ``False`` uses the backend's cap only for ``bump=True`` calls (recall);
        ``dense``/``keyword`` switch a signal's candidates off (the benchmark's single-signal
        baselines); ``wait=False`` (the turn-start recall): when the user's vectors are not in
        memory yet, start loading them in the background and rank without them this time
        (counted in ``dense_skipped``) instead of waiting. The query is embedded in a worker
        thread (the trio thread is free meanwhile)."""
        if not isinstance(query, str) or "\x00" in query:
            raise InvalidMemory("query: a string without NUL characters")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
            raise InvalidMemory("limit: an integer from 1 to 100")
        started = time.perf_counter()
        query = query[:2000]
        index = await self._index(user_id, wait=wait) if dense else None
        qv: Any = None
        box: list[Any] = []
        kw: dict[int, float] = {}
        if index is not None:  # only a user with vectors has the query embedded
            failed: list[Exception] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._embed_into, query, box)
                for _ in range(3):  # best effort: the embedding task gets to start its worker thread…
                    await trio.lowlevel.checkpoint()
                if keyword:  # …and the keyword query runs beside it (both release the GIL)
                    try:
                        kw = dict(self.store.keyword(user_id, query, limit=CANDIDATES, project_id=project_id))
                    except Exception as exc:  # raised as itself below, not inside an exception group
                        failed.append(exc)
            if failed:
                raise failed[0]
        elif keyword:
            kw = dict(self.store.keyword(user_id, query, limit=CANDIDATES, project_id=project_id))
        sem: dict[int, float] = {}
        vectors: dict[int, Any] = {}
        if index is not None:
            qv = box[0] if box else None
            if qv is None:
                self.stats.dense_skipped += 1
            else:
                sem, vectors = index.search(qv, top=CANDIDATES, also=list(kw))
        weights = weights or self.weights
        rows = {i: r for i, r in self.store.rows(user_id, list({*kw, *sem})).items() if project_id is None or r["project_id"] in (None, project_id)}
        candidates = set(rows)
        if weights.neighbour > 0:
            extra = {
                i: r for i, r in self.store.rows(user_id, sorted(neighbours_of(rows))).items() if r["conversation_id"] and (i - 1 in rows or i + 1 in rows)
            }
            extra = {i: r for i, r in extra.items() if any(rows.get(j, {}).get("conversation_id") == r["conversation_id"] for j in (i - 1, i + 1))}
            if extra and qv is not None and index is not None:
                more, more_vectors = index.search(qv, top=0, also=list(extra))
                sem.update(more)
                vectors.update(more_vectors)
            rows.update(extra)
        cands = [Candidate(i, sem.get(i), kw.get(i, 0.0), r) for i, r in rows.items()]
        ranked = with_neighbours(blend(cands, weights, dense=bool(sem)), candidates, weights.neighbour)
        cap = (self.token_cap if bump else None) if token_cap is False else token_cap
        kept = dedupe_and_cap(ranked, limit=limit, token_cap=cap if isinstance(cap, int) and not isinstance(cap, bool) else None, vectors=vectors)
        if bump:
            ids = [c.id for _, c in kept]
            if not wait and self.spawn is not None:  # the turn-start recall: counted after the turn has its context
                self.spawn(self._bump_later, user_id, ids)
            else:
                self.store.bump(user_id, ids)
            self.stats.recalls += 1
            self.stats.last_ms = (time.perf_counter() - started) * 1000
        return [to_memory(c.row, score=round(s, 4)) for s, c in kept]

    async def _bump_later(self, user_id: int, ids: list[int]) -> None:
        self.store.bump(user_id, ids)

    async def _embed_into(self, query: str, box: list[Any]) -> None:
        """``box.append(query vector)`` unless it cannot be embedded now (see :meth:`query_vector`)."""
        try:
            box.append(await self.query_vector(query))
        except EmbeddingError as exc:  # keyword recall goes on; the queue logs the provider's failures
            log.debug("query not embedded: %s", exc)
        except Exception:  # a provider's bug: keyword recall goes on, the daemon log says why
            log.warning("query not embedded: the embedding provider failed", exc_info=True)

    async def _index(self, user_id: int, *, wait: bool) -> VectorIndex | None:
        """The user's loaded vectors of the current model (``None``: no provider, no vectors,
        or — with ``wait`` false — not loaded yet, their load then started)."""
        if self.embedder is None:
            return None
        model = self.embedder.model_id
        if not self.store.loaded(user_id, model):
            event, first = self.store.loading(user_id, model)
            if first and self.spawn is not None:  # in the plugin's nursery: a recall cut by its budget leaves it going
                self.spawn(self.store.load_vectors, user_id, model)
            elif first:
                await self.store.load_vectors(user_id, model)
            if not wait and not self.store.loaded(user_id, model):
                self.stats.dense_skipped += 1
                await trio.lowlevel.checkpoint()  # the load gets its turns even when the caller's path has no other checkpoint
                return None
            await event.wait()
        return self.store.vectors(user_id, model)

    def status(self, user_id: int) -> Mapping[str, Any]:
        """Counters for ``GET /memories/status`` (the caller's own count only)."""
        model = self.embedder.model_id if self.embedder else None
        return {
            "memories": self.store.count(user_id),
            "embedding_model": model,
            "embedding_ready": bool(self.embedder and self.embedder.ready),
            "pending_embeddings": self.store.pending_count(model) if model else None,
            "recalls": self.stats.recalls,
            "misses": self.stats.misses,
            "dense_skipped": self.stats.dense_skipped,
            "last_recall_ms": round(self.stats.last_ms, 2),
        }

    def require(self, user_id: int, memory_id: int) -> dict[str, Any]:
        """Any version of the user's memory.

        Raises:
            MemoryNotFound: not a memory of the user.
        """
        row = self.store.row(user_id, memory_id)
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id}")
        return row

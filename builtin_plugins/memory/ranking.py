"""Recall ranking: a weighted blend of semantic similarity, keyword match (FTS5 BM25),
importance, recency and use, then near-duplicate removal and a budget.

Each signal is scaled to 0–1 over the candidate set before it is weighed:

* semantic: cosine similarity of L2-normalised vectors, ``max(0, cos)``; divided by the best
  candidate's so the blend does not depend on the model's similarity range;
* keyword: ``-bm25()`` divided by the best candidate's (0 for a memory with no matching word);
* importance: the memory's own 0–1;
* recency: ``0.5 ** (age_days / half_life_days)`` of ``updated_at``;
* use: ``log1p(use_count) / log1p(max use_count)`` among the candidates.

With no vectors (no provider, or the query could not be embedded in time) the semantic weight
is dropped and the others are renormalised, so keyword match leads.

**Neighbour context.** Memories learnt one after another in the same conversation (consecutive
ids, the same ``conversation_id``) explain each other: a question often matches the turn
before the one holding the answer. The neighbours of every candidate join the ranking with
their own signals, and each memory's score becomes ``(own + neighbour × best neighbour's
score) / (1 + neighbour)`` (a neighbour's score counts only when it was a candidate itself).
Memories without a conversation have no neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .store import normalise_text

__all__ = ["Candidate", "Weights", "blend", "dedupe_and_cap", "estimate_tokens", "neighbours_of", "with_neighbours"]


@dataclass(frozen=True, slots=True)
class Weights:
    """Blend weights (non-negative; they need not sum to 1) and the recency half-life."""

    semantic: float = 0.5
    keyword: float = 0.5
    importance: float = 0.04
    recency: float = 0.03
    use: float = 0.03
    half_life_days: float = 30.0
    neighbour: float = 0.3
    rrf_k: float = 0.0  # > 0: semantic and keyword enter by rank, (k + 1) / (k + rank), instead of by score

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Weights:
        """The weights of the plugin config keys ``weight_*`` and ``recency_half_life_days``."""
        return cls(
            float(config.get("weight_semantic", cls.semantic)),
            float(config.get("weight_keyword", cls.keyword)),
            float(config.get("weight_importance", cls.importance)),
            float(config.get("weight_recency", cls.recency)),
            float(config.get("weight_use", cls.use)),
            float(config.get("recency_half_life_days", cls.half_life_days)),
            float(config.get("weight_neighbour", cls.neighbour)),
            float(config.get("rrf_k", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """One memory with its raw signals."""

    id: int
    semantic: float | None  # cosine, None when the memory has no vector of the model
    keyword: float  # -bm25, 0 when no word matched
    row: Mapping[str, Any]


def _age_days(stamp: str | None, now: datetime) -> float:
    if not stamp:
        return 0.0
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return max(0.0, (now - then).total_seconds() / 86400.0)


def blend(candidates: Sequence[Candidate], weights: Weights, *, dense: bool, now: datetime | None = None) -> list[tuple[float, Candidate]]:
    """Score and sort ``candidates`` (best first) as the module docstring says. ``dense``:
    whether semantic scores are in play for this query. Scores are in 0–1."""
    if not candidates:
        return []
    now = now or datetime.now(UTC)
    best_sem = max((max(0.0, c.semantic) for c in candidates if c.semantic is not None), default=0.0)
    best_kw = max((c.keyword for c in candidates), default=0.0)
    max_use = max((int(c.row.get("use_count") or 0) for c in candidates), default=0)
    w_sem = weights.semantic if dense and best_sem > 0 else 0.0
    total = w_sem + weights.keyword + weights.importance + weights.recency + weights.use
    if total <= 0:
        total = 1.0
    sem_rank: dict[int, int] = {}
    kw_rank: dict[int, int] = {}
    if weights.rrf_k > 0:
        sem_rank = {c.id: r for r, c in enumerate(sorted((c for c in candidates if c.semantic is not None), key=lambda c: -(c.semantic or 0.0)), 1)}
        kw_rank = {c.id: r for r, c in enumerate(sorted((c for c in candidates if c.keyword > 0), key=lambda c: -c.keyword), 1)}
    out = []
    for c in candidates:
        if weights.rrf_k > 0:
            k = weights.rrf_k
            sem = (k + 1) / (k + sem_rank[c.id]) if (w_sem and c.id in sem_rank) else 0.0
            kw = (k + 1) / (k + kw_rank[c.id]) if c.id in kw_rank else 0.0
        else:
            sem = max(0.0, c.semantic) / best_sem if (w_sem and c.semantic is not None) else 0.0
            kw = c.keyword / best_kw if best_kw > 0 else 0.0
        imp = float(c.row.get("importance") or 0.0)
        rec = 0.5 ** (_age_days(c.row.get("updated_at"), now) / weights.half_life_days) if weights.half_life_days > 0 else 0.0
        use = math.log1p(int(c.row.get("use_count") or 0)) / math.log1p(max_use) if max_use > 0 else 0.0
        score = (w_sem * sem + weights.keyword * kw + weights.importance * imp + weights.recency * rec + weights.use * use) / total
        out.append((score, c))
    out.sort(key=lambda sc: (-sc[0], -sc[1].id))
    return out


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about 4 characters per token, at least 1)."""
    return max(1, (len(text) + 3) // 4)


def dedupe_and_cap(
    ranked: Sequence[tuple[float, Candidate]], *, limit: int, token_cap: int | None, vectors: Mapping[int, Any] | None = None
) -> list[tuple[float, Candidate]]:
    """The best ``limit`` of ``ranked`` without near-duplicates (the same normalised text, or
    cosine ≥ 0.95 between their vectors when ``vectors`` has both) and within ``token_cap``
    estimated tokens in all (``None``: no cap; the first memory is always kept)."""
    kept: list[tuple[float, Candidate]] = []
    texts: set[str] = set()
    tokens = 0
    for score, cand in ranked:
        if len(kept) >= limit:
            break
        key = normalise_text(str(cand.row.get("text", "")))
        if key in texts:
            continue
        vec = vectors.get(cand.id) if vectors else None
        if vec is not None and vectors is not None:
            if any(vectors.get(k.id) is not None and float(vec @ vectors[k.id]) >= 0.95 for _, k in kept):
                continue
        cost = estimate_tokens(key)
        if token_cap is not None and kept and tokens + cost > token_cap:
            continue
        kept.append((score, cand))
        texts.add(key)
        tokens += cost
    return kept


def neighbours_of(rows: Mapping[int, Mapping[str, Any]]) -> set[int]:
    """The ids next to the given memories (``id ± 1``) that are not among them; only memories
    with a ``conversation_id`` have neighbours (the caller keeps those of the same one)."""
    out = set()
    for mid, row in rows.items():
        if row.get("conversation_id"):
            out.update((mid - 1, mid + 1))
    return out - set(rows)


def with_neighbours(ranked: Sequence[tuple[float, Candidate]], candidates: set[int], weight: float) -> list[tuple[float, Candidate]]:
    """Rescore ``ranked`` with neighbour context (see the module docstring); ``candidates``
    are the ids whose own score may lift a neighbour."""
    if weight <= 0:
        return list(ranked)
    by_id = {c.id: (s, c) for s, c in ranked}
    out = []
    for score, cand in ranked:
        conv = cand.row.get("conversation_id")
        best = 0.0
        if conv:
            for other in (cand.id - 1, cand.id + 1):
                hit = by_id.get(other)
                if hit is not None and other in candidates and hit[1].row.get("conversation_id") == conv:
                    best = max(best, hit[0])
        out.append(((score + weight * best) / (1 + weight), cand))
    out.sort(key=lambda sc: (-sc[0], -sc[1].id))
    return out

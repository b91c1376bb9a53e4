"""One user's vectors of one embedding model in memory, and the nearest-neighbour search of
recall.

Storage (per vector of ``dim`` float32 components, L2-normalised):

* ``int8`` components with one float32 scale per row (``v ≈ q * scale``, ``scale = max|v| /
  127``): a quarter of the float32 size (100k vectors of 384 dimensions: 39 MB), and a cosine
  off by about 1e-3 at most — far below the gaps that order memories;
* once there are more than :data:`EXACT_UP_TO` vectors, one **sign bit** per component of
  ``v - centre`` (``centre``: the mean vector when the bits were built), stored per 64-bit
  word (``dim / 64`` arrays of ``n`` words, so one query is a few vectorised XOR + popcount
  passes: about 1 ms for 100k vectors here).

Search: up to :data:`EXACT_UP_TO` vectors, every cosine is computed from the int8 rows. Above,
the Hamming distance of the query's bits to every row's picks the ``max(OVERSAMPLE × top,
MIN_RESCORED)`` closest rows, and only those are rescored by cosine (binary quantisation with
rescoring; the exact top 50 is kept almost whole — see ``docs/performance.md``). Rows live in
blocks that are merged like an LSM tree (a block is merged into the one before it once it is
at least as large), so appending a batch never copies everything, and a forgotten memory's row
is masked out at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EXACT_UP_TO", "MIN_RESCORED", "OVERSAMPLE", "VectorIndex"]

EXACT_UP_TO = 4096
"""Vectors of one user up to which every cosine is computed (no bits)."""

OVERSAMPLE = 16
"""Rows rescored per row asked for, above :data:`EXACT_UP_TO`."""

MIN_RESCORED = 1024
"""Rows rescored at least, above :data:`EXACT_UP_TO`."""

_DEAD = np.uint16(60000)  # the Hamming distance a masked row gets (above any real one)


def _quantise(matrix: Any) -> tuple[Any, Any]:
    """``(int8 rows, float32 scales)`` of a float32 ``(n, dim)`` matrix."""
    m = np.asarray(matrix, dtype=np.float32)
    scale = np.abs(m).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    return np.rint(m / scale[:, None]).astype(np.int8), scale.astype(np.float32)


def _bits(matrix: Any, centre: Any) -> Any:
    """Sign bits of ``matrix - centre`` as ``(dim / 64, n)`` uint64 (one array per word)."""
    signs = np.packbits(np.asarray(matrix, dtype=np.float32) - centre > 0, axis=1)
    words = signs.shape[1] // 8
    return np.ascontiguousarray(signs[:, : words * 8].view(np.uint64).T)


@dataclass(slots=True)
class _Block:
    ids: Any  # int64 (n,), ascending
    q: Any  # int8 (n, dim)
    scale: Any  # float32 (n,)
    alive: Any  # bool (n,)
    bits: Any = None  # uint64 (words, n), or None below EXACT_UP_TO

    def dequantised(self, rows: Any) -> Any:
        return self.q[rows].astype(np.float32) * self.scale[rows, None]


@dataclass(slots=True)
class VectorIndex:
    """One user's vectors of one model (see the module docstring).

    Attributes:
        dim: the vectors' dimension (0 until the first row).
    """

    dim: int = 0
    blocks: list[_Block] = field(default_factory=list)
    centre: Any = None  # float32 (dim,) once the bits are built
    _bits_built_at: int = 0  # rows when the bits were last built

    def __len__(self) -> int:
        return int(sum(int(b.alive.sum()) for b in self.blocks))

    @property
    def rows(self) -> int:
        """Rows held, masked ones included."""
        return sum(len(b.ids) for b in self.blocks)

    def append(self, ids: Any, matrix: Any) -> None:
        """Add rows: ``ids`` (int64 memory ids) and their float32 ``(n, dim)`` vectors (L2-
        normalised). Rows of another dimension than the index's are ignored."""
        ids = np.asarray(ids, dtype=np.int64)
        matrix = np.asarray(matrix, dtype=np.float32).reshape(len(ids), -1)
        if not len(ids):
            return
        self.dim = self.dim or int(matrix.shape[1])
        if matrix.shape[1] != self.dim:
            return
        order = np.argsort(ids, kind="stable")
        ids, matrix = ids[order], matrix[order]
        q, scale = _quantise(matrix)
        block = _Block(ids, q, scale, np.ones(len(ids), dtype=bool))
        if self.centre is not None:
            block.bits = _bits(matrix, self.centre)
        self.blocks.append(block)
        while len(self.blocks) > 1 and len(self.blocks[-1].ids) >= len(self.blocks[-2].ids):
            b, a = self.blocks.pop(), self.blocks.pop()
            self.blocks.append(_merge(a, b))
        if self.rows > EXACT_UP_TO and (self.centre is None or self.rows >= 2 * self._bits_built_at):
            self.build_bits()

    def build_bits(self) -> None:
        """(Re)build every row's sign bits around the current mean (done when the index passes
        :data:`EXACT_UP_TO` rows and again each time it doubles)."""
        total = np.zeros(self.dim, dtype=np.float64)
        count = 0
        for b in self.blocks:
            total += (b.q[b.alive].astype(np.float32) * b.scale[b.alive, None]).sum(axis=0)
            count += int(b.alive.sum())
        self.centre = (total / max(1, count)).astype(np.float32)
        for b in self.blocks:
            b.bits = _bits(b.dequantised(slice(None)), self.centre)
        self._bits_built_at = self.rows

    def discard(self, ids: Any) -> None:
        """Mask the rows of these memory ids (forgotten or superseded); unknown ids are ignored."""
        wanted = np.asarray(list(ids), dtype=np.int64)
        if not len(wanted):
            return
        for b in self.blocks:
            b.alive[_rows_of(b, wanted)] = False

    def search(self, query: Any, *, top: int, also: Any = ()) -> tuple[dict[int, float], dict[int, Any]]:
        """The ``top`` rows nearest to the unit vector ``query`` (cosine, exact or rescored as
        the module docstring says), plus the rows of the ids in ``also`` that the index holds;
        returns ``({memory id: cosine}, {memory id: float32 vector})``."""
        qv = np.asarray(query, dtype=np.float32).reshape(-1)
        if qv.shape[0] != self.dim or not self.blocks:
            return {}, {}
        picks: list[tuple[int, Any]] = []  # (block index, row indices)
        if top > 0:
            if self.centre is None or self.rows <= EXACT_UP_TO:
                picks = self._exact_top(qv, top)
            else:
                picks = self._binary_top(qv, top)
        wanted = np.asarray(sorted(set(also)), dtype=np.int64)
        if len(wanted):
            for n, b in enumerate(self.blocks):
                pos = _rows_of(b, wanted)
                pos = pos[b.alive[pos]]
                if len(pos):
                    picks.append((n, pos))
        sem: dict[int, float] = {}
        vectors: dict[int, Any] = {}
        for n, rows in picks:
            b = self.blocks[n]
            vecs = b.dequantised(rows)
            sims = vecs @ qv
            for mid, s, v in zip(b.ids[rows].tolist(), sims.tolist(), vecs):
                sem[mid] = s
                vectors[mid] = v
        return sem, vectors

    def _exact_top(self, qv: Any, top: int) -> list[tuple[int, Any]]:
        sims = [np.where(b.alive, (b.q @ qv) * b.scale, -np.inf) if len(b.ids) else np.zeros(0) for b in self.blocks]
        flat = np.concatenate(sims)
        k = min(top, int(np.isfinite(flat).sum()))
        if k <= 0:
            return []
        best = np.argpartition(-flat, k - 1)[:k] if k < len(flat) else np.arange(len(flat))
        best = best[np.isfinite(flat[best])]
        return _split(best, [len(b.ids) for b in self.blocks])

    def _binary_top(self, qv: Any, top: int) -> list[tuple[int, Any]]:
        qbits = _bits(qv[None, :], self.centre)[:, 0]
        dists = []
        for b in self.blocks:
            d = np.bitwise_count(b.bits[0] ^ qbits[0]).astype(np.uint16)
            for w in range(1, len(qbits)):
                d += np.bitwise_count(b.bits[w] ^ qbits[w])
            d[~b.alive] = _DEAD
            dists.append(d)
        flat = np.concatenate(dists)
        want = max(OVERSAMPLE * top, MIN_RESCORED)
        counts = np.cumsum(np.bincount(np.minimum(flat, 64 * len(qbits) + 1), minlength=64 * len(qbits) + 2))
        threshold = int(np.searchsorted(counts, want))  # the smallest distance with ≥ want rows at or under it
        near = np.flatnonzero(flat <= min(threshold, 64 * len(qbits)))
        # rescore the near rows by cosine and keep the best ``top``
        parts = _split(near, [len(b.ids) for b in self.blocks])
        scored = [(n, rows, self.blocks[n].q[rows].astype(np.float32) @ qv * self.blocks[n].scale[rows]) for n, rows in parts]
        if not scored:
            return []
        sims = np.concatenate([s for _, _, s in scored])
        owner = np.concatenate([np.full(len(r), n) for n, r, _ in scored])
        rows_all = np.concatenate([r for _, r, _ in scored])
        k = min(top, len(sims))
        best = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        out: list[tuple[int, Any]] = []
        for n in np.unique(owner[best]).tolist():
            out.append((n, rows_all[best[owner[best] == n]]))
        return out


def _rows_of(block: _Block, wanted: Any) -> Any:
    """Row indices of the sorted ids ``wanted`` that ``block`` holds."""
    pos = np.searchsorted(block.ids, wanted)
    ok = pos < len(block.ids)
    pos = pos[ok]
    return pos[block.ids[pos] == wanted[ok]]


def _split(flat_rows: Any, sizes: list[int]) -> list[tuple[int, Any]]:
    """Indices into the concatenation of blocks → ``[(block index, row indices)]``."""
    starts = np.cumsum([0, *sizes])
    out = []
    for n in range(len(sizes)):
        sel = flat_rows[(flat_rows >= starts[n]) & (flat_rows < starts[n + 1])] - starts[n]
        if len(sel):
            out.append((n, np.sort(sel)))
    return out


def _merge(a: _Block, b: _Block) -> _Block:
    """One block of two (ids kept ascending)."""
    ids = np.concatenate([a.ids, b.ids])
    order = np.argsort(ids, kind="stable")
    bits = None
    if a.bits is not None and b.bits is not None:
        bits = np.ascontiguousarray(np.concatenate([a.bits, b.bits], axis=1)[:, order])
    return _Block(
        ids[order],
        np.concatenate([a.q, b.q])[order],
        np.concatenate([a.scale, b.scale])[order],
        np.concatenate([a.alive, b.alive])[order],
        bits,
    )

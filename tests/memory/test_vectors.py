"""The in-memory vector index of recall (``vectors.py``) on seeded random vectors: int8 cosines
match float32 ones, the exact and the binary-quantised (rescored) paths find the true nearest
rows, appends merge into few blocks with ids kept sorted, and forgotten rows are masked."""

from __future__ import annotations

import numpy as np

from elowen_builtins.memory.vectors import EXACT_UP_TO, VectorIndex


def _unit(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)


def _data(n: int, near: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """``n`` unit vectors of 384 dims; ``near`` of them close to the returned query."""
    rng = np.random.default_rng(seed)
    q = _unit(rng.standard_normal(384))
    m = _unit(rng.standard_normal((n, 384)))
    rows = rng.choice(n, near, replace=False)
    m[rows] = _unit(q + rng.uniform(0.4, 1.6, (near, 1)) * _unit(rng.standard_normal((near, 384))))  # cosines ≈ 0.5–0.9
    return m, q, {int(r) + 1 for r in rows}  # ids are rows + 1


def test_exact_path_matches_float32_cosines() -> None:
    m, q, near = _data(1000, 20)
    index = VectorIndex()
    index.append(np.arange(1, 1001), m)
    sem, vectors = index.search(q, top=20)
    assert set(sem) == near
    truth = m @ q
    for mid, s in sem.items():
        assert abs(s - truth[mid - 1]) < 2e-3
        assert float(vectors[mid] @ m[mid - 1]) > 0.999


def test_binary_path_keeps_the_true_nearest_and_masks_forgotten_rows() -> None:
    n = EXACT_UP_TO * 3
    m, q, near = _data(n, 50, seed=2)
    index = VectorIndex()
    for start in range(0, n, 1000):  # appended in batches, as the embedding queue does
        index.append(np.arange(start + 1, min(n, start + 1000) + 1), m[start : start + 1000])
    assert index.centre is not None and len(index.blocks) <= 8
    assert all(np.all(np.diff(b.ids) > 0) for b in index.blocks)
    sem, _ = index.search(q, top=50)
    assert set(sem) == near == {int(i) + 1 for i in np.argsort(-(m @ q))[:50]}
    gone = sorted(near)[:10]
    index.discard(gone)
    sem, _ = index.search(q, top=50)
    assert not set(gone) & set(sem) and near - set(gone) <= set(sem)
    assert len(index) == n - 10


def test_also_returns_the_named_rows_and_other_dimensions_are_ignored() -> None:
    m, q, _ = _data(100, 5, seed=3)
    index = VectorIndex()
    index.append(np.arange(1, 101), m)
    index.append(np.array([500]), np.ones((1, 64), dtype=np.float32))  # another model's size
    sem, vectors = index.search(q, top=0, also=[7, 9, 500, 12345])
    assert set(sem) == {7, 9} and set(vectors) == {7, 9}
    index.discard([7])
    assert set(index.search(q, top=0, also=[7, 9])[0]) == {9}
    assert index.search(np.ones(64, dtype=np.float32), top=5) == ({}, {})

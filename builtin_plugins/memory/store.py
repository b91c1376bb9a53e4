"""The memory tables (``memory_items``, ``memory_fts``, ``memory_vectors``): writes, versions,
keyword search and the vectors of one embedding model.

Every call names the user; no query here reads another user's rows. An update inserts a new row
and points the old one at it (``superseded_by``); a forget points the row at itself. Nothing but
an admin's purge deletes text. All calls are synchronous, on the trio thread (the kernel's
store), and each is one short transaction.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from elowen_sdk import Store, utc_iso
from elowen_sdk.services.memory import InvalidMemory, Memory, MemoryNotFound

from .vectors import VectorIndex

__all__ = ["KIND_RE", "MemoryStore", "fts_query", "normalise_text", "to_memory"]

KIND_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
"""A memory kind: a lower-case word (``fact``, ``preference``, ``project``, ``person``…)."""

_WORD_RE = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her hers him his how i if in into is it its
    me my of on or our she so than that the their them then there these they this to us was we were what when where which who whom
    whose why will with would you your yours about after before did does ever likely any some""".split()
)
"""Words left out of keyword queries (English function words)."""

_MEMORY_FIELDS = (
    "id",
    "user_id",
    "text",
    "kind",
    "importance",
    "source",
    "provenance",
    "project_id",
    "created_at",
    "updated_at",
    "last_used_at",
    "use_count",
    "superseded_by",
)


ITEM_COLUMNS = (
    "id, user_id, text, kind, importance, source, provenance, project_id, conversation_id, message_id, occurred_at, actor,"
    " created_at, updated_at, last_used_at, use_count, supersedes, superseded_by, superseded_at, superseded_actor, vector_model"
)
"""The columns of ``memory_items`` a recall reads (``context``, up to two other texts, is only for
the keyword index)."""


def normalise_text(text: str) -> str:
    """Lower-case, NFKC, whitespace collapsed: the key near-identical texts share."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def fts_terms(text: str, *, max_terms: int = 24) -> list[str]:
    """The words of free text a keyword query uses: lower case, minus :data:`STOPWORDS` and
    one-letter words, first occurrence order, at most ``max_terms``."""
    seen: dict[str, None] = {}
    for word in _WORD_RE.findall(text.lower()):
        if word not in STOPWORDS and word not in seen and len(word) > 1:
            seen[word] = None
    return list(seen)[:max_terms]


def fts_query(text: str, *, max_terms: int = 24) -> str:
    """An FTS5 ``MATCH`` expression for free text: :func:`fts_terms`, each quoted (so no FTS5
    syntax from the text is interpreted), joined with ``OR``. ``""`` when no word is left."""
    return " OR ".join(f'"{w}"' for w in fts_terms(text, max_terms=max_terms))


MAX_POSTINGS = 2_000
"""Documents a keyword query may touch (the sum of its terms' document counts, all users): the
rarest terms are kept up to this, so one query stays a few milliseconds however large the
store grows (an OR over words in every other memory would scan them all, on the trio thread).
A term whose every form is that common alone is left out; such words carry little BM25 weight."""

CONTEXT_WEIGHT = 0.4
"""BM25 weight of a memory's ``context`` column (its conversation neighbours' text) against its
own text's 1.0: a question often names words of the turn before or after the one that answers
it. Tuned on the LoCoMo dev half (``bench/memory.py``: blended recall@6 0.652 → 0.708 with it)."""

DOC_COUNT_TTL = 600.0
"""Seconds a term's cached document count is trusted (see :meth:`MemoryStore.doc_count`)."""

DOC_COUNT_WRITES = 2_000
"""Writes after which every cached document count is dropped."""


def to_memory(row: dict[str, Any], score: float = 0.0) -> Memory:
    """A ``memory_items`` row as the SDK record."""
    return Memory(**{k: row[k] for k in _MEMORY_FIELDS}, score=score)


@dataclass(slots=True)
class MemoryStore:
    """The plugin's tables over the kernel's store.

    Attributes:
        store: the kernel store (``ctx.store``).
        max_text_chars: longest accepted memory text.
    """

    store: Store
    max_text_chars: int = 4000
    _vectors: dict[tuple[int, str], VectorIndex] = field(default_factory=dict)
    _loading: dict[tuple[int, str], trio.Event] = field(default_factory=dict)
    _doc_counts: dict[str, tuple[int, float]] = field(default_factory=dict)  # FTS term → (documents, when counted)
    _writes: int = 0  # writes since the document counts were last dropped

    # -- validation -------------------------------------------------------------------------

    def check(self, text: Any, kind: Any = "fact", importance: Any = 0.5) -> tuple[str, str, float]:
        """Validated ``(text, kind, importance)``.

        Raises:
            InvalidMemory: the message names the bad field.
        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidMemory("text: a non-empty string is required")
        if "\x00" in text:
            raise InvalidMemory("text: must not contain NUL characters")
        text = text.strip()
        if len(text) > self.max_text_chars:
            raise InvalidMemory(f"text: {len(text)} characters; at most {self.max_text_chars} are kept per memory")
        if not isinstance(kind, str) or not KIND_RE.match(kind):
            raise InvalidMemory("kind: a lower-case word of letters, digits, '_' or '-' (at most 32), e.g. fact, preference, project, person")
        if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0.0 <= float(importance) <= 1.0:
            raise InvalidMemory("importance: a number from 0 to 1")
        return text, kind, float(importance)

    # -- writes -----------------------------------------------------------------------------

    def add(
        self,
        user_id: int,
        text: str,
        *,
        kind: str = "fact",
        importance: float = 0.5,
        source: str = "manual",
        provenance: str = "owner",
        project_id: int | None = None,
        conversation_id: str | None = None,
        message_id: str | None = None,
        occurred_at: str | None = None,
        actor: str = "",
        supersedes: int | None = None,
    ) -> dict[str, Any]:
        """Insert a memory (superseding ``supersedes``, which must be a current memory of the
        user) and return its row.

        Raises:
            InvalidMemory: bad fields. MemoryNotFound: ``supersedes`` is not current for the user.
        """
        text, kind, importance = self.check(text, kind, importance)
        if provenance not in ("owner", "untrusted"):
            raise InvalidMemory("provenance: 'owner' or 'untrusted'")
        now = utc_iso()
        with self.store.transaction():
            if supersedes is not None and self.current(user_id, supersedes) is None:
                raise MemoryNotFound(f"memory {supersedes} is not a current memory of this user")
            new_id = self.store.execute(
                "INSERT INTO memory_items (user_id, text, kind, importance, source, provenance, project_id, conversation_id, message_id,"
                " occurred_at, actor, created_at, updated_at, supersedes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (user_id, text, kind, importance, source, provenance, project_id, conversation_id, message_id, occurred_at, actor, now, now, supersedes),
            )
            if supersedes is not None:
                self.store.execute(
                    "UPDATE memory_items SET superseded_by = ?, superseded_at = ?, superseded_actor = ? WHERE id = ? AND user_id = ?",
                    (new_id, now, actor, supersedes, user_id),
                )
            if conversation_id is not None or supersedes is not None:
                self._recontext(user_id, [new_id, *([supersedes] if supersedes is not None else [])])
        self._wrote(1)
        if supersedes is not None:
            self.store.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (supersedes,))
            self.discard(user_id, [supersedes])
        row = self.row(user_id, new_id)
        assert row is not None
        return row

    def add_many(self, user_id: int, items: Iterable[dict[str, Any]], *, actor: str = "") -> int:
        """Insert many validated memories in one transaction (bulk import); returns the count.
        Each item: ``text`` and optionally ``kind``, ``importance``, ``source``,
        ``conversation_id``, ``occurred_at``."""
        now = utc_iso()
        rows = []
        for item in items:
            text, kind, importance = self.check(item.get("text"), item.get("kind", "fact"), item.get("importance", 0.5))
            rows.append(
                (
                    user_id,
                    text,
                    kind,
                    importance,
                    str(item.get("source", "manual")),
                    "owner",
                    item.get("conversation_id"),
                    item.get("occurred_at"),
                    actor,
                    now,
                    now,
                )
            )
        with self.store.transaction():
            first = self.store.query_one("SELECT coalesce(max(id), 0) AS n FROM memory_items")
            self.store.executemany(
                "INSERT INTO memory_items (user_id, text, kind, importance, source, provenance, conversation_id, occurred_at, actor, created_at, updated_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
            if any(r[6] is not None for r in rows):
                new = self.store.query(
                    "SELECT id FROM memory_items WHERE user_id = ? AND id > ? AND conversation_id IS NOT NULL", (user_id, int(first["n"]) if first else 0)
                )
                self._recontext(user_id, [r["id"] for r in new])
        self._wrote(len(rows))
        return len(rows)

    def forget(self, user_id: int, memory_id: int, *, actor: str = "") -> dict[str, Any] | None:
        """Take a current memory out of recall (``superseded_by = id``); returns its row before
        the change, or ``None`` when it is not a current memory of the user."""
        row = self.current(user_id, memory_id)
        if row is None:
            return None
        with self.store.transaction():
            self.store.execute(
                "UPDATE memory_items SET superseded_by = id, superseded_at = ?, superseded_actor = ? WHERE id = ? AND user_id = ? AND superseded_by IS NULL",
                (utc_iso(), actor, memory_id, user_id),
            )
            if row["conversation_id"] is not None:
                self._recontext(user_id, [memory_id])  # its text leaves its neighbours' context too
        self.store.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
        self.discard(user_id, [memory_id])
        return row

    def _neighbour(self, user_id: int, conversation_id: str, memory_id: int, *, before: bool) -> dict[str, Any] | None:
        """The current memory of the conversation just before (or after) id ``memory_id``."""
        sql = (
            "SELECT id, text FROM memory_items WHERE user_id = ? AND conversation_id = ? AND superseded_by IS NULL AND id "
            + ("< ? ORDER BY id DESC" if before else "> ? ORDER BY id")
            + " LIMIT 1"
        )
        return self.store.query_one(sql, (user_id, conversation_id, memory_id))

    def _recontext(self, user_id: int, anchors: Sequence[int]) -> None:
        """Rewrite the ``context`` of the current memories at and next to ``anchors`` (ids just
        written, superseded or forgotten): the text of the current memory before and after each
        in its conversation, one per line. Called inside the write's transaction."""
        targets: dict[int, str] = {}
        for anchor in anchors:
            row = self.store.query_one("SELECT id, conversation_id, superseded_by FROM memory_items WHERE id = ? AND user_id = ?", (anchor, user_id))
            if row is None or row["conversation_id"] is None:
                continue
            conv = str(row["conversation_id"])
            if row["superseded_by"] is None:
                targets[anchor] = conv
            for before in (True, False):
                n = self._neighbour(user_id, conv, anchor, before=before)
                if n is not None:
                    targets[int(n["id"])] = conv
        updates = []
        for mid, conv in targets.items():
            sides = [self._neighbour(user_id, conv, mid, before=b) for b in (True, False)]
            context = "\n".join(str(n["text"]) for n in sides if n is not None)
            updates.append((context, mid, context))
        if updates:
            self.store.executemany("UPDATE memory_items SET context = ? WHERE id = ? AND context IS NOT ?", updates)

    def purge(self, user_id: int) -> int:
        """Delete every memory (all versions) and vector of the user; returns the count."""
        with self.store.transaction():
            self.store.execute("DELETE FROM memory_vectors WHERE memory_id IN (SELECT id FROM memory_items WHERE user_id = ?)", (user_id,))
            count = self.store.execute("DELETE FROM memory_items WHERE user_id = ?", (user_id,))
        self.drop_cache(user_id)
        return count

    def bump(self, user_id: int, ids: Sequence[int]) -> None:
        """Count one use of each memory (recall returned it)."""
        if ids:
            now = utc_iso()
            with self.store.transaction():  # one commit for all
                self.store.executemany(
                    "UPDATE memory_items SET use_count = use_count + 1, last_used_at = ? WHERE id = ? AND user_id = ?", [(now, i, user_id) for i in ids]
                )

    # -- reads ------------------------------------------------------------------------------

    def row(self, user_id: int, memory_id: int) -> dict[str, Any] | None:
        """Any version of a memory of the user, or ``None``."""
        return self.store.query_one("SELECT * FROM memory_items WHERE id = ? AND user_id = ?", (memory_id, user_id))

    def current(self, user_id: int, memory_id: int) -> dict[str, Any] | None:
        """The memory if it is a current one of the user, else ``None``."""
        return self.store.query_one("SELECT * FROM memory_items WHERE id = ? AND user_id = ? AND superseded_by IS NULL", (memory_id, user_id))

    def rows(self, user_id: int, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Current memories of the user among ``ids``, by id."""
        out: dict[int, dict[str, Any]] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for r in self.store.query(
                f"SELECT {ITEM_COLUMNS} FROM memory_items WHERE user_id = ? AND superseded_by IS NULL AND id IN ({marks})", (user_id, *chunk)
            ):
                out[r["id"]] = r
        return out

    def list(
        self, user_id: int, *, include_superseded: bool = False, before: int | None = None, limit: int = 50, kind: str | None = None
    ) -> list[dict[str, Any]]:
        """The user's memories newest first (``id < before`` for the next page)."""
        sql = "SELECT * FROM memory_items WHERE user_id = ?"
        params: list[Any] = [user_id]
        if not include_superseded:
            sql += " AND superseded_by IS NULL"
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if before is not None:
            sql += " AND id < ?"
            params.append(before)
        return self.store.query(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))

    def any(self) -> bool:
        """Whether any user has a memory."""
        return self.store.query_one("SELECT 1 AS x FROM memory_items LIMIT 1") is not None

    def count(self, user_id: int) -> int:
        """How many current memories the user has."""
        row = self.store.query_one("SELECT count(*) AS n FROM memory_items WHERE user_id = ? AND superseded_by IS NULL", (user_id,))
        return int(row["n"]) if row else 0

    def history(self, user_id: int, memory_id: int) -> list[dict[str, Any]]:
        """Every version of the chain ``memory_id`` belongs to, oldest first.

        Raises:
            MemoryNotFound: not a memory of the user.
        """
        row = self.row(user_id, memory_id)
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id}")
        while row["supersedes"] is not None:  # walk back to the first version
            older = self.row(user_id, row["supersedes"])
            if older is None:
                break
            row = older
        chain = [row]
        while row["superseded_by"] is not None and row["superseded_by"] != row["id"] and len(chain) < 1000:
            newer = self.row(user_id, row["superseded_by"])
            if newer is None:
                break
            chain.append(newer)
            row = newer
        return chain

    def keyword(self, user_id: int, query: str, *, limit: int = 50, project_id: int | None = None) -> list[tuple[int, float]]:
        """FTS5 BM25 matches among the user's current memories, best first: ``(id, score)``
        with ``score`` = ``-bm25()`` (higher is better, > 0)."""
        terms = self._affordable(fts_terms(query))
        if not terms:
            return []
        match = " OR ".join(f'"{w}"' for w in terms)
        sql = (
            f"SELECT m.id AS id, -bm25(memory_fts, 1.0, {CONTEXT_WEIGHT}) AS score FROM memory_fts JOIN memory_items m ON m.id = memory_fts.rowid"
            " WHERE memory_fts MATCH ? AND m.user_id = ? AND m.superseded_by IS NULL"
        )
        params: list[Any] = [match, user_id]
        if project_id is not None:
            sql += " AND (m.project_id IS NULL OR m.project_id = ?)"
            params.append(project_id)
        rows = self.store.query(sql + f" ORDER BY bm25(memory_fts, 1.0, {CONTEXT_WEIGHT}) LIMIT ?", (*params, limit))
        return [(r["id"], float(r["score"])) for r in rows]

    def _affordable(self, terms: list[str]) -> list[str]:
        """The rarest of ``terms`` whose document counts add up to at most :data:`MAX_POSTINGS`
        (counted as FTS5 matches them, stemmed: see :meth:`doc_count`)."""
        counted = sorted((self.doc_count(term), term) for term in terms)
        kept, total = [], 0
        for doc, term in counted:
            if total + doc > MAX_POSTINGS:
                break
            kept.append(term)
            total += doc
        return kept

    def doc_count(self, term: str) -> int:
        """How many memories (of every user, any version) FTS5 matches for the word ``term`` in
        their text or their context (the documents a keyword query touches)
        (after its porter stemming, so ``meeting`` counts ``meet``). Cached per term for
        :data:`DOC_COUNT_TTL` seconds or until :data:`DOC_COUNT_WRITES` writes; the count is
        only a cost estimate, so a slightly old one is fine."""
        now = time.monotonic()
        hit = self._doc_counts.get(term)
        if hit is not None and now - hit[1] < DOC_COUNT_TTL:
            return hit[0]
        row = self.store.query_one("SELECT count(*) AS n FROM memory_fts WHERE memory_fts MATCH ?", (f'"{term}"',))
        count = int(row["n"]) if row else 0
        if len(self._doc_counts) > 50_000:
            self._doc_counts.clear()
        self._doc_counts[term] = (count, now)
        return count

    def _wrote(self, count: int) -> None:
        """Count memory writes; past :data:`DOC_COUNT_WRITES` the cached document counts go."""
        self._writes += count
        if self._writes >= DOC_COUNT_WRITES:
            self._doc_counts.clear()
            self._writes = 0

    # -- vectors ----------------------------------------------------------------------------

    _PENDING_RANGES = ("vector_model IS NULL", "vector_model < ?", "vector_model > ?")

    def pending(self, model: str, limit: int) -> list[dict[str, Any]]:
        """Current memories (of every user) without a vector of ``model``: those never
        embedded first, then those embedded by another model, each oldest first. Read as
        ranges of the index ``memory_items_vector_model``, so it costs nothing when nothing is
        pending however many memories there are."""
        out: list[dict[str, Any]] = []
        for where in self._PENDING_RANGES:
            if len(out) >= limit:
                break
            params: tuple[Any, ...] = (limit - len(out),) if "?" not in where else (model, limit - len(out))
            out += self.store.query(
                "SELECT id, user_id, text FROM memory_items INDEXED BY memory_items_vector_model"
                f" WHERE superseded_by IS NULL AND {where} ORDER BY vector_model, id LIMIT ?",
                params,
            )
        return out

    def pending_count(self, model: str) -> int:
        """How many current memories wait for a vector of ``model``."""
        total = 0
        for where in self._PENDING_RANGES:
            row = self.store.query_one(
                f"SELECT count(*) AS n FROM memory_items INDEXED BY memory_items_vector_model WHERE superseded_by IS NULL AND {where}",
                (model,) if "?" in where else (),
            )
            total += int(row["n"]) if row else 0
        return total

    def put_vectors(self, model: str, items: Sequence[tuple[int, int, bytes, int]]) -> int:
        """Store ``(memory_id, user_id, float32 bytes, dim)`` vectors of ``model``; a vector that
        is already stored is kept (idempotent). Returns how many were new; those are appended
        to the loaded vectors of their users (so a write never makes a recall reload them)."""
        if not items:
            return 0
        now = utc_iso()
        ids = [mid for mid, _uid, _b, _d in items]
        have: set[int] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            have.update(
                r["memory_id"] for r in self.store.query(f"SELECT memory_id FROM memory_vectors WHERE model = ? AND memory_id IN ({marks})", (model, *chunk))
            )
        fresh = [it for it in items if it[0] not in have]
        with self.store.transaction():
            self.store.executemany(
                "INSERT OR IGNORE INTO memory_vectors (memory_id, model, dim, vector, created_at) VALUES (?,?,?,?,?)",
                [(mid, model, dim, blob, now) for mid, _uid, blob, dim in fresh],
            )
            self.store.executemany("UPDATE memory_items SET vector_model = ? WHERE id = ?", [(model, mid) for mid in ids])
        if not fresh:
            return 0
        import numpy as np

        for uid in {uid for _mid, uid, _b, _d in fresh}:
            index = self._vectors.get((uid, model))
            if index is not None:
                mine = [(mid, blob) for mid, u, blob, _d in fresh if u == uid]
                index.append(
                    np.fromiter((m for m, _ in mine), dtype=np.int64, count=len(mine)),
                    np.frombuffer(b"".join(b for _, b in mine), dtype="<f4").reshape(len(mine), -1),
                )
        return len(fresh)

    def prune_vectors(self, model: str) -> int:
        """Delete the vectors of other models (index ranges of ``memory_vectors_model``);
        returns the count. (A memory's vector goes when it stops being current.) Their
        in-memory copies are dropped too."""
        for key in [k for k in self._vectors if k[1] != model]:
            del self._vectors[key]
        return self.store.execute(
            "DELETE FROM memory_vectors WHERE memory_id IN (SELECT memory_id FROM memory_vectors INDEXED BY memory_vectors_model WHERE model < ?1"
            " UNION ALL SELECT memory_id FROM memory_vectors INDEXED BY memory_vectors_model WHERE model > ?1) AND model != ?1",
            (model,),
        )

    def vectors(self, user_id: int, model: str) -> VectorIndex | None:
        """The user's vectors of ``model`` if they are loaded and there are any, else ``None``
        (see :meth:`load_vectors`)."""
        cached = self._vectors.get((user_id, model))
        return cached if cached is not None and cached.rows else None

    def loaded(self, user_id: int, model: str) -> bool:
        """Whether the user's vectors of ``model`` are in memory (possibly none)."""
        return (user_id, model) in self._vectors

    def loading(self, user_id: int, model: str) -> tuple[trio.Event, bool]:
        """The event set when the user's vectors are loaded, and whether the caller is the
        first to ask (then it must run :meth:`load_vectors`, once)."""
        key = (user_id, model)
        event = self._loading.get(key)
        if event is not None:
            return event, False
        event = self._loading[key] = trio.Event()
        return event, True

    async def load_vectors(self, user_id: int, model: str, *, chunk: int = 5000) -> None:
        """Read the user's current vectors of ``model`` into memory (a :class:`VectorIndex`),
        ``chunk`` rows per query with a checkpoint between, so a large store never holds the
        trio thread for long; sets the event of :meth:`loading` when done."""
        import numpy as np

        key = (user_id, model)
        done = self._loading.setdefault(key, trio.Event())
        if key in self._vectors:
            del self._loading[key]
            done.set()
            return
        try:
            index = VectorIndex()
            last = 0
            while True:
                rows = self.store.query(
                    "SELECT v.memory_id AS id, v.vector AS vector FROM memory_items m JOIN memory_vectors v ON v.memory_id = m.id AND v.model = ?"
                    " WHERE m.user_id = ? AND m.superseded_by IS NULL AND m.id > ? ORDER BY m.id LIMIT ?",
                    (model, user_id, last, chunk),
                )
                if not rows:
                    break
                last = rows[-1]["id"]
                size = len(rows[0]["vector"])
                rows = [r for r in rows if len(r["vector"]) == size]  # one model, one size: a stray size is skipped
                index.append(
                    np.fromiter((r["id"] for r in rows), dtype=np.int64, count=len(rows)),
                    np.frombuffer(b"".join(r["vector"] for r in rows), dtype="<f4").reshape(len(rows), -1),
                )
                await trio.lowlevel.checkpoint()
            if index.rows > 4096 and index.centre is None:
                index.build_bits()
            self._vectors[key] = index
        finally:
            del self._loading[key]
            done.set()

    def discard(self, user_id: int, ids: Sequence[int]) -> None:
        """Mask memories that stopped being current in the user's loaded vectors."""
        for (uid, _model), index in self._vectors.items():
            if uid == user_id:
                index.discard(ids)

    def drop_cache(self, user_id: int) -> None:
        """Forget the user's cached vectors (after a purge)."""
        for key in [k for k in self._vectors if k[0] == user_id]:
            del self._vectors[key]

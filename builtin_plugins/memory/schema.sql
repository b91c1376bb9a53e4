-- schema-version: 3
-- The memory plugin's tables. Every memory belongs to one user; an update or a forget never
-- deletes text: the old row points at its successor (superseded_by; a forgotten row at itself).
CREATE TABLE IF NOT EXISTS memory_items (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    text TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'fact',
    importance REAL NOT NULL DEFAULT 0.5,
    source TEXT NOT NULL DEFAULT 'manual',
    provenance TEXT NOT NULL DEFAULT 'owner',
    project_id INTEGER,
    conversation_id TEXT,
    message_id TEXT,
    occurred_at TEXT,
    actor TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_used_at TEXT,
    use_count INTEGER NOT NULL DEFAULT 0,
    supersedes INTEGER,
    superseded_by INTEGER,
    superseded_at TEXT,
    superseded_actor TEXT,
    vector_model TEXT,  -- the embedding model whose vector of this memory is stored (NULL: none yet)
    -- The text of the current memories just before and after it in its conversation (by id),
    -- one per line: indexed for keyword recall (a weaker FTS5 column), never shown.
    context TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS memory_items_user ON memory_items (user_id, superseded_by);
-- The embedding queue's pending set (current memories without a vector of the current model)
-- as index ranges, so a tick with nothing to do reads a few index pages, not every memory.
CREATE INDEX IF NOT EXISTS memory_items_vector_model ON memory_items (vector_model, id) WHERE superseded_by IS NULL;
CREATE INDEX IF NOT EXISTS memory_items_supersedes ON memory_items (supersedes);
-- A memory's neighbours in its conversation (for context).
CREATE INDEX IF NOT EXISTS memory_items_conversation ON memory_items (user_id, conversation_id, id) WHERE superseded_by IS NULL;

CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5 (
    text, context, content = 'memory_items', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS memory_items_ai AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_fts (rowid, text, context) VALUES (new.id, new.text, new.context);
END;
CREATE TRIGGER IF NOT EXISTS memory_items_ad AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context);
END;
CREATE TRIGGER IF NOT EXISTS memory_items_au AFTER UPDATE OF text, context ON memory_items BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context);
    INSERT INTO memory_fts (rowid, text, context) VALUES (new.id, new.text, new.context);
END;

-- One vector per memory and embedding model (float32, little-endian, L2-normalised).
CREATE TABLE IF NOT EXISTS memory_vectors (
    memory_id INTEGER NOT NULL,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (memory_id, model)
) WITHOUT ROWID;
-- Vectors of other models (pruned after a model change) as an index range.
CREATE INDEX IF NOT EXISTS memory_vectors_model ON memory_vectors (model, memory_id);

-- upgrade to 2
-- The embedding queue reads its pending set from an index instead of scanning every memory.
ALTER TABLE memory_items ADD COLUMN vector_model TEXT;
DELETE FROM memory_vectors WHERE memory_id IN (SELECT id FROM memory_items WHERE superseded_by IS NOT NULL);
UPDATE memory_items SET vector_model = (SELECT max(v.model) FROM memory_vectors v WHERE v.memory_id = memory_items.id);
CREATE INDEX IF NOT EXISTS memory_items_vector_model ON memory_items (vector_model, id) WHERE superseded_by IS NULL;
CREATE INDEX IF NOT EXISTS memory_vectors_model ON memory_vectors (model, memory_id);

-- upgrade to 3
-- Keyword recall also reads a memory's neighbours in its conversation (the context column).
ALTER TABLE memory_items ADD COLUMN context TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS memory_items_conversation ON memory_items (user_id, conversation_id, id) WHERE superseded_by IS NULL;
DROP TRIGGER IF EXISTS memory_items_ai;
DROP TRIGGER IF EXISTS memory_items_ad;
DROP TABLE IF EXISTS memory_fts_vocab;
DROP TABLE IF EXISTS memory_fts;
UPDATE memory_items SET context = trim(
    coalesce((SELECT p.text FROM memory_items p WHERE p.user_id = memory_items.user_id AND p.conversation_id = memory_items.conversation_id
              AND p.superseded_by IS NULL AND p.id < memory_items.id ORDER BY p.id DESC LIMIT 1), '')
    || char(10) ||
    coalesce((SELECT q.text FROM memory_items q WHERE q.user_id = memory_items.user_id AND q.conversation_id = memory_items.conversation_id
              AND q.superseded_by IS NULL AND q.id > memory_items.id ORDER BY q.id LIMIT 1), ''), char(10))
WHERE superseded_by IS NULL AND conversation_id IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5 (
    text, context, content = 'memory_items', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS memory_items_ai AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_fts (rowid, text, context) VALUES (new.id, new.text, new.context);
END;
CREATE TRIGGER IF NOT EXISTS memory_items_ad AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context);
END;
CREATE TRIGGER IF NOT EXISTS memory_items_au AFTER UPDATE OF text, context ON memory_items BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context);
    INSERT INTO memory_fts (rowid, text, context) VALUES (new.id, new.text, new.context);
END;
INSERT INTO memory_fts (memory_fts) VALUES ('rebuild');

-- schema-version: 1
-- Every delegation (the audit of who delegated what, with which grants) and its outcome.
CREATE TABLE IF NOT EXISTS subagent_runs (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    parent_conversation_id INTEGER NOT NULL,
    conversation_id INTEGER,              -- the sub-agent's own conversation (its transcript)
    depth INTEGER NOT NULL,               -- 1: delegated from a person's conversation
    task TEXT NOT NULL,
    grants TEXT NOT NULL,                 -- JSON list: the tool names it was offered
    state TEXT NOT NULL,                  -- running | done | failed | cancelled | refused
    summary TEXT,
    artefacts TEXT NOT NULL DEFAULT '[]', -- JSON list of paths it wrote
    error TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS subagent_runs_user ON subagent_runs (user_id, id);
CREATE INDEX IF NOT EXISTS subagent_runs_child ON subagent_runs (conversation_id);

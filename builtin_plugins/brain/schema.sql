-- The brain plugin's tables (applied by the kernel's Store.apply_plugin_schema).
-- schema-version: 2

-- A conversation with the brain. kind 'chat' (a user's) or 'task' (a brain worker's).
CREATE TABLE IF NOT EXISTS brain_conversations (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER,                       -- the owner (users.id); NULL for a task without owner
    kind        TEXT    NOT NULL DEFAULT 'chat' CHECK (kind IN ('chat', 'task')),
    title       TEXT    NOT NULL DEFAULT '',
    model       TEXT    NOT NULL DEFAULT '',   -- '<provider>/<model>', '' for the default
    project_id  INTEGER,                       -- the project folder file tools start in
    task_id     INTEGER,                       -- kind 'task': the task it works on
    summary     TEXT    NOT NULL DEFAULT '',   -- compaction summary of the older messages
    created_at  TEXT    NOT NULL,              -- UTC ISO 8601
    updated_at  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS brain_conversations_user ON brain_conversations (user_id, id);
CREATE INDEX IF NOT EXISTS brain_conversations_task ON brain_conversations (task_id);

-- Messages, oldest first by id. tool_calls: JSON [{id, name, arguments}] of an assistant
-- message. compacted = 1: folded into the conversation's summary, no longer sent to the model.
CREATE TABLE IF NOT EXISTS brain_messages (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES brain_conversations (id) ON DELETE CASCADE,
    role             TEXT    NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'note')),
    content          TEXT    NOT NULL DEFAULT '',
    tool_calls       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(tool_calls)),
    tool_call_id     TEXT,
    compacted        INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS brain_messages_conv ON brain_messages (conversation_id, compacted, id);

-- Persistent goals, one live (not done/cleared) goal per conversation.
-- subgoals: JSON [{"text": str, "done": bool}]; contract: JSON object of a /goal draft.
CREATE TABLE IF NOT EXISTS brain_goals (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES brain_conversations (id) ON DELETE CASCADE,
    text             TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('draft', 'active', 'paused', 'done', 'cleared')),
    pause_reason     TEXT,                     -- budget_reached, ceiling_reached, blocked, token_budget, breaker, driver_lost, restart, user, error
    blocked_reason   TEXT,
    evidence         TEXT,
    last_progress    TEXT,
    subgoals         TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(subgoals)),
    contract         TEXT             CHECK (contract IS NULL OR json_valid(contract)),
    turn_budget      INTEGER,                  -- NULL: the plugin's goal_turn_budget
    turns_total      INTEGER NOT NULL DEFAULT 0,
    turns_run        INTEGER NOT NULL DEFAULT 0, -- since the last start / resume
    tokens_run       INTEGER NOT NULL DEFAULT 0, -- since the last start / resume
    note             TEXT,                     -- a message for the next goal turn (a rejected GOAL_DONE)
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS brain_goals_conv ON brain_goals (conversation_id, id);
CREATE INDEX IF NOT EXISTS brain_goals_state ON brain_goals (state);

-- Per user: the active conversation (the pointer) and the persisted YOLO default.
CREATE TABLE IF NOT EXISTS brain_users (
    user_id                 INTEGER PRIMARY KEY,
    active_conversation_id  INTEGER REFERENCES brain_conversations (id) ON DELETE SET NULL,
    yolo                    INTEGER NOT NULL DEFAULT 0
);

-- Tool calls waiting for the user (kind 'approval') and ask_user questions (kind 'question').
CREATE TABLE IF NOT EXISTS brain_pending (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES brain_conversations (id) ON DELETE CASCADE,
    user_id          INTEGER,
    kind             TEXT    NOT NULL CHECK (kind IN ('approval', 'question')),
    tool             TEXT    NOT NULL DEFAULT '',
    arguments        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(arguments)),
    question         TEXT    NOT NULL DEFAULT '',
    destructive      INTEGER NOT NULL DEFAULT 0,
    reasons          TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(reasons)),
    state            TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'allowed', 'rejected', 'answered', 'expired')),
    answer           TEXT,
    decided_by       INTEGER,
    created_at       TEXT    NOT NULL,
    decided_at       TEXT
);
CREATE INDEX IF NOT EXISTS brain_pending_user ON brain_pending (user_id, state, id);

-- Chat platforms (channels.py): which platform sender is which Elowen user.
CREATE TABLE IF NOT EXISTS brain_channel_links (
    platform       TEXT    NOT NULL,           -- the Platform's name, e.g. 'webhook'
    platform_user  TEXT    NOT NULL,           -- the platform's id of the sender
    user_id        INTEGER NOT NULL,           -- users.id
    created_at     TEXT    NOT NULL,
    PRIMARY KEY (platform, platform_user)
);
CREATE INDEX IF NOT EXISTS brain_channel_links_user ON brain_channel_links (user_id);

-- One-time link codes given to unlinked senders; only the SHA-256 of the code is kept.
CREATE TABLE IF NOT EXISTS brain_channel_codes (
    code_hash      TEXT    PRIMARY KEY,        -- hex SHA-256 of the normalized code
    platform       TEXT    NOT NULL,
    platform_user  TEXT    NOT NULL,
    expires_at     REAL    NOT NULL,           -- seconds since the epoch
    created_at     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS brain_channel_codes_sender ON brain_channel_codes (platform, platform_user);

-- upgrade to 2
-- Chat platforms: sender links and link codes.
-- Chat platforms (channels.py): which platform sender is which Elowen user.
CREATE TABLE IF NOT EXISTS brain_channel_links (
    platform       TEXT    NOT NULL,           -- the Platform's name, e.g. 'webhook'
    platform_user  TEXT    NOT NULL,           -- the platform's id of the sender
    user_id        INTEGER NOT NULL,           -- users.id
    created_at     TEXT    NOT NULL,
    PRIMARY KEY (platform, platform_user)
);
CREATE INDEX IF NOT EXISTS brain_channel_links_user ON brain_channel_links (user_id);

-- One-time link codes given to unlinked senders; only the SHA-256 of the code is kept.
CREATE TABLE IF NOT EXISTS brain_channel_codes (
    code_hash      TEXT    PRIMARY KEY,        -- hex SHA-256 of the normalized code
    platform       TEXT    NOT NULL,
    platform_user  TEXT    NOT NULL,
    expires_at     REAL    NOT NULL,           -- seconds since the epoch
    created_at     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS brain_channel_codes_sender ON brain_channel_codes (platform, platform_user);

-- The overseer-parked plugin's tables (applied by the kernel store, versioned per plugin).
-- Until overseer 0.2 they belonged to the overseer plugin's schema: same names, so an existing
-- database keeps its rows.
-- schema-version: 1

-- Parked overseer agents: one CLI in tmux per active mission (overseer_exec set).
-- state: running (pane_id and provider empty while it starts) | dead (its pane died, fell back to a
-- shell, went silent, or could not start) | stopped.
CREATE TABLE IF NOT EXISTS overseer_agents (
    id          INTEGER PRIMARY KEY,
    mission_id  INTEGER NOT NULL,
    session     TEXT    NOT NULL UNIQUE,
    pane_id     TEXT    NOT NULL DEFAULT '',
    provider    TEXT    NOT NULL,
    model       TEXT    NOT NULL DEFAULT '',
    user_id     INTEGER,
    state       TEXT    NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'dead', 'stopped')),
    started_at  TEXT    NOT NULL,
    ended_at    TEXT,
    end_reason  TEXT
);
CREATE INDEX IF NOT EXISTS overseer_agents_mission ON overseer_agents (mission_id, state);

-- Decisions handed to a mission's parked overseer, until it (or a human) decides them.
CREATE TABLE IF NOT EXISTS overseer_queue (
    decision_id  INTEGER PRIMARY KEY,
    mission_id   INTEGER NOT NULL,
    queued_at    TEXT    NOT NULL,
    claimed_at   TEXT,
    claimed_by   TEXT
);
CREATE INDEX IF NOT EXISTS overseer_queue_mission ON overseer_queue (mission_id, decision_id);

-- The overseer plugin's tables (applied by the kernel store, versioned per plugin).
-- schema-version: 1

-- A mission groups tasks under one autonomy level (0..3 = L0..L3).
-- state: active (the overseer dispatches and decides) | paused (frozen by a human) |
--        stalled (frozen by Elowen until a human resumes it) | disengaged (released: its tasks
--        are ordinary tasks again).
CREATE TABLE IF NOT EXISTS missions (
    id                 INTEGER PRIMARY KEY,
    name               TEXT    NOT NULL,
    project_id         INTEGER,
    level              INTEGER NOT NULL DEFAULT 1 CHECK (level BETWEEN 0 AND 3),
    state              TEXT    NOT NULL DEFAULT 'paused'
                       CHECK (state IN ('active', 'stalled', 'paused', 'disengaged')),
    state_reason       TEXT,
    max_sessions       INTEGER NOT NULL DEFAULT 0 CHECK (max_sessions >= 0),  -- 0: no limit
    overseer_restarts  INTEGER NOT NULL DEFAULT 0 CHECK (overseer_restarts >= 0),
    owner_id           INTEGER,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL
);

-- A task belongs to at most one mission.
CREATE TABLE IF NOT EXISTS mission_tasks (
    task_id     INTEGER PRIMARY KEY,
    mission_id  INTEGER NOT NULL REFERENCES missions (id) ON DELETE CASCADE,
    added_at    TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS mission_tasks_mission ON mission_tasks (mission_id);

-- Reviews of closed tasks: one per close (task_id, closed_at); applied = its outcome was
-- carried out (a rejection reopened the task, or nothing was to be done).
CREATE TABLE IF NOT EXISTS overseer_reviews (
    decision_id  INTEGER PRIMARY KEY,
    task_id      INTEGER NOT NULL,
    closed_at    TEXT    NOT NULL,
    applied      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (task_id, closed_at)
);

-- Durable review-rejection counter per task (PITFALLS 16/17: bounded, survives restarts).
CREATE TABLE IF NOT EXISTS overseer_review_counts (
    task_id     INTEGER PRIMARY KEY,
    rejections  INTEGER NOT NULL DEFAULT 0 CHECK (rejections >= 0)
);

-- The parked path's tables (overseer_agents, overseer_queue) belong to the overseer-parked
-- plugin since schema 1 of that plugin (same names: an existing database keeps its rows).

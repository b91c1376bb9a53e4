-- The core-loop plugin's tables (applied by the kernel's Store.apply_plugin_schema).
-- schema-version: 1

-- A project the core loop opened: its parent task in the ledger and where it came from.
CREATE TABLE IF NOT EXISTS core_loop_projects (
    id              INTEGER PRIMARY KEY,
    task_id         INTEGER UNIQUE,              -- the parent task in the ledger (NULL while planning)
    ledger_project  INTEGER NOT NULL,            -- the ledger project (folder) it works in
    user_id         INTEGER,                     -- who asked
    conversation_id INTEGER,                     -- the brain conversation it was asked in
    request         TEXT    NOT NULL,            -- the message as typed
    title           TEXT    NOT NULL DEFAULT '',
    state           TEXT    NOT NULL,            -- planning | awaiting_approval | approved | done | failed
    mission_id      INTEGER,
    plan_log        TEXT    NOT NULL DEFAULT '[]',  -- JSON list of what the planner's output lost (bad edges, extra tasks)
    planner_tokens  INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    plan_decision   INTEGER,                     -- L0: the decision approving every dispatch of the plan at once
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS core_loop_projects_state ON core_loop_projects (state);

-- A planned child task: its position in the plan, acceptance criteria and plan priority.
CREATE TABLE IF NOT EXISTS core_loop_tasks (
    task_id     INTEGER PRIMARY KEY,             -- the ledger task
    project     INTEGER NOT NULL REFERENCES core_loop_projects (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,                -- 1-based position in the plan
    acceptance  TEXT    NOT NULL DEFAULT '[]',   -- JSON list of acceptance criteria
    priority    TEXT    NOT NULL DEFAULT 'medium',  -- critical | high | medium | low
    dropped     INTEGER NOT NULL DEFAULT 0,      -- 1: the executor gave up on it
    drop_reason TEXT,
    dispatch_decision INTEGER                    -- the open dispatch decision of its next turn (missions only)
);
CREATE INDEX IF NOT EXISTS core_loop_tasks_project ON core_loop_tasks (project, position);

-- One executor run over a project; iterations are counted before each turn is released.
CREATE TABLE IF NOT EXISTS core_loop_runs (
    id           INTEGER PRIMARY KEY,
    project      INTEGER NOT NULL REFERENCES core_loop_projects (id) ON DELETE CASCADE,
    state        TEXT    NOT NULL,               -- running | ended
    iterations   INTEGER NOT NULL DEFAULT 0,
    pulsed       INTEGER NOT NULL DEFAULT 0,     -- closed tasks already reported by a pulse
    started_at   TEXT    NOT NULL,
    ended_at     TEXT,
    stop_reason  TEXT,                           -- complete | partial | blocked | cap | budget
    spend_tokens INTEGER NOT NULL DEFAULT 0,
    receipt      TEXT                            -- JSON receipt, once ended
);
CREATE INDEX IF NOT EXISTS core_loop_runs_project ON core_loop_runs (project, state);

-- One agent turn the executor released: what the ledger showed before it.
CREATE TABLE IF NOT EXISTS core_loop_turns (
    id              INTEGER PRIMARY KEY,
    run             INTEGER NOT NULL REFERENCES core_loop_runs (id) ON DELETE CASCADE,
    iteration       INTEGER NOT NULL,
    task_id         INTEGER NOT NULL,
    attempts_before INTEGER NOT NULL,
    notes_before    INTEGER NOT NULL,
    started_at      TEXT    NOT NULL,
    ended_at        TEXT,
    outcome         TEXT                         -- closed | progress | no_progress | timeout
);
CREATE INDEX IF NOT EXISTS core_loop_turns_run ON core_loop_turns (run, id);

-- The agents plugin's tables (applied by the kernel store, versioned per plugin).
-- schema-version: 2

-- One row per agent launch: a coding-agent CLI running a task in a tmux session.
-- state: running (spawned or re-adopted) | exited (the CLI ended or its pane died) |
--        ended (Elowen ended it: task closed/cancelled, or relaunched).
CREATE TABLE IF NOT EXISTS agent_sessions (
    id              INTEGER PRIMARY KEY,
    task_id         INTEGER NOT NULL,
    attempt         INTEGER NOT NULL CHECK (attempt >= 1),
    provider        TEXT    NOT NULL,
    model           TEXT    NOT NULL DEFAULT '',
    session         TEXT    NOT NULL UNIQUE,         -- tmux session name elowen-t<task>-a<attempt>
    pane_id         TEXT    NOT NULL DEFAULT '',     -- %N
    pid             INTEGER,
    cli_session_id  TEXT,                            -- the CLI's own conversation id
    workdir         TEXT    NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'exited', 'ended')),
    signal          TEXT    NOT NULL DEFAULT 'starting',  -- last derived screen state
    env             TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(env)),  -- non-secret spawn env (for resume lookups)
    started_at      TEXT    NOT NULL,
    ended_at        TEXT,
    exit_status     INTEGER,
    end_reason      TEXT,
    project_id      INTEGER                          -- the task's project at spawn (kept if the task is deleted)
);
CREATE INDEX IF NOT EXISTS agent_sessions_task ON agent_sessions (task_id, attempt);
CREATE INDEX IF NOT EXISTS agent_sessions_state ON agent_sessions (state);

-- Decisions: something an agent (or liveness) needs answered.
-- kind: prompt (CLI permission prompt) | question (CLI choice list) | review | message | check.
-- payload: {"request", "options", "numbers", "fingerprint", "instance", "state", "cli"}.
CREATE TABLE IF NOT EXISTS decisions (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (kind IN ('prompt', 'question', 'review', 'message', 'check')),
    task_id      INTEGER,
    session      TEXT,
    payload      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    status       TEXT    NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'approved', 'rejected', 'escalated', 'answered', 'expired')),
    confidence   REAL,
    decided_by   TEXT,
    rationale    TEXT,
    answer       TEXT    CHECK (answer IS NULL OR json_valid(answer)),  -- {"action", "keys", "sent", ...}
    created_at   TEXT    NOT NULL,
    decided_at   TEXT,
    project_id   INTEGER                            -- the task's project when created (kept if the task is deleted)
);
CREATE INDEX IF NOT EXISTS decisions_status ON decisions (status, id);
CREATE INDEX IF NOT EXISTS decisions_task ON decisions (task_id, id);

-- upgrade to 2
-- Sessions and decisions keep their task's project, so their events stay in that project
-- after the task is deleted (events of no project reach admins only).
ALTER TABLE agent_sessions ADD COLUMN project_id INTEGER;
ALTER TABLE decisions ADD COLUMN project_id INTEGER;
UPDATE agent_sessions SET project_id = (SELECT t.project_id FROM tasks t WHERE t.id = agent_sessions.task_id);
UPDATE decisions SET project_id = (SELECT t.project_id FROM tasks t WHERE t.id = decisions.task_id);

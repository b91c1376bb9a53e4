-- schema-version: 1
-- Cron jobs and a record for every due fire (see docs/cron.md).
CREATE TABLE IF NOT EXISTS cron_jobs (
    id INTEGER PRIMARY KEY,
    owner_id INTEGER NOT NULL,
    owner_role TEXT NOT NULL,                 -- the owner's role when the job was made: a demotion stops the job
    name TEXT NOT NULL DEFAULT '',
    prompt TEXT NOT NULL,
    schedule TEXT NOT NULL,                   -- as typed
    tz TEXT NOT NULL,
    spec TEXT NOT NULL,                       -- the parsed schedule (JSON)
    project_id INTEGER,
    model TEXT NOT NULL DEFAULT '',
    deliver TEXT NOT NULL DEFAULT 'notify',   -- notify | none
    catchup TEXT NOT NULL DEFAULT 'skip',     -- skip | once | all
    catchup_cap INTEGER NOT NULL DEFAULT 10,
    state TEXT NOT NULL DEFAULT 'active',     -- active | paused | done | stopped
    stop_reason TEXT,
    next_fire TEXT,                           -- UTC ISO 8601; NULL: no further fire
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cron_jobs_due ON cron_jobs (next_fire) WHERE next_fire IS NOT NULL;
CREATE INDEX IF NOT EXISTS cron_jobs_owner ON cron_jobs (owner_id);

CREATE TABLE IF NOT EXISTS cron_runs (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL REFERENCES cron_jobs(id) ON DELETE CASCADE,
    scheduled_for TEXT NOT NULL,              -- the due fire time (UTC); run-now: the request time
    trigger TEXT NOT NULL DEFAULT 'schedule', -- schedule | catchup | manual
    status TEXT NOT NULL,                     -- claimed | running | ran | failed | missed | skipped
    error TEXT,
    conversation_id INTEGER,
    result TEXT,
    delivered TEXT,                           -- notify:<id> | event | none | failed: <why>
    claimed_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    UNIQUE (job_id, scheduled_for, trigger)
);
CREATE INDEX IF NOT EXISTS cron_runs_job ON cron_runs (job_id, id);
CREATE INDEX IF NOT EXISTS cron_runs_open ON cron_runs (status) WHERE status IN ('claimed', 'running');

CREATE TABLE IF NOT EXISTS cron_ticker (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    heartbeat TEXT NOT NULL,                  -- last tick (UTC)
    started_at TEXT NOT NULL,                 -- when this ticker started
    restarts INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS cron_gaps (
    id INTEGER PRIMARY KEY,
    gap_start TEXT NOT NULL,                  -- the last heartbeat before the gap
    gap_end TEXT NOT NULL,                    -- the first tick after it
    reason TEXT NOT NULL                      -- daemon_down | ticker_restarted
);

-- schema-version: 1
-- The inference plugin's tables: one row per relay call (retries included in one row).
CREATE TABLE IF NOT EXISTS inference_usage (
    id            INTEGER PRIMARY KEY,
    ts            TEXT    NOT NULL,             -- UTC ISO 8601, when the call finished
    provider      TEXT    NOT NULL,             -- the configured provider name
    model         TEXT    NOT NULL,             -- the model part of the spec
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    latency_ms    INTEGER NOT NULL DEFAULT 0,   -- wall time of the whole call, retries included
    ok            INTEGER NOT NULL,             -- 1 answered, 0 failed
    purpose       TEXT    NOT NULL DEFAULT ''   -- overseer, brain, planner, curator…
);
CREATE INDEX IF NOT EXISTS inference_usage_ts ON inference_usage (ts);
CREATE INDEX IF NOT EXISTS inference_usage_provider_model ON inference_usage (provider, model);

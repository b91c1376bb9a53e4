-- The Elowen kernel schema, applied by elowen.core.store.Store.
--
-- Format (parsed by elowen.core.store.parse_schema):
--   * the "-- version: N" line gives the current schema version (stored in PRAGMA user_version);
--   * everything before the first "-- upgrade to" line is the COMPLETE current schema, run on a
--     fresh database (user_version 0);
--   * each "-- upgrade to N" section turns a version N-1 database into version N; an existing
--     database runs the sections above its user_version, in order.
--   All of it runs in one transaction together with the user_version update.
-- To change the schema: edit the complete schema above, bump the version, and append an
-- "-- upgrade to N" section doing the same change to an existing database.
--
-- version: 1

-- The event bus's durable log (elowen.core.events). AUTOINCREMENT keeps ids increasing even
-- after pruning, so an SSE Last-Event-ID never points at a reused id.
CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    ts          TEXT    NOT NULL,               -- UTC ISO 8601, e.g. 2026-11-30T12:00:00.123Z
    project_id  INTEGER                         -- NULL for global events
);
CREATE INDEX events_project ON events (project_id, id);

-- Audit records, written only by the store's audit writer task.
CREATE TABLE audit (
    id       INTEGER PRIMARY KEY,
    ts       TEXT NOT NULL,                     -- UTC ISO 8601
    actor    TEXT NOT NULL,                     -- "user:<id>", "plugin:<name>", "kernel", ...
    action   TEXT NOT NULL,                     -- dotted, e.g. "hook.mutate", "plugin.enable"
    target   TEXT NOT NULL DEFAULT '',
    outcome  TEXT NOT NULL DEFAULT 'ok',        -- "ok", "denied", "error", "timeout", ...
    detail   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail))
);
CREATE INDEX audit_actor ON audit (actor, id);
CREATE INDEX audit_action ON audit (action, id);

-- One row per plugin that applied its own schema (Store.apply_plugin_schema).
CREATE TABLE plugin_schemas (
    plugin      TEXT PRIMARY KEY,
    version     INTEGER NOT NULL CHECK (version >= 1),
    applied_at  TEXT    NOT NULL                -- UTC ISO 8601
);

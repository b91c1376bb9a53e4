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
-- version: 5

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

-- ---------------------------------------------------------------------------------------------
-- Daemon tables (elowen.daemon): users, tokens, projects, tasks.

-- Users. allowed_execs / tool_grants: JSON lists of glob patterns / tool names; allowed_execs
-- NULL means "the daemon's [execs] allowed list, no further restriction". password_hash: NULL
-- (no password: token login only) or "scrypt$n$r$p$salt$hash" (elowen.daemon.passwords).
-- kind: 'person' (made through the API), or 'overseer': the principal a mission's parked
-- overseer CLI acts as, bound to mission_id (the users service makes these; never the name).
CREATE TABLE users (
    id             INTEGER PRIMARY KEY,
    name           TEXT    NOT NULL UNIQUE,
    role           TEXT    NOT NULL CHECK (role IN ('admin', 'member')),
    allowed_execs  TEXT             CHECK (allowed_execs IS NULL OR json_valid(allowed_execs)),
    tool_grants    TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(tool_grants)),
    created_at     TEXT    NOT NULL,               -- UTC ISO 8601
    password_hash  TEXT,
    kind           TEXT    NOT NULL DEFAULT 'person' CHECK (kind IN ('person', 'overseer')),
    mission_id     INTEGER CHECK ((kind = 'overseer') = (mission_id IS NOT NULL))
);
CREATE UNIQUE INDEX users_overseer_mission ON users (mission_id) WHERE kind = 'overseer';

-- The highest user (and project) id ever deleted: a new user's id is above it (UsersService.create), so a
-- deleted user's id, under which plugins keep memories, jobs and conversations, is never
-- handed to someone else (an INTEGER PRIMARY KEY alone reuses the highest id once deleted).
CREATE TABLE id_highwater (
    name        TEXT    PRIMARY KEY,
    n           INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER users_highwater AFTER DELETE ON users BEGIN
    INSERT INTO id_highwater (name, n) VALUES ('users', OLD.id) ON CONFLICT (name) DO UPDATE SET n = max(n, excluded.n);
END;

-- Projects: a folder on disk (path stored resolved).
CREATE TABLE projects (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    path        TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL
);
-- a new project's id is above every id ever deleted (ProjectService.create), as for users
CREATE TRIGGER projects_highwater AFTER DELETE ON projects BEGIN
    INSERT INTO id_highwater (name, n) VALUES ('projects', OLD.id) ON CONFLICT (name) DO UPDATE SET n = max(n, excluded.n);
END;

-- Which projects a member may see and act on (admins see every project).
CREATE TABLE user_projects (
    user_id     INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    project_id  INTEGER NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    PRIMARY KEY (user_id, project_id)
) WITHOUT ROWID;
CREATE INDEX user_projects_project ON user_projects (project_id);

-- Tasks. evidence: JSON list of strings.
CREATE TABLE tasks (
    id           INTEGER PRIMARY KEY,
    title        TEXT    NOT NULL,
    description  TEXT    NOT NULL DEFAULT '',
    project_id   INTEGER NOT NULL REFERENCES projects (id),
    state        TEXT    NOT NULL DEFAULT 'open'
                 CHECK (state IN ('open', 'in_progress', 'blocked', 'closed', 'cancelled')),
    priority     INTEGER NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4),
    parent_id    INTEGER REFERENCES tasks (id) ON DELETE SET NULL,
    exec         TEXT,                             -- executor spec as written, NULL: fallback
    owner_id     INTEGER REFERENCES users (id) ON DELETE SET NULL,
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    resume_note  TEXT,
    summary      TEXT,
    evidence     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(evidence)),
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    closed_at    TEXT
);
CREATE INDEX tasks_project ON tasks (project_id, id);
CREATE INDEX tasks_state ON tasks (state, id);
CREATE INDEX tasks_parent ON tasks (parent_id);

-- task_id depends on dep_id (task_id is ready once every dep is closed). Acyclic (the daemon
-- rejects cycles).
CREATE TABLE task_deps (
    task_id  INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    dep_id   INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    PRIMARY KEY (task_id, dep_id),
    CHECK (task_id <> dep_id)
) WITHOUT ROWID;
CREATE INDEX task_deps_dep ON task_deps (dep_id);

CREATE TABLE task_labels (
    task_id  INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    label    TEXT    NOT NULL,
    PRIMARY KEY (task_id, label)
) WITHOUT ROWID;
CREATE INDEX task_labels_label ON task_labels (label, task_id);

-- Progress notes posted on a task (by its agent or a user).
CREATE TABLE task_progress (
    id       INTEGER PRIMARY KEY,
    task_id  INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    author   TEXT    NOT NULL,                     -- "user:<id>" or "agent:task:<id>"
    text     TEXT    NOT NULL,
    ts       TEXT    NOT NULL
);
CREATE INDEX task_progress_task ON task_progress (task_id, id);

-- API tokens, stored as sha256 hex of the token. scope 'agent' binds the token to one task.
-- origin 'login': made by POST /auth/login (POST /auth/logout revokes only those); 'issued':
-- every other token (user creation, POST /users/{id}/tokens, admin.token, agent tokens).
CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER REFERENCES users (id) ON DELETE CASCADE,
    hash        TEXT    NOT NULL UNIQUE,
    scope       TEXT    NOT NULL CHECK (scope IN ('full', 'agent')),
    task_id     INTEGER REFERENCES tasks (id) ON DELETE CASCADE,
    created_at  TEXT    NOT NULL,
    origin      TEXT    NOT NULL DEFAULT 'issued' CHECK (origin IN ('issued', 'login')),
    CHECK ((scope = 'agent') = (task_id IS NOT NULL)),
    CHECK (scope = 'agent' OR user_id IS NOT NULL)
);
CREATE INDEX tokens_user ON tokens (user_id);
CREATE INDEX tokens_task ON tokens (task_id);

-- upgrade to 2
-- User/password login: users may have a password; tokens made by POST /auth/login are marked.
ALTER TABLE users ADD COLUMN password_hash TEXT;
ALTER TABLE tokens ADD COLUMN origin TEXT NOT NULL DEFAULT 'issued' CHECK (origin IN ('issued', 'login'));

-- upgrade to 3
-- Overseer principals are marked (kind, mission_id) instead of being told by their name. Users
-- made by earlier versions stay persons (a name proves nothing): with no projects and no tool
-- grants they can do nothing, and a mission's next overseer gets a marked principal.
ALTER TABLE users ADD COLUMN kind TEXT NOT NULL DEFAULT 'person' CHECK (kind IN ('person', 'overseer'));
ALTER TABLE users ADD COLUMN mission_id INTEGER CHECK ((kind = 'overseer') = (mission_id IS NOT NULL));
CREATE UNIQUE INDEX users_overseer_mission ON users (mission_id) WHERE kind = 'overseer';

-- upgrade to 4
-- Deleted user ids are never reused (see id_highwater above). Ids deleted before this version
-- are not known; the current highest id is the starting mark.
CREATE TABLE IF NOT EXISTS id_highwater (
    name        TEXT    PRIMARY KEY,
    n           INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS users_highwater AFTER DELETE ON users BEGIN
    INSERT INTO id_highwater (name, n) VALUES ('users', OLD.id) ON CONFLICT (name) DO UPDATE SET n = max(n, excluded.n);
END;
INSERT INTO id_highwater (name, n) SELECT 'users', coalesce(max(id), 0) FROM users WHERE true
    ON CONFLICT (name) DO UPDATE SET n = max(n, excluded.n);

-- upgrade to 5
-- Deleted project ids are never reused either (plugins keep missions, memories' project scope
-- and more under a project id). Ids deleted before this version are not known; the current
-- highest id is the starting mark.
CREATE TRIGGER IF NOT EXISTS projects_highwater AFTER DELETE ON projects BEGIN
    INSERT INTO id_highwater (name, n) VALUES ('projects', OLD.id) ON CONFLICT (name) DO UPDATE SET n = max(n, excluded.n);
END;
INSERT INTO id_highwater (name, n) SELECT 'projects', coalesce(max(id), 0) FROM projects WHERE true
    ON CONFLICT (name) DO UPDATE SET n = max(n, excluded.n);

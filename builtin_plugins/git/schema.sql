-- The git plugin's tables (applied by the kernel store, versioned per plugin).
-- schema-version: 1

-- One row per task that got its own worktree. state: active (the worktree exists) |
-- merged (its branch was merged into base; worktree and branch removed) |
-- discarded (removed without merging).
CREATE TABLE IF NOT EXISTS task_worktrees (
    task_id        INTEGER PRIMARY KEY,
    project_id     INTEGER NOT NULL,
    repo           TEXT    NOT NULL,   -- the project folder (a git work tree)
    path           TEXT    NOT NULL,   -- the task's worktree folder
    branch         TEXT    NOT NULL,   -- elowen/task-<id>
    base           TEXT    NOT NULL,   -- the branch it was made from
    base_commit    TEXT    NOT NULL,   -- base's commit when it was made
    state          TEXT    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'merged', 'discarded')),
    merged_commit  TEXT,
    created_at     TEXT    NOT NULL,
    updated_at     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS task_worktrees_state ON task_worktrees (state, task_id);

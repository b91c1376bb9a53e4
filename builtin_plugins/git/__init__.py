"""The ``git`` plugin: a git worktree and branch per task, and the git reader (status, diff,
commits) behind the task page's review panel, ``elowen task diff|merge|discard`` and
``/tasks/{id}/worktree``."""

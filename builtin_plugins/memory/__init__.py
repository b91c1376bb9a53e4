"""The builtin ``memory`` plugin: per-user long-term memory (store, embedding queue, ranked
recall at turn start, brain tools, REST routes)."""

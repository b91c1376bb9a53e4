"""The ``brain`` plugin: the agent the user talks to (conversations, turns, tools, approvals,
goals, the brain worker for ``elowen:`` tasks). See ``docs/brain.md``."""

"""The ``subagent`` plugin: the brain tools ``delegate`` and ``delegate_batch``."""
